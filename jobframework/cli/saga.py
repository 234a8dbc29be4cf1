"""``jf saga ...``: list sagas, show one, signal a waiting one, and cancel one."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from jobframework.cli.aws import aws_of
from jobframework.cli.base import JobsOption, JsonOption, app, load_jobs, print_json, rich_console
from jobframework.cli.errors import EXIT_FAILED, CliError

saga_app = typer.Typer(
    cls=TyperGroup,
    help=(
        "List sagas, show one (steps, states, attempts, outputs, errors, timings), signal a waiting one, "
        "cancel one."
    ),
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(saga_app, name="saga")


class SagaStatusName(StrEnum):
    running = "running"
    compensating = "compensating"
    succeeded = "succeeded"
    compensated = "compensated"
    failed = "failed"


def _saga_store(ctx: typer.Context) -> Any:
    from jobframework.state import StateStore

    aws = aws_of(ctx)
    config = aws.runtime_config()
    if not config.state_table:
        raise CliError("sagas live in the state table: set JF_STATE_TABLE (or use the stack's topology)")
    return StateStore.of(config, aws.client("dynamodb", config=config))


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
    from jobframework.saga.view import saga_summary

    found = list_sagas(_saga_store(ctx), status=status.value if status else None, name=name, limit=limit)
    rows = [saga_summary(r) for r in found]
    if json_output:
        print_json(rows)
        return
    from rich.table import Table

    table = Table(title=f"{len(rows)} saga{'' if len(rows) == 1 else 's'}", title_justify="left")
    for column in ("id", "name", "status", "step", "started", "reason"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(
            row["id"], row["name"], row["status"], row["step"] or "-", row["created_at"], row["reason"] or "-"
        )
    rich_console().print(table)


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
    from jobframework.saga.view import saga_table

    record = load_saga(_saga_store(ctx), saga_id)
    if record is None:
        raise CliError(f"no saga {saga_id} (never started, or its record expired)")
    if json_output:
        print_json(record.model_dump(mode="json"))
        return
    rich_console().print(saga_table(record))


@saga_app.command("signal")
def saga_signal(  # noqa: PLR0917
    ctx: typer.Context,
    saga_id: Annotated[str, typer.Argument(metavar="ID", help="The saga id that start() returned.")],
    name: Annotated[str, typer.Argument(metavar="NAME", help="The wait to signal, e.g. approval.")],
    data: Annotated[
        str | None, typer.Argument(metavar="JSON", help="The signal's data (JSON), merged into the saga's.")
    ] = None,
    jobs: JobsOption = None,
    json_output: JsonOption = False,
) -> None:
    """Signal a saga's wait (a human approval, a callback): it continues at once, or when it reaches
    the wait. Exits 1 when the saga did not take it (it ended, or the wait's deadline passed).

    The saga's definition comes from your job modules (--jobs or JF_JOBS).

    Example: jf saga signal 0190a5c4-... approval '{"approved_by": "ops"}'
    """
    import json

    from jobframework.errors import ConfigurationError, PayloadValidationError

    try:
        value = json.loads(data) if data is not None else None
    except ValueError as exc:
        raise typer.BadParameter(
            f'the data is not JSON ({exc}); quote it for the shell, e.g. \'{{"approved_by": "ops"}}\'',
            param_hint="JSON",
        ) from None
    saga = _defined_saga(ctx, saga_id, jobs)
    aws = aws_of(ctx)
    try:
        taken = saga.signal(saga_id, name, value, client=aws.job_client(aws.runtime_config(), saga.registry))
    except PayloadValidationError as exc:  # the next step could not take the data
        raise typer.BadParameter(str(exc), param_hint="JSON") from None
    except ConfigurationError as exc:  # no such wait: a bad NAME
        raise typer.BadParameter(str(exc), param_hint="NAME") from None
    if json_output:
        print_json({"id": saga_id, "signal": name, "taken": taken})
    elif taken:
        typer.echo(f"saga {saga_id} took {name}")
    if not taken:
        raise CliError(
            f"saga {saga_id} did not take {name}: it has ended or the wait's deadline passed "
            "(jf saga show shows which)",
            EXIT_FAILED,
        )


@saga_app.command("cancel")
def saga_cancel(
    ctx: typer.Context,
    saga_id: Annotated[str, typer.Argument(metavar="ID", help="The saga id that start() returned.")],
    reason: Annotated[str | None, typer.Option(help="Why: kept in the saga's reason.")] = None,
    jobs: JobsOption = None,
    json_output: JsonOption = False,
) -> None:
    """Cancel a running saga: it rolls back, compensating its completed steps in reverse order (at a
    wait at once; a step that is queued or running ends first, and is compensated too if it
    succeeded). Exits 1 when the saga did not take it (it ended, or compensates already).

    The saga's definition comes from your job modules (--jobs or JF_JOBS).

    Example: jf saga cancel 0190a5c4-... --reason "customer withdrew the order"
    """
    saga = _defined_saga(ctx, saga_id, jobs)
    aws = aws_of(ctx)
    taken = saga.cancel(saga_id, reason, client=aws.job_client(aws.runtime_config(), saga.registry))
    if json_output:
        print_json({"id": saga_id, "cancelled": taken})
    elif taken:
        typer.echo(f"saga {saga_id} is cancelled: it rolls back (jf saga show {saga_id} follows it)")
    if not taken:
        raise CliError(
            f"saga {saga_id} did not take the cancel: it has ended, compensates already, or was "
            "cancelled before (jf saga show shows which)",
            EXIT_FAILED,
        )


def _defined_saga(ctx: typer.Context, saga_id: str, jobs: list[str] | None) -> Any:
    """The definition of the saga ``saga_id`` from the job modules loaded here (a :class:`Saga`)."""
    from jobframework.saga import load_saga
    from jobframework.saga.definition import defined_saga_names, saga_named

    load_jobs(jobs)
    record = load_saga(_saga_store(ctx), saga_id)
    if record is None:
        raise CliError(f"no saga {saga_id} (never started, or its record expired)")
    saga = saga_named(record.name)
    if saga is None:
        known = ", ".join(defined_saga_names()) or "none"
        raise CliError(
            f"saga {saga_id} is a {record.name}, which the job modules loaded here do not define (they "
            f"define: {known}); pass the module that defines it with --jobs"
        )
    return saga
