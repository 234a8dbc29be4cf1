"""``jf worker``: polling the queues and running jobs as a long-running process, in one or more
processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer

from jobframework.cli.aws import aws_of, check_reachable
from jobframework.cli.base import JobsOption, app, job_module_names, require_jobs
from jobframework.cli.errors import CliError


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
    child: Annotated[
        str | None, typer.Option(hidden=True, help="N/M: this is process N of M (started by process 1).")
    ] = None,
    counts_file: Annotated[
        Path | None, typer.Option(hidden=True, help="Where a child process writes its counts at stop.")
    ] = None,
) -> None:
    """Poll the queues and run jobs as a long-running process (ECS, EC2), with Lambda's semantics.

    Example: jf worker --queues critical,high --jobs myapp.jobs
    """
    import logging

    import boto3

    from jobframework.consumer import consumer
    from jobframework.errors import ConfigurationError
    from jobframework.flow.pause import pause_watch
    from jobframework.jobs import lane_priority, registry
    from jobframework.local.aws import pooled_botocore_session
    from jobframework.local.console import log_as_app, outcome_listener, worker_log
    from jobframework.local.emulator import Emulator, pollers_for, worker_processes
    from jobframework.local.tally import OutcomeTally, stop_counts, stop_summary, totals_text, write_counts
    from jobframework.topology import Topology, TopologySettings
    from jobframework.topology_settings import app_of_parameter

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
    scratch = tempfile.TemporaryDirectory(prefix="jf-worker-")  # (the children's counts)
    children = _spawn_worker_processes(worker_processes(pollers, topology, processes) - 1, Path(scratch.name))
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
        paused=pause_watch(config, aws.client("dynamodb", config=config)),
        fair_lookahead=fair_lookahead,
    )
    # Log lines as the jobs' and the outcomes' (JSON), not text among them.
    log = worker_log()
    count = int(child.partition("/")[2] or 1) if child else len(children) + 1
    where = f"(process {child})" if child else f"in {count} process(es)"
    log.info(
        "jf worker: polling %s %s; SIGTERM or Ctrl-C drains and stops",
        ", ".join(p.name for p in pollers),
        where,
        extra={"queues": [p.name for p in pollers], "processes": count},
    )
    try:
        drained = emulator.run_until_signal(drain_timeout=drain_timeout)
    finally:
        drained_children = _stop_worker_processes(children, drain_timeout)
    own = stop_counts(emulator.stats, tally, drained=drained)
    if counts_file is not None:  # (a child: its counts for process 1's total)
        write_counts(counts_file, own)
    drained = drained and drained_children
    name = f"jf worker (process {child or f'1/{count}'})" if count > 1 else "jf worker"
    log.log(
        logging.INFO if drained else logging.WARNING,
        stop_summary(name, emulator.stats, tally, drained=drained),
        extra=own,
    )
    if children:
        totals = _totals(own, Path(scratch.name), len(children))
        log.log(
            logging.INFO if drained else logging.WARNING,
            f"jf worker: stopped ({'drained' if drained else 'drain time ran out'}); in all "
            f"({len(children) + 1} processes): {totals_text(totals)}",
            extra={**totals, "drained": drained, "processes": len(children) + 1},
        )
    scratch.cleanup()
    if not drained:
        raise CliError("drain time ran out; the unfinished records reappear after their visibility timeout")


def _spawn_worker_processes(count: int, scratch: Path) -> list[subprocess.Popen[bytes]]:
    """Start ``count`` more ``jf worker`` processes with this one's arguments (one process each), each
    writing its counts at its stop to ``scratch/<n>.json``."""
    if count <= 0:
        return []
    from jobframework.local.reload import without_options

    args = without_options(sys.argv[1:], [], ["--processes"])  # (--processes N and --processes=N)
    command = [sys.executable, "-m", "jobframework.cli", *args, "--processes", "1"]
    return [
        subprocess.Popen(
            [*command, "--child", f"{n + 2}/{count + 1}", "--counts-file", str(scratch / f"{n + 2}.json")]
        )
        for n in range(count)
    ]


def _totals(own: dict[str, Any], scratch: Path, children: int) -> dict[str, int]:
    """This process's counts and its stopped children's, summed (a child that wrote none: not counted)."""
    from jobframework.local.tally import add_counts, read_counts

    totals: dict[str, int] = {}
    add_counts(totals, own)
    for n in range(children):
        counts = read_counts(scratch / f"{n + 2}.json")
        if counts is not None:
            add_counts(totals, counts)
    return totals


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
