"""The ``jf`` command: the local runtime, enqueueing, DLQ tooling and retry plans.

Exit codes (scripts can rely on them):

- 0: done;
- 1: the operation failed (AWS refused it, a job or payload is wrong, the demo did not settle);
- 2: bad arguments (usage);
- 3: the endpoint cannot be reached;
- 4: the endpoint does not implement the operation (e.g. ``--native`` on the embedded AWS);
- 130: interrupted.

Errors are one line on stderr (``jf: error: ...``), never a traceback. AWS is reached through
the normal boto3 chain (profile, region) or ``JF_ENDPOINT_URL``; the queues come from
``JF_QUEUE_URL_<PRIORITY>``/``JF_DLQ_URL_<PRIORITY>`` or the SSM parameter the stack writes
(``JF_TOPOLOGY_PARAMETER``, default ``/jf/dev/topology``). The Lambda path never imports this
module; heavy modules are imported inside the commands.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from typer import Abort as ClickAbort
from typer._click.exceptions import UsageError  # typer carries its own copy of click
from typer.core import TyperGroup

if TYPE_CHECKING:
    import boto3

    from jobframework.dlq import DeadLetters
    from jobframework.topology import RuntimeConfig

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_NOT_SUPPORTED = 4
EXIT_INTERRUPTED = 130
DEFAULT_JOBS = "handlers.jobs"
DEFAULT_PARAMETER = "/jf/dev/topology"
CONNECT_TIMEOUT = 2
"""Seconds to wait for a TCP connection before calling an endpoint unreachable."""


class PriorityName(StrEnum):
    critical = "critical"
    high = "high"
    default = "default"
    low = "low"


class CliError(Exception):
    """A failure to report as one line with an exit code."""

    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.code = code


def _fail(message: str, code: int) -> NoReturn:
    typer.echo(f"jf: error: {message}", err=True)
    sys.exit(code)


def _connection_error(exc: BaseException) -> BaseException | None:
    from botocore.exceptions import ConnectionError as BotoConnectionError
    from botocore.exceptions import ConnectTimeoutError, EndpointConnectionError, ReadTimeoutError

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, EndpointConnectionError | ConnectTimeoutError | BotoConnectionError):
            return seen
        if isinstance(seen, ReadTimeoutError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


class JfGroup(TyperGroup):
    """Typer's group with one-line errors and stable exit codes instead of panels and tracebacks."""

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        try:
            code = super().main(
                args=args, prog_name=prog_name, complete_var=complete_var, standalone_mode=False, **extra
            )
        except UsageError as exc:
            hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
            _fail(_one_line(exc.format_message()) + hint, EXIT_USAGE)
        except ClickAbort:
            _fail("interrupted", EXIT_INTERRUPTED)
        except KeyboardInterrupt:
            _fail("interrupted", EXIT_INTERRUPTED)
        except CliError as exc:
            _fail(_one_line(str(exc)), exc.code)
        except Exception as exc:
            _fail(*_describe(exc))
        sys.exit(code if isinstance(code, int) else 0)


def _describe(exc: Exception) -> tuple[str, int]:
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError

    from jobframework.errors import EndpointNotSupportedError, JobFrameworkError

    conn = _connection_error(exc)
    if conn is not None:
        return f"cannot reach the AWS endpoint: {_one_line(str(conn))}", EXIT_UNREACHABLE
    if isinstance(exc, EndpointNotSupportedError):
        return _one_line(str(exc)), EXIT_NOT_SUPPORTED
    if isinstance(exc, NoCredentialsError):
        return "no AWS credentials: set a profile (--profile/AWS_PROFILE) or run `jf dev`", EXIT_FAILED
    if isinstance(exc, NoRegionError):
        return "no AWS region: pass --region or set AWS_REGION", EXIT_FAILED
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        return f"AWS refused the request: {error.get('Code')}: {_one_line(error.get('Message', ''))}", 1
    if isinstance(exc, JobFrameworkError | BotoCoreError | ValueError | OSError):
        return _one_line(str(exc)) or type(exc).__name__, EXIT_FAILED
    return f"{type(exc).__name__}: {_one_line(str(exc))}", EXIT_FAILED


app = typer.Typer(
    cls=JfGroup,
    name="jf",
    help="Background jobs on AWS serverless: run them locally, enqueue, inspect and redrive dead letters.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
dlq_app = typer.Typer(
    cls=TyperGroup,
    help="Inspect, export, purge and redrive dead letters.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(dlq_app, name="dlq")
saga_app = typer.Typer(
    cls=TyperGroup,
    help="List sagas and show one: steps, states, attempts, outputs, errors, timings.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(saga_app, name="saga")


# --- AWS access -----------------------------------------------------------------------------------------


@dataclass
class Aws:
    endpoint_url: str | None = None
    region: str | None = None
    profile: str | None = None

    def session(self, region: str | None = None) -> boto3.Session:
        import boto3

        try:
            session = boto3.Session(profile_name=self.profile, region_name=self.region or region)
        except Exception as exc:
            raise CliError(f"cannot use AWS profile {self.profile!r}: {exc}") from exc
        region_name: str | None = session.region_name
        if region_name is None and self.endpoint_url:
            session = boto3.Session(profile_name=self.profile, region_name="us-east-1")
        return session

    def client(self, service: str, *, config: RuntimeConfig | None = None, attempts: int = 2) -> Any:
        from botocore.config import Config

        session = self.session(config.region if config else None)
        return session.client(  # type: ignore[call-overload]
            service,
            endpoint_url=self.endpoint_url or (config.endpoint_url if config else None),
            config=Config(
                connect_timeout=CONNECT_TIMEOUT,
                read_timeout=30,
                retries={"max_attempts": attempts, "mode": "standard"},
            ),
        )

    def runtime_config(self) -> RuntimeConfig:
        """The topology's queue URLs: ``JF_*`` variables, else the SSM parameter."""
        from jobframework.errors import ConfigurationError
        from jobframework.topology import ENV_TOPOLOGY_PARAMETER, RuntimeConfig

        env = dict(os.environ)
        if self.endpoint_url:
            env["JF_ENDPOINT_URL"] = self.endpoint_url
        if self.region:
            env["JF_REGION"] = self.region
        env.setdefault(ENV_TOPOLOGY_PARAMETER, DEFAULT_PARAMETER)
        try:
            config = RuntimeConfig.from_env(env, ssm_client=self.client("ssm"))
        except ConfigurationError as exc:
            conn = _connection_error(exc)
            if conn is not None:
                raise CliError(
                    f"cannot reach the AWS endpoint: {_one_line(str(conn))}", EXIT_UNREACHABLE
                ) from exc
            raise CliError(
                f"{_one_line(str(exc))} (set JF_QUEUE_URL_<PRIORITY>/JF_DLQ_URL_<PRIORITY>, or "
                "JF_TOPOLOGY_PARAMETER, or export what `jf dev` prints)"
            ) from exc
        updates: dict[str, Any] = {}
        if self.endpoint_url:
            updates["endpoint_url"] = self.endpoint_url
        if self.region:
            updates["region"] = self.region
        return config.model_copy(update=updates) if updates else config

    def sqs(self, config: RuntimeConfig, *, attempts: int = 2) -> Any:
        return self.client("sqs", config=config, attempts=attempts)


def _aws(ctx: typer.Context) -> Aws:
    obj = ctx.find_root().obj
    return obj if isinstance(obj, Aws) else Aws(endpoint_url=os.environ.get("JF_ENDPOINT_URL") or None)


def _check_reachable(sqs: Any, url: str) -> None:
    """Fail fast (exit 3) when the endpoint does not answer."""
    sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])


@app.callback()
def _root(
    ctx: typer.Context,
    endpoint_url: Annotated[
        str | None,
        typer.Option(
            "--endpoint-url", envvar="JF_ENDPOINT_URL", help="AWS endpoint (the embedded AWS of `jf dev`)."
        ),
    ] = None,
    region: Annotated[str | None, typer.Option("--region", envvar="JF_REGION", help="AWS region.")] = None,
    profile: Annotated[
        str | None, typer.Option("--profile", envvar="AWS_PROFILE", help="AWS profile.")
    ] = None,
) -> None:
    """jf: run jobs locally (demo, dev, worker), enqueue, and operate the dead-letter queues."""
    ctx.obj = Aws(endpoint_url=endpoint_url or None, region=region or None, profile=profile or None)


# --- shared helpers ---------------------------------------------------------------------------------------


JobsOption = Annotated[
    list[str] | None,
    typer.Option(
        "--jobs",
        help="Module that registers jobs (repeatable; default: JF_JOBS or handlers.jobs).",
        show_default=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]


def _load_jobs(modules: list[str] | None) -> list[str]:
    """Import the job modules (the current directory is importable, as with celery or uvicorn)."""
    from jobframework.consumer import import_job_modules

    names = modules or [m for m in os.environ.get("JF_JOBS", DEFAULT_JOBS).split(",") if m.strip()]
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        import_job_modules(names)
    except ImportError as exc:
        raise CliError(f"cannot import job module: {exc}") from exc
    return names


def _print_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, default=str))


def _console(*, stderr: bool = False) -> Any:
    from rich.console import Console

    return Console(stderr=stderr)


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|d)?\s*$")
_UNITS = {None: 1, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``15m``, ``2h``, ``1d`` as seconds.

    Example:
        >>> parse_duration("15m")
        900.0
    """
    m = _DURATION.match(text)
    if not m:
        raise typer.BadParameter(f"{text!r} is not a duration; use e.g. 90s, 15m, 2h or 1d")
    return float(m.group(1)) * _UNITS[m.group(2)]


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.1f}s" if seconds < 10 else f"{seconds:.0f}s"


# --- jf demo / dev / worker -------------------------------------------------------------------------------


@app.command()
def demo(
    json_output: JsonOption = False,
    port: Annotated[
        int, typer.Option(help="Port of the embedded AWS (0: a free one).", min=0, max=65535)
    ] = 0,
    timeout: Annotated[float, typer.Option(help="Give up after this many seconds.", min=5)] = 50.0,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show the jobs' and consumer's logs.")
    ] = False,
) -> None:
    """The whole job lifecycle on the embedded AWS, then a summary (no AWS account needed).

    Example: jf demo
    """
    from jobframework.local.demo import render_summary, run_demo

    console = _console()
    if not json_output:
        console.print("[bold]jf demo[/]: embedded AWS, the example jobs, the real consumer; about 10 s")
    report = run_demo(
        console=None if json_output else console,
        live=not json_output,
        port=port,
        timeout=timeout,
        verbose=verbose,
    )
    if json_output:
        _print_json(report.as_dict())
    else:
        console.print(render_summary(report))
    ok = report.settled and report.redriven_succeeded == report.redriven
    if not ok:
        raise CliError("the demo's workload did not settle in time", EXIT_FAILED)


@app.command()
def dev(
    jobs: JobsOption = None,
    port: Annotated[
        int, typer.Option(help="Port of the embedded AWS (0: a free one).", min=0, max=65535)
    ] = 0,
    stage: Annotated[str, typer.Option(help="Stage name of the local topology.")] = "dev",
    drain_timeout: Annotated[float, typer.Option(help="Seconds to finish in-flight batches on stop.")] = 10.0,
) -> None:
    """Embedded AWS, workers and scheduler for your job modules, until Ctrl-C.

    Example: jf dev --jobs myapp.jobs --port 4566
    """
    import logging

    from jobframework.consumer import consumer
    from jobframework.delays import fire_due
    from jobframework.jobs import registry
    from jobframework.local.aws import FAKE_CREDENTIALS, EmbeddedAWS
    from jobframework.local.emulator import Emulator, pollers_for
    from jobframework.local.scheduler import LocalScheduler, sqs_sender
    from jobframework.topology import ENV_JOBS, ENV_TOPOLOGY_PARAMETER, Topology, TopologySettings

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    modules = _load_jobs(jobs)
    try:
        aws = EmbeddedAWS(port).start()
    except OSError as exc:
        raise CliError(f"cannot start the embedded AWS on port {port}: {exc}") from exc
    try:
        topology = Topology.from_registry(registry, TopologySettings(stage=stage))
        config = aws.provision(topology)
        sqs = aws.client("sqs")
        env = {
            **FAKE_CREDENTIALS,
            **config.to_env(),
            ENV_TOPOLOGY_PARAMETER: topology.topology_parameter,
            ENV_JOBS: ",".join(modules),
        }
        typer.echo(f"# embedded AWS at {aws.endpoint_url}; jobs from {', '.join(modules)}; Ctrl-C stops")
        typer.echo("# other jf commands and your services reach it with:")
        for name, value in env.items():
            typer.echo(f"export {name}={value}")
        sys.stdout.flush()
        handler = consumer(registry, config=config, sqs_client=sqs)
        emulator = Emulator(pollers_for(config, topology), handler, sqs, max_idle_seconds=0.25)
        scheduler_client = aws.client("scheduler")
        scheduler = LocalScheduler(
            topology.schedules,
            sqs_sender(config, sqs),
            # Delays over 15 minutes are Scheduler one-time schedules; the embedded one never fires them.
            tasks=[lambda: fire_due(scheduler_client, sqs, config.schedule_group)],
        ).start()
        for entry in scheduler.describe():
            typer.echo(f"# schedule {entry['job']} {entry['expression']} next {entry['next']}")
        sys.stdout.flush()
        emulator.run_until_signal(drain_timeout=drain_timeout, on_stop=scheduler.stop)
    finally:
        aws.stop()


@app.command()
def worker(  # noqa: PLR0917
    ctx: typer.Context,
    queues: Annotated[
        str,
        typer.Option(help="Comma-separated priorities or lanes to poll, e.g. critical,high or low-cpu."),
    ] = "critical,high,default,low",
    jobs: JobsOption = None,
    workers: Annotated[
        int | None, typer.Option(help="Worker threads (default: sum of queue concurrency).")
    ] = None,
    processes: Annotated[
        int | None,
        typer.Option(
            min=1, help="Worker processes (default: one per core when polling a cpu lane, else one)."
        ),
    ] = None,
    wait: Annotated[
        int | None,
        typer.Option(help="ReceiveMessage WaitTimeSeconds (default 0 with an endpoint URL, else 1)."),
    ] = None,
    drain_timeout: Annotated[
        float, typer.Option(help="Seconds to finish in-flight batches on SIGTERM.")
    ] = 30.0,
    stage: Annotated[str, typer.Option(help="Stage whose topology settings apply.")] = "dev",
) -> None:
    """Poll the queues and run jobs as a long-running process (ECS, EC2), with Lambda's semantics.

    Example: jf worker --queues critical,high --jobs myapp.jobs
    """
    import logging

    from jobframework.consumer import consumer
    from jobframework.errors import ConfigurationError
    from jobframework.jobs import lane_priority, registry
    from jobframework.local.emulator import Emulator, pollers_for, worker_processes
    from jobframework.topology import Topology, TopologySettings

    chosen = [q.strip() for q in queues.split(",") if q.strip()]
    try:
        for name in chosen:
            lane_priority(name)
    except ConfigurationError:
        raise typer.BadParameter(
            f"{queues!r}: use priorities from critical,high,default,low, or lanes such as low-cpu",
            param_hint="--queues",
        ) from None
    if not chosen:
        raise typer.BadParameter("name at least one queue", param_hint="--queues")
    # Only once the arguments are good: a handler left on a closed stream would outlive a bad call.
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _load_jobs(jobs)
    aws = _aws(ctx)
    config = aws.runtime_config()
    sqs = aws.sqs(config, attempts=4)
    topology = Topology.from_registry(registry, TopologySettings(stage=stage))
    pollers = pollers_for(config, topology, chosen, region=sqs.meta.region_name)
    if not pollers:
        raise typer.BadParameter(f"{queues!r} names no queue of this topology", param_hint="--queues")
    for poller in pollers:
        _check_reachable(sqs, poller.url)
    children = _spawn_worker_processes(worker_processes(pollers, topology, processes) - 1)
    wait_seconds = wait if wait is not None else (0 if config.endpoint_url else 1)
    handler = consumer(registry, config=config, sqs_client=sqs)
    emulator = Emulator(
        pollers,
        handler,
        sqs,
        workers=workers,
        wait_time_seconds=wait_seconds,
        region=sqs.meta.region_name,
    )
    typer.echo(
        f"jf worker: polling {', '.join(p.name for p in pollers)} in {len(children) + 1} process(es); "
        "SIGTERM or Ctrl-C drains and stops"
    )
    sys.stdout.flush()
    try:
        drained = emulator.run_until_signal(drain_timeout=drain_timeout)
    finally:
        drained_children = _stop_worker_processes(children, drain_timeout)
    drained = drained and drained_children
    stats = emulator.stats
    typer.echo(
        f"jf worker: stopped ({'drained' if drained else 'drain time ran out'}); "
        f"{stats.records} records in {stats.batches} batches, {stats.deleted} done, {stats.failed} to retry"
    )
    if not drained:
        raise CliError("drain time ran out; the unfinished records reappear after their visibility timeout")


def _spawn_worker_processes(count: int) -> list[subprocess.Popen[bytes]]:
    """Start ``count`` more ``jf worker`` processes with this one's arguments (one process each)."""
    if count <= 0:
        return []
    args = [a for a in sys.argv[1:] if not a.startswith("--processes")]
    if "--processes" in sys.argv[1:]:  # "--processes N" as two words
        i = sys.argv.index("--processes")
        args = sys.argv[1:i] + sys.argv[i + 2 :]
    command = [sys.executable, "-m", "jobframework.cli", *args, "--processes", "1"]
    return [subprocess.Popen(command) for _ in range(count)]


def _stop_worker_processes(children: list[subprocess.Popen[bytes]], drain_timeout: float) -> bool:
    """SIGTERM the child workers and wait for their drain; ``True`` when all drained cleanly."""
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    clean = True
    for child in children:
        try:
            code = child.wait(timeout=drain_timeout + 10)
            # Killed by the SIGTERM itself: it had not installed its handler, so it had not polled yet.
            clean = code in (0, -signal.SIGTERM) and clean
        except subprocess.TimeoutExpired:
            child.kill()
            clean = False
    return clean


# --- jf enqueue / retry-plan ------------------------------------------------------------------------------


@app.command()
def enqueue(  # noqa: PLR0917
    ctx: typer.Context,
    job_type: Annotated[
        str, typer.Argument(metavar="TYPE", help="Registered job name, e.g. reports.generate.")
    ],
    payload: Annotated[str, typer.Argument(metavar="JSON", help="The payload as a JSON object.")],
    key: Annotated[str | None, typer.Option(help="Idempotency/dedup key.")] = None,
    delay: Annotated[
        float | None, typer.Option(help="Seconds before it becomes visible (max 900).", min=0)
    ] = None,
    priority: Annotated[PriorityName | None, typer.Option(help="Send to another priority's queue.")] = None,
    jobs: JobsOption = None,
    json_output: JsonOption = False,
) -> None:
    """Enqueue one job; prints its id.

    Example: jf enqueue reports.generate '{"report_id": "r-1"}'
    """
    try:
        data = json.loads(payload)
    except ValueError as exc:
        raise typer.BadParameter(f"not JSON: {exc}", param_hint="JSON") from None
    if not isinstance(data, dict):
        raise typer.BadParameter("the payload must be a JSON object", param_hint="JSON")
    _load_jobs(jobs)
    from jobframework.client import JobClient

    aws = _aws(ctx)
    config = aws.runtime_config()
    client = JobClient(config, sqs_client=aws.sqs(config))
    client.job(job_type)  # an unknown type fails before any AWS call
    result = client.enqueue(
        job_type, data, key=key, delay=delay, priority=priority.value if priority else None
    )
    if json_output:
        _print_json(
            {
                "id": result.id,
                "key": result.key,
                "type": result.job_type,
                "priority": result.priority.value,
                "message_id": result.message_id,
            }
        )
    else:
        typer.echo(result.id)


@app.command()
def status(
    ctx: typer.Context,
    job_id: Annotated[str, typer.Argument(metavar="ID", help="The job id that enqueue printed.")],
    json_output: JsonOption = False,
) -> None:
    """What is known of a job: queued, scheduled, running, retrying, succeeded or dead.

    Example: jf status 0190b8a4-6f1e-7c3a-9d2b-1a2b3c4d5e6f
    """
    if not 0 < len(job_id) <= 128:
        raise typer.BadParameter("a job id has 1 to 128 characters", param_hint="ID")
    from jobframework.client import JobClient

    aws = _aws(ctx)
    config = aws.runtime_config()
    client = JobClient(
        config,
        sqs_client=aws.sqs(config),
        clients={"dynamodb": aws.client("dynamodb", config=config)},
    )
    found = client.status(job_id)
    if found is None:
        raise CliError(f"no job {job_id} in the state table (unknown id, or its status expired)")
    if json_output:
        _print_json(found.model_dump(mode="json"))
        return
    rows = {
        "id": found.id,
        "type": found.type,
        "status": found.status.value,
        "attempts": found.attempts,
        "key": found.key,
        "enqueued at": found.enqueued_at,
        "started at": found.started_at,
        "finished at": found.finished_at,
        "updated at": found.updated_at,
        "reason": found.reason,
        "error": found.error,
        "result": None if found.result is None else json.dumps(found.result),
    }
    for name, value in rows.items():
        if value is not None:
            typer.echo(f"{name + ':':<13} {value}")


@app.command("retry-plan")
def retry_plan(
    job_type: Annotated[str, typer.Argument(metavar="TYPE", help="Registered job name.")],
    jobs: JobsOption = None,
    json_output: JsonOption = False,
) -> None:
    """The retry schedule of a job's policy: attempt, delay range, cumulative time.

    Example: jf retry-plan webhooks.deliver
    """
    _load_jobs(jobs)
    from jobframework.errors import UnknownJobError
    from jobframework.jobs import registry

    try:
        job = registry.get(job_type)
    except UnknownJobError:
        known = ", ".join(j.name for j in registry) or "none"
        raise CliError(f"no job named {job_type!r} is registered (known: {known})") from None
    rows = []
    low_total = high_total = 0.0
    for attempt, low, high in job.retry.schedule():
        low_total += low
        high_total += high
        rows.append(
            {
                "attempt": attempt,
                "next_attempt": attempt + 1,
                "delay_min": round(low, 3),
                "delay_max": round(high, 3),
                "cumulative_min": round(low_total, 3),
                "cumulative_max": round(high_total, 3),
            }
        )
    if json_output:
        _print_json({"type": job.name, "max_attempts": job.retry.max_attempts, "retries": rows})
        return
    from rich.table import Table

    table = Table(title=f"{job.name}: {job.retry.max_attempts} attempts, then the DLQ", title_justify="left")
    for name in ("failed attempt", "next attempt after", "cumulative"):
        table.add_column(name, justify="right")
    for row in rows:
        table.add_row(
            str(row["attempt"]),
            f"{_age(row['delay_min'])} - {_age(row['delay_max'])}",
            f"{_age(row['cumulative_min'])} - {_age(row['cumulative_max'])}",
        )
    if not rows:
        table.add_row("1", "no retry", "-")
    _console().print(table)


# --- jf dlq ... -----------------------------------------------------------------------------------------

PriorityArg = Annotated[PriorityName, typer.Argument(help="Which DLQ: critical, high, default or low.")]


def _dead_letters(ctx: typer.Context, *, attempts: int = 2) -> tuple[DeadLetters, RuntimeConfig]:
    from jobframework.dlq import DeadLetters

    aws = _aws(ctx)
    config = aws.runtime_config()
    sqs = aws.sqs(config, attempts=attempts)
    return DeadLetters(config, sqs, wait_time_seconds=0 if config.endpoint_url else 1), config


@dlq_app.command("ls")
def dlq_ls(
    ctx: typer.Context,
    json_output: JsonOption = False,
    sample: Annotated[
        int, typer.Option(help="Messages read per DLQ to find the oldest (0: skip).", min=0)
    ] = 100,
) -> None:
    """Each DLQ's depth and the age of its oldest dead letter.

    Example: jf dlq ls
    """
    letters, _ = _dead_letters(ctx)
    depths = letters.depths(sample=sample)
    if json_output:
        _print_json([asdict(d) for d in depths])
        return
    from rich.table import Table

    table = Table()
    for name in ("dlq", "queue", "depth", "in flight", "oldest"):
        table.add_column(name, justify="right" if name in ("depth", "in flight", "oldest") else "left")
    for d in depths:
        oldest = _age(d.oldest_age_seconds) + ("+" if d.sampled and d.sampled < d.depth else "")
        table.add_row(d.priority, d.name, str(d.depth), str(d.in_flight), oldest)
    _console().print(table)


@dlq_app.command("peek")
def dlq_peek(
    ctx: typer.Context,
    priority: PriorityArg,
    count: Annotated[int, typer.Option("-n", "--count", help="How many to show.", min=1, max=1000)] = 10,
    json_output: JsonOption = False,
) -> None:
    """Show dead letters (type, id, reason, error, attempts, dead-at) without removing anything.

    Example: jf dlq peek default -n 5
    """
    letters, _ = _dead_letters(ctx)
    found = letters.peek(priority.value, limit=count)
    pointers = [_payload_pointer(d.body) for d in found]
    if json_output:
        _print_json(
            [
                {**d.summary(), **({"payload_ref": ref} if ref else {})}
                for d, ref in zip(found, pointers, strict=True)
            ]
        )
        return
    from rich.table import Table

    table = Table(title=f"{priority.value} DLQ: {len(found)} shown", title_justify="left")
    columns = ["type", "id", "reason", "error", "attempts", "dead at"]
    if any(pointers):
        columns.append("payload")
    for name in columns:
        table.add_column(name, overflow="fold")
    for d, ref in zip(found, pointers, strict=True):
        s = d.summary()
        row = [
            s["type"] or "?",
            s["id"] or "-",
            s["reason"] or "-",
            s["error"] or "-",
            str(s["attempts"] or "-"),
            s["dead_at"] or "-",
        ]
        if any(pointers):
            row.append(f"{ref['uri']} ({ref['size']:,} bytes)" if ref else "inline")
        table.add_row(*row)
    _console().print(table)


def _payload_pointer(body: str) -> dict[str, Any] | None:
    """Where an offloaded payload is (``payload_ref`` in the body): ``{"uri": "s3://...", "size": n}``."""
    try:
        ref = json.loads(body).get("payload_ref")
    except (ValueError, AttributeError):
        return None
    if not isinstance(ref, dict) or not ref.get("bucket") or not ref.get("key"):
        return None
    return {"uri": f"s3://{ref['bucket']}/{ref['key']}", "size": ref.get("size"), "sha256": ref.get("sha256")}


@dlq_app.command("export")
def dlq_export(
    ctx: typer.Context,
    priority: PriorityArg,
    out: Annotated[Path, typer.Option("--out", "-o", help="JSON Lines file to write ('-' for stdout).")],
) -> None:
    """Write every dead letter (body, attributes, reason) as JSON Lines; nothing is removed.

    Example: jf dlq export low --out low-dlq.jsonl
    """
    letters, _ = _dead_letters(ctx)
    if str(out) == "-":
        count = letters.export(priority.value, sys.stdout)
        return
    try:
        with out.open("w", encoding="utf-8") as fh:
            count = letters.export(priority.value, fh)
    except OSError as exc:
        raise CliError(f"cannot write {out}: {exc.strerror or exc}") from exc
    typer.echo(f"exported {count} dead letters to {out}")


@dlq_app.command("purge")
def dlq_purge(
    ctx: typer.Context,
    priority: PriorityArg,
    job_type: Annotated[
        str | None, typer.Option("--type", help="Only dead letters of this job type.")
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", help="Really delete (required).")] = False,
    json_output: JsonOption = False,
) -> None:
    """Delete dead letters for good (all, or one job type). Needs --yes.

    Example: jf dlq purge low --type reports.generate --yes
    """
    if not yes:
        raise UsageError("purge deletes dead letters for good; add --yes to confirm")
    letters, _ = _dead_letters(ctx)
    deleted = letters.purge(priority.value, job_type=job_type)
    if json_output:
        _print_json({"priority": priority.value, "type": job_type, "deleted": deleted})
    else:
        typer.echo(f"deleted {deleted} dead letters from the {priority.value} DLQ")


@dlq_app.command("redrive")
def dlq_redrive(  # noqa: PLR0917
    ctx: typer.Context,
    priority: PriorityArg,
    job_type: Annotated[str | None, typer.Option("--type", help="Only this job type.")] = None,
    older_than: Annotated[
        str | None, typer.Option(help="Only dead letters at least this old (90s, 15m, 2h, 1d).")
    ] = None,
    limit: Annotated[int | None, typer.Option(help="At most this many.", min=1)] = None,
    rate: Annotated[float | None, typer.Option(help="At most this many messages a second.", min=0.1)] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show what would move; move nothing.")] = False,
    native: Annotated[
        bool,
        typer.Option("--native", help="Start an SQS StartMessageMoveTask instead (the console's redrive)."),
    ] = False,
    json_output: JsonOption = False,
) -> None:
    """Send dead letters back to their source queue: attempts reset; id, key and trace kept.

    Each message is deleted from the DLQ only after its send succeeded.

    Example: jf dlq redrive default --type crm.sync --older-than 10m --dry-run
    """
    seconds = parse_duration(older_than) if older_than else None
    if native:
        if job_type or seconds or limit or dry_run:
            raise UsageError(
                "--native moves the whole DLQ: it takes no --type, --older-than, --limit or --dry-run"
            )
        letters, _ = _dead_letters(ctx, attempts=1)
        handle = letters.start_native_redrive(priority.value, rate=int(rate) if rate else None)
        if json_output:
            _print_json({"task_handle": handle})
        else:
            typer.echo(f"started message move task {handle}; follow it with `jf dlq tasks {priority.value}`")
        return
    letters, _ = _dead_letters(ctx)
    depth = letters.depths(sample=0)
    total = next((d.depth for d in depth if d.priority == priority.value), 0)
    if json_output:
        result = letters.redrive(
            priority.value, job_type=job_type, older_than=seconds, limit=limit, rate=rate, dry_run=dry_run
        )
    else:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        verb = "matching" if dry_run else "redriving"
        with Progress(
            TextColumn(f"{verb} {priority.value} DLQ"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=_console(stderr=True),
        ) as bar:
            task = bar.add_task(verb, total=min(total, limit) if limit else total or None)
            result = letters.redrive(
                priority.value,
                job_type=job_type,
                older_than=seconds,
                limit=limit,
                rate=rate,
                dry_run=dry_run,
                progress=lambda n: bar.advance(task, n),
            )
    if json_output:
        _print_json(result.as_dict())
    else:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(result.by_type.items())) or "none"
        if dry_run:
            typer.echo(f"dry run: would redrive {result.matched} ({kinds}); {result.skipped} not matching")
        else:
            typer.echo(
                f"redrove {result.moved} ({kinds}); {result.skipped} not matching; {result.failed} failed"
            )
    if result.failed:
        raise CliError(
            f"{result.failed} dead letters could not be sent (they stay in the DLQ): {result.errors[0]}"
        )


@dlq_app.command("tasks")
def dlq_tasks(ctx: typer.Context, priority: PriorityArg, json_output: JsonOption = False) -> None:
    """The DLQ's native redrive tasks (StartMessageMoveTask) and their progress.

    Example: jf dlq tasks default
    """
    letters, _ = _dead_letters(ctx, attempts=1)
    tasks = letters.native_tasks(priority.value)
    if json_output:
        _print_json(tasks)
        return
    if not tasks:
        typer.echo(f"no message move tasks on the {priority.value} DLQ")
    for t in tasks:
        typer.echo(
            f"{t.get('Status')}: {t.get('ApproximateNumberOfMessagesMoved', 0)}/"
            f"{t.get('ApproximateNumberOfMessagesToMove', '?')} moved, started {t.get('StartedTimestamp')}"
            + (f", {t['FailureReason']}" if t.get("FailureReason") else "")
        )


# --- jf saga ... ----------------------------------------------------------------------------------------


class SagaStatusName(StrEnum):
    running = "running"
    compensating = "compensating"
    succeeded = "succeeded"
    compensated = "compensated"
    failed = "failed"


def _saga_store(ctx: typer.Context) -> Any:
    from jobframework.state import StateStore

    aws = _aws(ctx)
    config = aws.runtime_config()
    if not config.state_table:
        raise CliError("sagas live in the state table: set JF_STATE_TABLE (or use the stack's topology)")
    return StateStore(config.state_table, aws.client("dynamodb", config=config))


@saga_app.command("ls")
def saga_ls(
    ctx: typer.Context,
    status: Annotated[SagaStatusName | None, typer.Option(help="Only sagas with this status.")] = None,
    name: Annotated[str | None, typer.Option("--name", help="Only sagas of this name.")] = None,
    limit: Annotated[int, typer.Option(help="At most this many, newest first.", min=1)] = 50,
    json_output: JsonOption = False,
) -> None:
    """Sagas, newest first: id, name, status, current step, age, reason.

    Example: jf saga ls --status failed
    """
    from jobframework.saga import list_sagas
    from jobframework.saga_view import saga_summary

    found = list_sagas(_saga_store(ctx), status=status.value if status else None, name=name, limit=limit)
    rows = [saga_summary(r) for r in found]
    if json_output:
        _print_json(rows)
        return
    from rich.table import Table

    table = Table(title=f"{len(rows)} sagas", title_justify="left")
    for column in ("id", "name", "status", "step", "started", "reason"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(
            row["id"], row["name"], row["status"], row["step"] or "-", row["created_at"], row["reason"] or "-"
        )
    _console().print(table)


@saga_app.command("show")
def saga_show(
    ctx: typer.Context,
    saga_id: Annotated[str, typer.Argument(metavar="ID", help="The saga id that start() returned.")],
    json_output: JsonOption = False,
) -> None:
    """One saga: status, reason, trace, and each step's state, attempts, output, error and timings.

    Example: jf saga show 0190a5c4-...
    """
    from jobframework.saga import load_saga
    from jobframework.saga_view import saga_table

    record = load_saga(_saga_store(ctx), saga_id)
    if record is None:
        raise CliError(f"no saga {saga_id} (never started, or its record expired)")
    if json_output:
        _print_json(record.model_dump(mode="json"))
        return
    _console().print(saga_table(record))


def main(argv: Sequence[str] | None = None) -> None:
    """The ``jf`` console script."""
    command = typer.main.get_command(app)
    command.main(args=list(argv) if argv is not None else None, prog_name="jf")


if __name__ == "__main__":
    main()
