"""``jf queue ls|pause|resume``: see the queues, stop and restart their consumers (``jf queue purge``
is :mod:`jobframework.cli.queue_purge`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperGroup

from jobframework.cli.aws import aws_of
from jobframework.cli.base import JsonOption, app, print_json, rich_console, where_text
from jobframework.cli.errors import CliError

if TYPE_CHECKING:
    from jobframework.cli.aws import Aws
    from jobframework.config import JobRoute
    from jobframework.state import StateStore
    from jobframework.topology import RuntimeConfig

queue_app = typer.Typer(
    cls=TyperGroup,
    help="List the queues; pause and resume their consumers.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(queue_app, name="queue")

QueueArg = Annotated[
    str,
    typer.Argument(
        metavar="PRIORITY", help="critical, high, default or low (all its lanes), or a lane (low-cpu)."
    ),
]


def state_store_of(aws: Aws, config: RuntimeConfig) -> StateStore | None:
    from jobframework.state import StateStore

    if not config.state_table:
        return None
    return StateStore(config.state_table, aws.client("dynamodb", config=config))


def _job_type_note(aws: Aws, config: RuntimeConfig, name: str) -> str:
    """`` (a job type, not a queue: ...)`` when ``name`` is a job of the catalog (a BullMQ trial paused
    ``mail.send``, as it would a BullMQ queue), else nothing."""
    from jobframework.cli.aws import catalog_of

    try:
        route = catalog_of(aws, config).get(name)
    except Exception:  # (the note is a hint: an unreadable catalog leaves the error as it is)
        return ""
    if route is None:
        return ""
    return (
        f". {name} is a job type, not a queue: it runs on the {route.lane} queue, which its priority "
        f"names, and `jf queue pause {route.lane}` pauses every job type on it"
    )


def _switch(ctx: typer.Context, name: str, *, pause: bool, json_output: bool) -> None:
    from jobframework.errors import ConfigurationError
    from jobframework.flow import pause as flags
    from jobframework.local.pollers import queue_arn_from_url

    aws = aws_of(ctx)
    config = aws.runtime_config()
    try:
        lanes = flags.lanes_of(config.queues, name)
    except ConfigurationError as exc:
        problem = str(exc) + _job_type_note(aws, config, name)
        raise typer.BadParameter(problem, param_hint="PRIORITY") from None
    store = state_store_of(aws, config)
    lambda_client = aws.client("lambda", config=config)
    region = config.region or aws.session().region_name or "us-east-1"
    report: list[dict[str, Any]] = []
    for lane in lanes:
        since = None
        if store is not None:
            since = flags.pause(store, lane) if pause else flags.resume(store, lane)
        arn = queue_arn_from_url(config.endpoints(lane).url, region)
        mappings = flags.set_mappings_enabled(lambda_client, arn, enabled=not pause)
        row: dict[str, Any] = {"lane": lane, "paused": pause}
        # (a pause: since when it was paused already; a resume: since when it had been paused)
        row["already_paused_since" if pause else "paused_since"] = since
        row.update(flag=store is not None, mappings=[m.uuid for m in mappings])
        report.append(row)
    if store is None and not any(r["mappings"] for r in report):
        raise CliError(
            f"nothing to {'pause' if pause else 'resume'}: no event source mapping reads {name} and there "
            "is no state table for local pollers (set JF_STATE_TABLE)"
        )
    if json_output:
        print_json(report)
        return
    just_paused: list[str] = []
    for r in report:
        count = len(r["mappings"])
        where = [f"{count} Lambda event source mapping{'' if count == 1 else 's'}"] if count else []
        if r["flag"]:
            where.append("the pause flag that jf dev and jf worker read")
        if pause:
            since = r["already_paused_since"]
            said = f"already paused since {since}" if since else "paused"
            if not since:
                just_paused.append(r["lane"])
        elif r["paused_since"]:
            said = f"resumed (paused since {r['paused_since']})"
        elif r["flag"]:  # (no flag was set; its mappings, if any, are enabled all the same)
            said = "was not paused (by jf); enabled all the same" if count else "was not paused"
        else:
            said = "resumed"
        typer.echo(f"{r['lane']}: {said} ({', '.join(where)})")
    if just_paused:  # (an operator's trial enqueued at once, was told the job waits, and it ran)
        typer.echo(
            f"jf: note: consumers stop taking {', '.join(just_paused)}'s jobs within about "
            f"{flags.SETTLE_SECONDS} s (jf dev, jf worker; Lambda's pollers, a few seconds and the lane's "
            "batching window): a receive under way still returns what it got, and those jobs run",
            err=True,
        )


@queue_app.command("pause")
def queue_pause(ctx: typer.Context, name: QueueArg, json_output: JsonOption = False) -> None:
    """Stop consuming a queue: its event source mappings are disabled and local pollers stop.

    Messages stay in the queue (mind its retention period); records being processed finish.

    Example: jf queue pause low
    """
    _switch(ctx, name, pause=True, json_output=json_output)


@queue_app.command("resume")
def queue_resume(ctx: typer.Context, name: QueueArg, json_output: JsonOption = False) -> None:
    """Consume a paused queue again.

    Example: jf queue resume low
    """
    _switch(ctx, name, pause=False, json_output=json_output)


def _held_by_scheduler(aws: Aws, config: RuntimeConfig) -> dict[str, int] | None:
    """Jobs delayed over 15 minutes, held by EventBridge Scheduler, by queue name; ``None`` when no
    schedule group is configured (no Scheduler role, default group) or it cannot be listed (said)."""
    from botocore.exceptions import BotoCoreError, ClientError

    from jobframework.delays import held_by_queue

    if config.scheduler_role_arn is None and config.schedule_group == "default":
        return None
    try:
        return held_by_queue(aws.client("scheduler", config=config), config.schedule_group)
    except (ClientError, BotoCoreError) as exc:
        typer.echo(f"jf: warning: cannot list schedule group {config.schedule_group}: {exc}", err=True)
        return None


@queue_app.command("ls")
def queue_ls(ctx: typer.Context, json_output: JsonOption = False) -> None:
    """Each queue's depth, messages in flight, delayed, held by Scheduler, and whether it is paused.

    ``scheduled`` counts the jobs delayed over 15 minutes, which wait in the schedule group
    (``JF_SCHEDULE_GROUP``) until they are due; it is left out when no group is configured.

    Example: jf queue ls
    """
    from jobframework.flow.pause import paused
    from jobframework.jobs import lane_sort_key

    aws = aws_of(ctx)
    config = aws.runtime_config()
    store = state_store_of(aws, config)
    stopped = paused(store) if store is not None else {}
    held = _held_by_scheduler(aws, config)
    sqs = aws.sqs(config)
    rows: list[dict[str, Any]] = []
    for lane, ep in sorted(config.queues.items(), key=lambda kv: lane_sort_key(kv[0])):
        attrs = sqs.get_queue_attributes(
            QueueUrl=ep.url,
            AttributeNames=[
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesNotVisible",
                "ApproximateNumberOfMessagesDelayed",
            ],
        )["Attributes"]
        row: dict[str, Any] = {
            "lane": lane,
            "queue": ep.name,
            "depth": int(attrs.get("ApproximateNumberOfMessages", 0)),
            "in_flight": int(attrs.get("ApproximateNumberOfMessagesNotVisible", 0)),
            "delayed": int(attrs.get("ApproximateNumberOfMessagesDelayed", 0)),
        }
        if held is not None:
            row["scheduled"] = held.get(ep.name, 0)
        row["retry_budget"] = _budget_of(store, config, ep.name)
        rows.append({**row, "paused": lane in stopped, "paused_at": stopped.get(lane)})
    if json_output:
        print_json(rows)
        return
    from rich.table import Table

    counts = ("depth", "in_flight", "delayed") + (("scheduled",) if held is not None else ())
    table = Table(title=f"Queues of {where_text(config)}", title_justify="left")
    budgets = any(r["retry_budget"] is not None for r in rows)
    for name in ("lane", "queue", *counts, "state", *(("retry budget (5 min)",) if budgets else ())):
        table.add_column(name.replace("_", " "), justify="right" if name in counts else "left")
    for r in rows:
        state = f"paused since {r['paused_at']}" if r["paused"] else "not paused"
        budget = r["retry_budget"]
        said = () if not budgets else (_budget_text(budget),)
        table.add_row(str(r["lane"]), str(r["queue"]), *(str(r[c]) for c in counts), state, *said)
    rich_console().print(table)
    from jobframework.cli.aws import catalog_of

    named = _named_budgets(store, config, catalog_of(aws, config))
    if named:
        shared = Table(title="Shared retry budgets (5 min)", title_justify="left")
        for name in ("budget", "jobs", "retries"):
            shared.add_column(name)
        for n in named:
            shared.add_row(str(n["budget"]), ", ".join(n["jobs"]), _budget_text(n["retry_budget"]))
        rich_console().print(shared)
    if any(r["retry_budget"] and r["retry_budget"]["spent"] for r in [*rows, *named]):
        typer.echo(
            "jf: note: a spent retry budget dead-letters a failing job's retry at once (reason budget) "
            "until first attempts or time make room: redrive those letters once the downstream is back",
            err=True,
        )


def _named_budgets(
    store: StateStore | None, config: RuntimeConfig, catalog: dict[str, JobRoute]
) -> list[dict[str, Any]]:
    """The named budgets of the catalog's jobs (``@job(retry_budget="crm")``), each with its jobs and
    where it stands: a trial's outage spent one while the queues' read 0 retries."""
    from jobframework.budget_keys import named_budget_key, shared_budgets

    named = shared_budgets((job_type, route.retry_budget) for job_type, route in catalog.items())
    return [
        {
            "budget": name,
            "jobs": types,
            "retry_budget": _budget_of(store, config, named_budget_key(name)),
        }
        for name, types in named.items()
    ]


def _budget_of(store: StateStore | None, config: RuntimeConfig, queue: str) -> dict[str, Any] | None:
    """Where a queue's (or a named) retry budget stands (``None``: off, or no state table to read it
    from)."""
    import time

    from jobframework.budget import budget_state

    try:
        state = budget_state(store, queue, config.retry_budget, time.time())
    except Exception as exc:  # (a read this table refuses: the rest of the listing still stands)
        typer.echo(f"jf: warning: cannot read the retry budget of {queue}: {exc}", err=True)
        return None
    if state is None:
        return None
    return {
        "retries": state.retries,
        "allowed": state.allowed,
        "first_attempts": state.first_attempts,
        "spent": state.spent,
    }


def _budget_text(budget: dict[str, Any] | None) -> str:
    if budget is None:
        return "-"
    used = f"{budget['retries']} of {budget['allowed']} retries"
    return f"SPENT: {used}" if budget["spent"] else used
