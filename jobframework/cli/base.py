"""The ``jf`` typer app: its global AWS options, the options and output helpers commands share, ``main``."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer._click.exceptions import UsageError  # typer carries its own copy of click

from jobframework.cli.aws import Aws
from jobframework.cli.errors import CliError, JfGroup
from jobframework.config import ENV_JOBS
from jobframework.errors import ConfigurationError

if TYPE_CHECKING:
    from jobframework.config import RuntimeConfig


class PriorityName(StrEnum):
    critical = "critical"
    high = "high"
    default = "default"
    low = "low"


app = typer.Typer(
    cls=JfGroup,
    name="jf",
    help="Background jobs on AWS serverless: run them locally, enqueue, inspect and redrive dead letters.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


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
        metavar="MODULE",
        help="Module that registers jobs (repeatable; default: JF_JOBS, else pyproject.toml's "
        "[tool.jobframework] jobs).",
        show_default=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]


def job_module_names(modules: list[str] | None) -> list[str]:
    """The job modules ``--jobs`` names, else ``JF_JOBS``, else the project's ``pyproject.toml``
    (``[tool.jobframework] jobs``); none is a usage error (checked before a
    command sets up its logging, which a bad call must not leave behind)."""
    from jobframework.modules import configured_job_modules

    # --jobs a,b as well as --jobs a --jobs b (the form JF_JOBS and jf dev's exports use)
    given = [name for m in modules or [] for name in m.split(",")]
    try:
        return given or configured_job_modules(project_dir=Path.cwd())
    except ConfigurationError as exc:  # none named: a missing argument
        raise UsageError(str(exc)) from exc


def load_jobs(modules: list[str] | None) -> list[str]:
    """Import the job modules ``--jobs`` names (or names :func:`job_module_names` already resolved),
    else ``JF_JOBS``'s, else the project file's (the current directory is importable, as with celery
    or uvicorn)."""
    from jobframework.modules import import_job_modules

    names = job_module_names(modules)
    try:
        return import_job_modules(names, cwd_importable=True)
    except ConfigurationError as exc:
        raise CliError(str(exc)) from exc


def require_jobs(modules: list[str] | None, *, said: Path | None = None) -> list[str]:
    """:func:`load_jobs`, for a command that runs jobs (``jf dev``, ``jf worker``): one that would run
    none is refused, saying which modules to name (``said``: see :func:`warn_unlisted`)."""
    from jobframework.jobs import registry
    from jobframework.modules import no_jobs_message

    held = _HeldWarnings(logging.getLogger("jobframework.modules"))
    try:
        names = load_jobs(modules)
    except CliError:  # (a later module failed: what the earlier ones said still helps)
        held.let_go()
        raise
    if not len(registry):  # (the error says what the warnings of the modules that registered none say)
        held.let_go(replay=False)
        raise CliError(no_jobs_message(names))
    held.let_go()  # some did register: the warnings name those that did not
    warn_unlisted(names, said=said)
    return names


class _HeldWarnings(logging.Handler):
    """Holds a logger's records (it stops propagating) until :meth:`let_go` lets them go or drops them,
    once it is known whether they matter (not ``release``: a Handler's is its lock's)."""

    def __init__(self, logger: logging.Logger) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []
        self.logger, self.propagated = logger, logger.propagate
        logger.addHandler(self)
        logger.propagate = False

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def let_go(self, *, replay: bool = True) -> None:
        self.logger.removeHandler(self)
        self.logger.propagate = self.propagated
        for record in self.records if replay else ():
            self.logger.handle(record)


def warn_unlisted(names: list[str], *, said: Path | None = None) -> None:
    """Say which modules of the named modules' packages (in the current directory) apply ``@job`` but
    are not loaded: the deployed consumer, which loads the same modules, would not know their jobs.
    ``said``: a file of the modules warned of already, by an earlier start (``jf dev --reload``'s
    workers, which said each again at every reload), kept up to date."""
    from jobframework.unlisted_modules import unlisted_job_modules

    unlisted = unlisted_job_modules(Path.cwd(), [n.split(".", 1)[0] for n in names], names)
    before: list[str] = []
    if said is not None:
        with contextlib.suppress(OSError, ValueError):
            before = list(json.loads(said.read_text()))
        with contextlib.suppress(OSError):
            said.write_text(json.dumps(sorted(set(before) | set(unlisted))))
    for module in (m for m in unlisted if m not in before):
        typer.echo(
            f"warning: module {module} applies @job but is not among the job modules ({', '.join(names)}) "
            f"nor imported by them: its jobs are dead-lettered unknown-type here and by a consumer "
            f"deployed with the same job_modules=; add it (--jobs {','.join([*names, module])})",
            err=True,
        )


def optional_jobs(modules: list[str] | None) -> list[str]:
    """The job modules of a command that also works without them (``jf enqueue``, ``jf ui``).

    ``--jobs`` must import. ``JF_JOBS`` alone is often inherited from ``jf dev``'s exports in a shell
    that lacks the module: then a note says so and the command goes on with the topology's catalog.
    """
    if modules:
        return load_jobs(modules)
    if not os.environ.get(ENV_JOBS, "").strip(" ,") and not _project_names_jobs():
        return []
    try:
        return load_jobs(None)
    except CliError as exc:
        typer.echo(f"note: {exc}; going on without it (the topology's job catalog)", err=True)
        return []


def _project_names_jobs() -> bool:
    """Whether the current project's ``pyproject.toml`` names job modules (a bad list says so when
    they are loaded)."""
    from jobframework.project_file import project_jobs

    try:
        return project_jobs() is not None
    except ConfigurationError:
        return True


def print_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, default=str))


PIPED_WIDTH = 200
"""Columns of a table written to a pipe or a file (rich's 80 would wrap ids where nobody can copy them);
``COLUMNS`` overrides it."""


def rich_console(*, stderr: bool = False) -> Any:
    from rich.console import Console

    console = Console(stderr=stderr)
    if not console.is_terminal and not os.environ.get("COLUMNS"):
        console.width = PIPED_WIDTH
    return console


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|d)?\s*$")
_UNITS = {None: 1, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


def parse_duration(text: str, *, option: str | None = None) -> float:
    """``90``, ``90s``, ``15m``, ``2h``, ``1d`` as seconds (``option`` names the option in the error).

    Example:
        >>> parse_duration("15m")
        900.0
    """
    m = _DURATION.match(text)
    if not m:
        raise typer.BadParameter(
            f"{text!r} is not a duration: use a number (0 or more) of seconds, minutes, hours or days, e.g. "
            "90s, 15m, 2h or 1d",
            param_hint=option,
        )
    return float(m.group(1)) * _UNITS[m.group(2)]


def age_text(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.1f}s" if seconds < 10 else f"{seconds:.0f}s"


def where_text(config: RuntimeConfig) -> str:
    """Which deployment a command reads, for a table's title: its app and stage (its queues' names say
    them, ``<app>-<stage>-<lane>``) and where (the endpoint, else the AWS region), so that a dev setup
    is not taken for prod.

    Example:
        >>> from jobframework.config import QueueEndpoints, RuntimeConfig
        >>> q = QueueEndpoints(url="https://sqs.eu-west-1.amazonaws.com/1/shop-prod-high", dlq_url="x")
        >>> where_text(RuntimeConfig(queues={"high": q}, region="eu-west-1"))
        'shop-prod in AWS eu-west-1'
        >>> local = QueueEndpoints(url="http://h:4566/0/jf-dev-high.fifo", dlq_url="x")
        >>> where_text(RuntimeConfig(queues={"high-fifo": local}, endpoint_url="http://127.0.0.1:4566"))
        'jf-dev at http://127.0.0.1:4566'
    """
    lane, first = next(iter(config.queues.items()), ("", None))
    name = "no queues"
    if first is not None:
        name = first.name.removesuffix(".fifo")
        lane = lane.removesuffix("-fifo")
        name = name.removesuffix(f"-{lane}-fifo").removesuffix(f"-{lane}")
    if config.endpoint_url:
        return f"{name} at {config.endpoint_url}"
    region = config.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    return f"{name} in AWS {region or '(default region)'}"


def _warning_line(message: Warning | str, category: type[Warning], *_: object, **__: object) -> str:
    """A warning as ``jf: warning: ...`` (the topology's: a retry longer than its queue keeps a
    message, one job sizing a shared consumer), not Python's ``file:line: UserWarning`` and source.

    Example:
        >>> _warning_line(UserWarning("job t.x: its retries may take 12.2 days"), UserWarning, "f.py", 3)
        'jf: warning: job t.x: its retries may take 12.2 days\\n'
    """
    return f"jf: warning: {message}\n"


def main(argv: Sequence[str] | None = None) -> None:
    """The ``jf`` console script."""
    import warnings

    warnings.formatwarning = _warning_line  # (the topology's warnings as the CLI's own lines)
    command = typer.main.get_command(app)
    command.main(args=list(argv) if argv is not None else None, prog_name="jf")


def progress_bar(verb: str, total: int | None) -> Any:
    """A rich progress bar on stderr (``with`` it; ``.advance(n)`` after each step)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return ProgressBar(
        Progress(
            TextColumn(verb),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=rich_console(stderr=True),
        ),
        total,
    )


class ProgressBar:
    """What :func:`progress_bar` gives: ``advance(n)`` after each step."""

    def __init__(self, progress: Any, total: int | None) -> None:
        self.progress = progress
        self.total = total

    def __enter__(self) -> ProgressBar:
        self.progress.__enter__()
        self.task = self.progress.add_task("", total=self.total or None)
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(*exc)

    def advance(self, n: int) -> None:
        self.progress.advance(self.task, n)
