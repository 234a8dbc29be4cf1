"""``jf ui``: the local web console (dead letters, jobs, schedules, sagas, retry plans)."""

from __future__ import annotations

from typing import Annotated

import typer

from jobframework.cli.aws import _aws, _check_reachable
from jobframework.cli.base import JobsOption, app, optional_jobs
from jobframework.cli.errors import CliError

LOOPBACK_NAMES = ("127.0.0.1", "localhost")
WILDCARDS = ("0.0.0.0", "::", "")


@app.command()
def ui(  # noqa: PLR0917
    ctx: typer.Context,
    host: Annotated[
        str, typer.Option(help="Address to listen on (127.0.0.1: this machine only).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.", min=1, max=65535)] = 8089,
    read_only: Annotated[
        bool, typer.Option("--read-only", help="Hide and refuse every action (redrive, purge, enqueue).")
    ] = False,
    allow_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-host", help="Another host name the browser may use to reach the console (repeatable)."
        ),
    ] = None,
    jobs: JobsOption = None,
    stage: Annotated[str, typer.Option(help="Stage whose topology settings apply.")] = "dev",
) -> None:
    """A web console on this machine: queues, dead letters (redrive, purge, export), jobs, schedules,
    sagas and retry plans, against `jf dev` or an AWS account (the same resolution as every jf command).

    Example: jf ui --jobs myapp.jobs --read-only
    """
    try:
        import uvicorn

        from jobframework.ui.app import create_app
        from jobframework.ui.console import Console
    except ImportError as exc:
        raise CliError(
            f"the console needs its extra ({exc.name} is missing): install jobframework with its ui "
            "extra, e.g. pip install '/path/to/jobframework[ui]' from a clone"
        ) from exc
    from jobframework.jobs import registry

    modules = optional_jobs(jobs)
    aws = _aws(ctx)
    config = aws.runtime_config()
    sqs = aws.sqs(config)
    _check_reachable(sqs, next(iter(config.queues.values())).url)
    console = Console(
        config=config,
        sqs=sqs,
        dynamodb=aws.client("dynamodb", config=config) if config.state_table else None,
        # CloudWatch has the queues' age of oldest message; the embedded AWS has no such metrics.
        cloudwatch=None if config.endpoint_url else aws.client("cloudwatch", config=config),
        lambda_client=aws.client("lambda", config=config),
        registry=registry if modules else None,
        read_only=read_only,
        stage=stage,
        job_modules=modules,
    )
    hosts = [*LOOPBACK_NAMES, *(allow_host or [])]
    if host not in WILDCARDS and host not in hosts:
        hosts.append(host)
    shown = "127.0.0.1" if host in WILDCARDS else host
    typer.echo(
        f"jf ui: http://{shown}:{port}/ ({'read-only' if read_only else 'actions on'}; "
        f"{len(config.queues)} queues{'; jobs from ' + ', '.join(modules) if modules else ''}); Ctrl-C stops"
    )
    if host in WILDCARDS:
        typer.echo(
            "jf ui: listening on every interface; browsers must use one of "
            f"{', '.join(hosts)} (add names with --allow-host)",
            err=True,
        )
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(console, allowed_hosts=hosts),
            host=host,
            port=port,
            log_level="warning",
            access_log=False,
        )
    )
    try:
        server.run()
    except OSError as exc:
        raise CliError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    if not server.started:
        raise CliError(f"cannot listen on {host}:{port} (is another process using the port?)")
