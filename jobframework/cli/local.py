"""``jf demo``, ``jf dev`` and ``jf worker``: running jobs on this machine, and worker processes."""

from __future__ import annotations

import gc
import json
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer

from jobframework.cli.aws import aws_of, check_reachable
from jobframework.cli.base import (
    JobsOption,
    JsonOption,
    app,
    job_module_names,
    print_json,
    require_jobs,
    rich_console,
)
from jobframework.cli.errors import EXIT_FAILED, CliError, cannot_listen


@app.command()
def demo(
    json_output: JsonOption = False,
    port: Annotated[
        int, typer.Option(help="Port of the embedded AWS (0: a free one).", min=0, max=65535)
    ] = 0,
    timeout: Annotated[float, typer.Option(help="Give up after this many seconds.", min=5)] = 120.0,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show the jobs' and consumer's logs.")
    ] = False,
) -> None:
    """The whole job lifecycle on the embedded AWS, then a summary (no AWS account needed).

    Example: jf demo
    """
    from jobframework.local.demo import run_demo
    from jobframework.local.demo_summary import BANNER, render_summary

    console = rich_console()
    if not json_output:
        console.print(BANNER)
    report = run_demo(
        console=None if json_output else console,
        live=not json_output,
        port=port,
        timeout=timeout,
        verbose=verbose,
    )
    if json_output:
        print_json(report.as_dict())
    else:
        console.print(render_summary(report))
    ok = report.settled and report.redriven_succeeded == report.redriven
    if not ok:
        raise CliError("the demo's workload did not settle in time", EXIT_FAILED)


DEV_WAIT_SECONDS = 2
"""``jf dev``'s long poll: an idle queue costs one receive per 2 s (Ctrl-C does not wait for it: the
embedded AWS stops with the process, so a receive still waiting holds nothing)."""


@app.command()
def dev(  # noqa: PLR0917
    jobs: JobsOption = None,
    port: Annotated[
        int, typer.Option(help="Port of the embedded AWS (0: a free one).", min=0, max=65535)
    ] = 0,
    stage: Annotated[str, typer.Option(help="Stage name of the local topology.")] = "dev",
    app_name: Annotated[
        str,
        typer.Option(
            "--app",
            help="App name of the local topology, as the construct's app_name (names its queues, tables "
            "and the service of its log lines: <app>-<stage>-high, ...).",
        ),
    ] = "jf",
    drain_timeout: Annotated[float, typer.Option(help="Seconds to finish in-flight batches on stop.")] = 10.0,
    fair_lookahead: Annotated[
        int,
        typer.Option(
            min=0, help="Serve each queue's tenants (MessageGroupId) round-robin within N messages (0: off)."
        ),
    ] = 100,
    json_logs: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Every stdout line a JSON object: a 'ready' line (the exports under 'env'), the logs, one "
            "record per job outcome, a 'stopped' line.",
        ),
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            "-v",
            help="Print every hand-back (a record over a limit, held back or waiting for its debounce "
            "window, handed back unrun), not the first of each job type and one line per 30 s.",
        ),
    ] = False,
    run_workers: Annotated[
        bool,
        typer.Option(
            "--workers/--no-workers",
            help="Run the consumers (--no-workers: the embedded AWS and the schedules only, for `jf worker` "
            "or a consumer of your own to poll).",
        ),
    ] = True,
) -> None:
    """Embedded AWS, workers and scheduler for your job modules, until Ctrl-C.

    Prints the variables that point a shell at the embedded AWS once, then one line per job
    outcome (succeeded, retry in N s, dead-lettered with its reason) and the jobs' logs.

    Example: jf dev --jobs myapp.jobs --app myapp --port 4566
    """
    import logging

    import boto3

    from jobframework.consumer import consumer
    from jobframework.delays import fire_due
    from jobframework.jobs import registry
    from jobframework.local.aws import (
        FAKE_CREDENTIALS,
        EmbeddedAWS,
        missing_keys_note,
        pooled_botocore_session,
    )
    from jobframework.local.banner import ready_lines
    from jobframework.local.console import install, log_as_app
    from jobframework.local.emulator import Emulator, pollers_for
    from jobframework.local.scheduler import LocalScheduler, sqs_sender
    from jobframework.local.signals import until_signal
    from jobframework.local.tally import OutcomeTally, stop_counts, stop_summary
    from jobframework.topology import ENV_JOBS, ENV_TOPOLOGY_PARAMETER, Topology, TopologySettings

    names = job_module_names(jobs)  # none named: said before the logging and the console are set up
    # Other libraries' warnings go to stderr; the framework's and the jobs' records to stdout.
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        settings = TopologySettings(stage=stage, app=app_name)
    except ValueError:  # pydantic's: the names AWS resources take
        raise typer.BadParameter(
            f"--app {app_name!r} --stage {stage!r}: each is lowercase letters, digits and '-', starting "
            "with a letter (app at most 21 characters, stage 16), as the construct's app_name and stage",
            param_hint="--app/--stage",
        ) from None
    log_as_app(settings.app)  # the service of the log lines, as the stack names it
    listener = install(json_logs=json_logs, every_handback=verbose)
    modules = require_jobs(names)
    try:
        aws = EmbeddedAWS(port).start()
    except OSError as exc:  # a port in use is a bad --port (exit 2, as jf ui says it)
        what = "cannot start the embedded AWS"
        raise cannot_listen(what, "127.0.0.1", port, exc, host_option=False) from exc
    try:
        # The consumer's own clients (DynamoDB, S3) come from boto3's default session: size it too.
        boto3.setup_default_session(botocore_session=pooled_botocore_session())
        topology = Topology.from_registry(registry, settings)
        config = aws.provision(topology)
        if (note := missing_keys_note(config, aws.session())) is not None:
            typer.echo(note, err=True)
        sqs = aws.client("sqs")
        env = {
            **FAKE_CREDENTIALS,
            **config.to_env(),
            ENV_TOPOLOGY_PARAMETER: topology.topology_parameter,
            ENV_JOBS: ",".join(modules),
        }
        emulator = None
        tally = OutcomeTally()
        if run_workers:
            handler = consumer(registry, config=config, sqs_client=sqs, listeners=[listener, tally])
            emulator = Emulator(
                pollers_for(config, topology),
                handler,
                sqs,
                wait_time_seconds=DEV_WAIT_SECONDS,
                paused=_pause_watch(config, aws.client("dynamodb")),
                fair_lookahead=fair_lookahead,
            )
        scheduler_client = aws.client("scheduler")
        scheduler = LocalScheduler(
            topology.schedules,
            sqs_sender(config, sqs),
            # Delays over 15 minutes are Scheduler one-time schedules; the embedded one never fires them.
            tasks=[lambda: fire_due(scheduler_client, sqs, config.schedule_group)],
        ).start()
        for line in ready_lines(
            endpoint_url=aws.endpoint_url,
            modules=modules,
            env=env,
            schedules=scheduler.describe(),
            workers=emulator is not None,
            json_lines=json_logs,
            retry_budget=config.retry_budget,
        ):
            typer.echo(line)
        sys.stdout.flush()
        drained = True
        if emulator is None:
            until_signal(scheduler.stop)
            summary = "jf dev: stopped (no workers)"
            if json_logs:
                summary = json.dumps({"event": "stopped", "stopped": "jf dev", "workers": False})
        else:
            # Its queues go with it: Ctrl-C waits for the batches being run, not for idle long polls.
            drained = emulator.run_until_signal(
                drain_timeout=drain_timeout, on_stop=scheduler.stop, wait_for_receives=False
            )
            summary = stop_summary("jf dev", emulator.stats, tally, drained=drained)
            if json_logs:  # the console's lines are JSON: so is this one
                summary = json.dumps(
                    {
                        "event": "stopped",
                        "stopped": "jf dev",
                        **stop_counts(emulator.stats, tally, drained=drained),
                    }
                )
    finally:
        aws.stop()
    typer.echo(summary)
    # The interpreter's last collection would walk the embedded AWS's objects (about 0.6 s here).
    gc.freeze()
    if not drained:  # as jf worker's: a script running jf dev learns that jobs were cut off
        raise CliError(
            f"drain time ran out (--drain-timeout {drain_timeout:g}): the jobs still running were cut off, "
            "and the embedded AWS's queues are gone with it"
        )


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
    fair_lookahead: Annotated[
        int,
        typer.Option(
            min=0,
            help="Serve each queue's tenants (MessageGroupId) round-robin within N held messages (0: off).",
        ),
    ] = 0,
    exact_lanes: Annotated[
        bool,
        typer.Option(
            "--exact-lanes",
            help="--queues names lanes exactly: default is the default lane only, not default-io, "
            "default-cpu or default-fifo (what a container lane's task runs).",
        ),
    ] = False,
) -> None:
    """Poll the queues and run jobs as a long-running process (ECS, EC2), with Lambda's semantics.

    Example: jf worker --queues critical,high --jobs myapp.jobs
    """
    import logging
    import os

    import boto3

    from jobframework.consumer import consumer
    from jobframework.errors import ConfigurationError
    from jobframework.jobs import lane_priority, registry
    from jobframework.local.aws import pooled_botocore_session
    from jobframework.local.console import log_as_app, outcome_listener, worker_log
    from jobframework.local.emulator import Emulator, pollers_for, worker_processes
    from jobframework.local.tally import OutcomeTally, stop_counts, stop_summary
    from jobframework.topology import Topology, TopologySettings, app_of_parameter

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
    names = job_module_names(jobs)
    # Only once the arguments are good: a handler left on a closed stream would outlive a bad call.
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("botocore").setLevel(logging.WARNING)  # not a line per client about credentials
    require_jobs(names)
    aws = aws_of(ctx)
    config = aws.runtime_config()
    log_as_app(app_of_parameter(config.topology_parameter))  # the service of the log lines, as deployed
    if config.endpoint_url:  # a local endpoint: no CloudWatch reads the consumer's EMF lines
        os.environ.setdefault("JF_METRICS_DISABLED", "true")  # (a job's own metrics still print)
    # The consumer's own clients (DynamoDB, S3) come from boto3's default session: size its pools.
    boto3.setup_default_session(botocore_session=pooled_botocore_session())
    sqs = aws.sqs(config, attempts=4)
    topology = Topology.from_registry(registry, TopologySettings(stage=stage))
    pollers = pollers_for(config, topology, chosen, region=sqs.meta.region_name, exact=exact_lanes)
    if not pollers:
        raise typer.BadParameter(f"{queues!r} names no queue of this topology", param_hint="--queues")
    for poller in pollers:
        check_reachable(sqs, poller.url)
    children = _spawn_worker_processes(worker_processes(pollers, topology, processes) - 1)
    wait_seconds = wait if wait is not None else (0 if config.endpoint_url else 1)
    tally = OutcomeTally()
    handler = consumer(
        registry, config=config, sqs_client=sqs, listeners=[outcome_listener(always=False), tally]
    )
    emulator = Emulator(
        pollers,
        handler,
        sqs,
        workers=workers,
        wait_time_seconds=wait_seconds,
        region=sqs.meta.region_name,
        paused=_pause_watch(config, aws.client("dynamodb", config=config)),
        fair_lookahead=fair_lookahead,
    )
    # Log lines as the jobs' and the outcomes' (JSON), not text among them.
    log = worker_log()
    log.info(
        "jf worker: polling %s in %d process(es); SIGTERM or Ctrl-C drains and stops",
        ", ".join(p.name for p in pollers),
        len(children) + 1,
        extra={"queues": [p.name for p in pollers], "processes": len(children) + 1},
    )
    try:
        drained = emulator.run_until_signal(drain_timeout=drain_timeout)
    finally:
        drained_children = _stop_worker_processes(children, drain_timeout)
    drained = drained and drained_children
    log.log(
        logging.INFO if drained else logging.WARNING,
        stop_summary("jf worker", emulator.stats, tally, drained=drained),
        extra=stop_counts(emulator.stats, tally, drained=drained),
    )
    if not drained:
        raise CliError("drain time ran out; the unfinished records reappear after their visibility timeout")


def _pause_watch(config: Any, dynamodb: Any) -> Callable[[], frozenset[str]] | None:
    """The lanes ``jf queue pause`` paused, as the emulator asks for them (none without a state table)."""
    if not config.state_table:
        return None
    from jobframework.flow.pause import PauseWatch
    from jobframework.state import StateStore

    return PauseWatch(StateStore(config.state_table, dynamodb)).current


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
