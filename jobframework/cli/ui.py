"""``jf ui``: the local web console (dead letters, jobs, schedules, sagas, retry plans)."""

from __future__ import annotations

import logging
import signal
import socket
import time
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any

import typer

from jobframework.cli.aws import aws_of, check_reachable
from jobframework.cli.base import JobsOption, app, optional_jobs
from jobframework.cli.errors import CliError, cannot_listen

if TYPE_CHECKING:
    from jobframework.ui.console import Console

LOOPBACK_NAMES = ("127.0.0.1", "localhost")
WILDCARDS = ("0.0.0.0", "::", "")


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` for the console's server (bound here, so that a taken port is
    reported before anything is announced, and no other program can take it in between).

    Raises:
        CliError: the address cannot be bound (exit code 2, as for a bad argument): the port is taken,
            or the host is not an address of this machine.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET  # as uvicorn binds
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn: a port in TIME_WAIT is free
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise cannot_listen("cannot listen", host, port, exc, host_option=True) from exc
    return sock


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
            "--allow-host",
            metavar="HOST",
            help="Another host name the browser may use to reach the console (repeatable).",
        ),
    ] = None,
    jobs: JobsOption = None,
    stage: Annotated[
        str,
        typer.Option(
            help="Stage whose schedule names apply when the topology parameter does not say it "
            "(jf dev's and the stack's do: /<app>/<stage>/topology)."
        ),
    ] = "dev",
) -> None:
    """A web console on this machine: queues, dead letters (redrive, purge, export), jobs, schedules,
    sagas and retry plans, against `jf dev` or an AWS account (the same resolution as every jf command).

    Example: jf ui --jobs myapp.jobs --read-only
    """
    try:
        import uvicorn

        from jobframework.ui.app import create_app
    except ImportError as exc:
        raise CliError(
            f"the console needs its extra ({exc.name} is missing): install jobframework with its ui "
            "extra, e.g. pip install '/path/to/jobframework[ui]' from a clone"
        ) from exc
    modules = optional_jobs(jobs)
    # Bound first: a taken port is a usage error, said before AWS is asked or anything is announced.
    sock = listening_socket(host, port)
    tally: _Tally | None = None
    try:
        console = _connect(ctx, modules, read_only=read_only, stage=stage)
        hosts = [*LOOPBACK_NAMES, *(allow_host or [])]
        if host not in WILDCARDS and host not in hosts:
            hosts.append(host)
        shown = "127.0.0.1" if host in WILDCARDS else host
        typer.echo(
            f"jf ui: http://{shown}:{port}/ ({'read-only' if read_only else 'actions on'}; "
            f"{len(console.config.queues)} queues{'; jobs from ' + ', '.join(modules) if modules else ''}); "
            "Ctrl-C stops"
        )
        if host in WILDCARDS:
            typer.echo(
                "jf ui: listening on every interface; browsers must use one of "
                f"{', '.join(hosts)} (add names with --allow-host)",
                err=True,
            )
        tally = _audit_on_stderr()
        started = time.monotonic()
        config = uvicorn.Config(
            create_app(console, allowed_hosts=hosts),
            host=host,
            port=port,
            log_level="warning",
            access_log=False,
        )
        served, stopped_by = _serve(config, sock)
    finally:
        sock.close()
        if tally is not None:
            from jobframework.ui.security import audit

            audit.removeFilter(tally)
    if not served:
        raise CliError(f"the console did not start on {host}:{port} (see the error above)")
    typer.echo(f"jf ui: stopped ({stopped_by or 'its server ended'}) {tally.said(started)}")


def _serve(config: Any, sock: socket.socket) -> tuple[bool, str | None]:
    """Serve until a signal stops the server: whether it started, and the name of the first signal.

    uvicorn notes each signal it stops on and, once stopped, raises them again under the handlers it
    found: a SIGTERM's default would end the process before the stop line (a handler that does nothing
    stands in while it serves), a SIGINT arrives as KeyboardInterrupt, or not at all where SIGINT is
    ignored (a job a shell started in the background): so the name is taken as uvicorn is told."""
    import uvicorn

    first: list[str] = []

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            first.append(signal.Signals(sig).name)
            super().handle_exit(sig, frame)

    server = Server(config)
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: None)
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:  # (one before uvicorn listened for signals: a SIGINT all the same)
        first.append("SIGINT")
    finally:
        signal.signal(signal.SIGTERM, previous)
    return server.started, (first[0] if first else None)


class _Tally(logging.Filter):
    """The console's actions and refused requests, counted from its audit lines, for the stop line."""

    def __init__(self) -> None:
        super().__init__()
        self.actions = self.refused = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING:
            self.refused += 1
        else:
            self.actions += 1
        return True

    def said(self, started: float) -> str:
        """``after 2.5m; 3 actions, 1 request refused`` (the actions are the audit lines above, whatever
        each answered; a request for a host name the console does not know is refused before them)."""
        from jobframework.ui.templating import duration

        counts = [f"{self.actions} action{'' if self.actions == 1 else 's'}"]
        if self.refused:
            counts.append(f"{self.refused} request{'' if self.refused == 1 else 's'} refused")
        return f"after {duration(time.monotonic() - started)}; {', '.join(counts)}"


def _connect(ctx: typer.Context, modules: list[str], *, read_only: bool, stage: str) -> Console:
    """The console on the topology every jf command resolves; fails (exit code 3) when it is unreachable."""
    from jobframework.jobs import registry
    from jobframework.ui.console import Console

    aws = aws_of(ctx)
    config = aws.runtime_config()
    sqs = aws.sqs(config)
    check_reachable(sqs, next(iter(config.queues.values())).url)
    return Console(
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


def _audit_on_stderr() -> _Tally:
    """Print each action the console takes (:data:`jobframework.ui.security.audit`) on stderr; the
    returned tally counts them."""
    import sys

    from jobframework.ui.security import audit

    tally = _Tally()
    if not audit.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s jf ui audit: %(message)s"))
        audit.addHandler(handler)
    audit.addFilter(tally)
    audit.setLevel(logging.INFO)
    audit.propagate = False
    return tally
