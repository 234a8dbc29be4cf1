"""``jf dev``: the embedded AWS, workers and scheduler for your job modules (``--reload``: the workers
restart with your code)."""

from __future__ import annotations

import gc
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from jobframework.cli.base import (
    JobsOption,
    app,
    job_module_names,
    require_jobs,
)
from jobframework.cli.errors import CliError, cannot_listen

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
    reload_code: Annotated[
        bool,
        typer.Option(
            "--reload",
            help="Restart the workers and the scheduler with your code when a .py file under the current "
            "directory or your job packages changes; the embedded AWS (queues, dead letters, statuses) "
            "stays.",
        ),
    ] = False,
    reload_exclude: Annotated[
        list[str] | None,
        typer.Option(
            "--reload-exclude",
            metavar="PATTERN",
            help="With --reload: files whose change reloads nothing, as a glob on the path (repeatable; "
            "e.g. 'scripts/*'). Tests are excluded already (tests/*, test_*.py, *_test.py, conftest.py); "
            "--reload-exclude '' watches them too.",
        ),
    ] = None,
    attached: Annotated[
        bool, typer.Option("--attached", hidden=True, help="The embedded AWS on --port is jf dev --reload's.")
    ] = False,
    reloaded: Annotated[int, typer.Option(hidden=True, help="Reloads before this start.")] = 0,
    counts_file: Annotated[
        Path | None, typer.Option(hidden=True, help="Where the attached workers write their counts at stop.")
    ] = None,
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
    from jobframework.flow.pause import pause_watch
    from jobframework.jobs import registry
    from jobframework.local.aws import (
        FAKE_CREDENTIALS,
        EmbeddedAWS,
        missing_keys_note,
        pooled_botocore_session,
        use_fake_credentials,
    )
    from jobframework.local.banner import ready_lines
    from jobframework.local.console import install, log_as_app
    from jobframework.local.emulator import Emulator, pollers_for
    from jobframework.local.leftover import leftover
    from jobframework.local.reload import exit_with_parent, lanes_note
    from jobframework.local.scheduler import LocalScheduler, sqs_sender
    from jobframework.local.signals import until_signal
    from jobframework.local.tally import OutcomeTally, stop_counts, stop_summary, write_counts
    from jobframework.topology import ENV_JOBS, ENV_TOPOLOGY_PARAMETER, Topology, TopologySettings

    if reload_exclude is not None and not reload_code:
        raise typer.BadParameter(
            "--reload-exclude tells --reload what to leave out: add --reload, or drop --reload-exclude",
            param_hint="--reload-exclude",
        )
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
    if reload_code and not attached:
        raise typer.Exit(
            _dev_with_reload(
                port,
                names,
                reload_exclude,
                drain_timeout=drain_timeout,
                json_logs=json_logs,
                workers=run_workers,
            )
        )
    log_as_app(settings.app)  # the service of the log lines, as the stack names it
    listener = install(json_logs=json_logs, every_handback=verbose)
    # (jf dev --reload's workers: each module left out is said once, not again at every reload)
    modules = require_jobs(names, said=counts_file.with_name("unlisted.json") if counts_file else None)
    aws = EmbeddedAWS(port)
    if attached:  # jf dev --reload's child: the embedded AWS is its parent's
        use_fake_credentials()
        exit_with_parent()
    else:
        _start_embedded(aws)
    try:
        # The consumer's own clients (DynamoDB, S3) come from boto3's default session: size it too.
        boto3.setup_default_session(botocore_session=pooled_botocore_session())
        topology = Topology.from_registry(registry, settings)
        lanes_before = _lanes_of_parameter(aws, topology.topology_parameter) if reloaded else None
        config = aws.provision(topology)
        if not reloaded and (note := missing_keys_note(config, aws.session())) is not None:
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
                paused=pause_watch(config, aws.client("dynamodb")),
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
            reloaded=reloaded > 0,
        ):
            typer.echo(line)
        if not json_logs:  # (--json's ready line carries the exports anew each time)
            for line in lanes_note(lanes_before, env, config.queues):
                typer.echo(line)
        sys.stdout.flush()
        drained = True
        if emulator is None:
            until_signal(scheduler.stop)
            summary = "jf dev: stopped (no workers)"
            record: dict[str, Any] = {"event": "stopped", "stopped": "jf dev", "workers": False}
        else:
            # Its queues go with it: Ctrl-C waits for the batches being run, not for idle long polls.
            # Attached (jf dev --reload's workers), the queues outlive this process: a receive under way
            # is waited for (what it got would be in flight for its visibility timeout), and what the
            # drain time cuts off is made visible again, for the next workers.
            drained = emulator.run_until_signal(
                drain_timeout=drain_timeout,
                on_stop=scheduler.stop,
                wait_for_receives=attached,
                release_unfinished=attached,
                why="jf dev: stopping these workers (a reload, jf dev stopping, or a SIGTERM)"
                if attached
                else None,
            )
            name = "jf dev workers" if attached else "jf dev"  # (a reload stops them, not jf dev)
            summary = stop_summary(name, emulator.stats, tally, drained=drained)
            counts = stop_counts(emulator.stats, tally, drained=drained)
            if counts_file is not None:  # (for jf dev --reload's totals over its reloads)
                write_counts(counts_file, counts)
            record = {"event": "stopped", "stopped": name, **counts}
        if not attached:  # what its queues still hold goes with the embedded AWS: say so
            left = leftover(sqs)
            record["left"] = left.as_json()
            if left:
                summary += f"; gone with the embedded AWS: {left.text()}"
        if json_logs:  # the console's lines are JSON: so is this one
            summary = json.dumps(record)
    finally:
        if not attached:
            aws.stop()
    typer.echo(summary)
    # The interpreter's last collection would walk the embedded AWS's objects (about 0.6 s here).
    gc.freeze()
    if not drained and attached:
        raise CliError(
            f"drain time ran out (--drain-timeout {drain_timeout:g}): the jobs still running were cut off "
            "and handed back to their queues, for the reloaded workers to run again"
        )
    if not drained:  # as jf worker's: a script running jf dev learns that jobs were cut off
        raise CliError(
            f"drain time ran out (--drain-timeout {drain_timeout:g}): the jobs still running were cut off, "
            "and the embedded AWS's queues are gone with it"
        )


def _lanes_of_parameter(aws: Any, parameter: str) -> list[str] | None:
    """The lanes the topology parameter named before this start (the last workers' provisioning)."""
    from jobframework.config import RuntimeConfig
    from jobframework.errors import ConfigurationError

    try:
        return list(RuntimeConfig.from_parameter(parameter, ssm_client=aws.client("ssm")).queues)
    except ConfigurationError:
        return None


def _start_embedded(aws: Any) -> None:
    try:
        aws.start()
    except OSError as exc:  # a port in use is a bad --port (exit 2, as jf ui says it)
        what = "cannot start the embedded AWS"
        raise cannot_listen(what, "127.0.0.1", aws.port, exc, host_option=False) from exc


def _dev_with_reload(
    port: int,
    names: list[str],
    exclude: list[str] | None,
    *,
    drain_timeout: float,
    json_logs: bool,
    workers: bool,
) -> int:
    """``jf dev --reload``: the embedded AWS here, the rest in a child restarted on each change
    (``exclude``: ``--reload-exclude``'s patterns, added to the tests'; one empty clears those)."""
    import tempfile

    from jobframework.local.aws import EmbeddedAWS
    from jobframework.local.reload import (
        DEFAULT_EXCLUDES,
        SourceWatch,
        Supervisor,
        child_command,
        say_line,
        source_roots,
    )

    cwd = Path.cwd()
    if str(cwd) not in sys.path:  # the job modules are found as the child imports them
        sys.path.insert(0, str(cwd))
    aws = EmbeddedAWS(port)
    _start_embedded(aws)
    try:
        patterns = list(exclude or [])
        defaults = () if "" in patterns else DEFAULT_EXCLUDES
        watch = SourceWatch(source_roots(names, cwd), [*defaults, *patterns], keep=names)
        say = say_line(json_logs)
        say(
            f"jf dev --reload: the workers and the scheduler restart when one of the {len(watch)} .py files "
            f"under {', '.join(map(str, watch.roots))} changes"
            + (f" (not {', '.join(watch.exclude)})" if watch.exclude else "")
            + "; the embedded AWS and what it holds stay",
            {
                "event": "watching",
                "files": len(watch),
                "roots": [str(r) for r in watch.roots],
                "excluded": watch.exclude,
            },
        )
        with tempfile.TemporaryDirectory(prefix="jf-dev-") as scratch:
            counts = Path(scratch) / "counts.json"
            command = child_command(sys.argv[1:], aws.port, counts)
            supervisor = Supervisor(command, watch, say, drain_timeout=drain_timeout, cwd=cwd, counts=counts)
            code = supervisor.run()
        from jobframework.local.leftover import leftover

        left = leftover(aws.client("sqs"))
    finally:
        aws.stop()
    from jobframework.local.tally import totals_text

    reloads = f"{supervisor.reloads} reload{'s' if supervisor.reloads != 1 else ''}"
    counted = f"in all ({reloads}): {totals_text(supervisor.totals)}" if workers else "(no workers)"
    say(
        f"jf dev: stopped; {counted}; the embedded AWS and what it held are gone"
        + (f": {left.text()}" if left else ""),
        {
            "event": "stopped",
            "stopped": "jf dev",
            "reloads": supervisor.reloads,
            **(supervisor.totals if workers else {"workers": False}),
            "left": left.as_json(),
        },
    )
    return code
