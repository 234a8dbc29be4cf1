"""``jf saga ...``: list sagas and show one."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from jobframework.cli.aws import aws_of
from jobframework.cli.base import JsonOption, app, print_json, rich_console
from jobframework.cli.errors import CliError

saga_app = typer.Typer(
    cls=TyperGroup,
    help="List sagas and show one: steps, states, attempts, outputs, errors, timings.",
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

    table = Table(title=f"{len(rows)} sagas", title_justify="left")
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
