"""``jf queue purge``: delete the jobs waiting in a queue before they run (a backfill called off)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from typer._click.exceptions import UsageError  # typer carries its own copy of click

from jobframework.cli.aws import aws_of
from jobframework.cli.base import JsonOption, print_json
from jobframework.cli.dlq_args import (
    DryRunOption,
    IdOption,
    MatchOption,
    TypeOption,
    YesOption,
    lane_argument,
)
from jobframework.cli.errors import CliError
from jobframework.cli.queue import queue_app, state_store_of
from jobframework.core import lane_sort_key

if TYPE_CHECKING:
    from jobframework.cli.aws import Aws
    from jobframework.topology import RuntimeConfig


LaneArg = Annotated[
    str,
    typer.Argument(
        metavar="LANE",
        callback=lane_argument,
        help="The queue: a priority, or a lane (low-cpu, default-fifo).",
    ),
]


@queue_app.command("purge")
def queue_purge(  # noqa: PLR0917
    ctx: typer.Context,
    lane: LaneArg,
    job_type: TypeOption = None,
    ids: IdOption = None,
    matching: MatchOption = None,
    yes: YesOption = False,
    dry_run: DryRunOption = False,
    json_output: JsonOption = False,
) -> None:
    """Delete the jobs waiting in a queue (all, or those of a type, matching text, or given ids), before
    they run: a backfill called off. Tracked ones are cancelled. Needs --yes.

    Only the messages visible when it starts are seen: jobs running or waiting out a retry's delay are
    not; pause the lane first (jf queue pause), or a consumer takes some of them meanwhile.

    Example: jf queue pause default; jf queue purge default --type crm.sync --match tenant-42 --dry-run
    """
    from jobframework.dlq.letter import Selection
    from jobframework.flow.purge import purge_queue

    if not yes and not dry_run:
        raise UsageError(
            "purge deletes the jobs waiting in the queue for good; add --yes to confirm (--dry-run counts "
            "what it would delete first)"
        )
    aws = aws_of(ctx)
    config = aws.runtime_config()
    if lane not in config.queues:
        known = ", ".join(sorted(config.queues, key=lane_sort_key)) or "none"
        raise UsageError(f"this topology has no {lane} queue (its lanes: {known})")
    from jobframework.errors import ConfigurationError
    from jobframework.flow.pause import paused

    selection = Selection(job_type=job_type, matching=matching, ids=frozenset(ids) if ids else None)
    store = state_store_of(aws, config)
    try:
        result = purge_queue(
            aws.sqs(config), config.endpoints(lane).url, selection, store=store, dry_run=dry_run
        )
    except ConfigurationError as exc:  # (a FIFO lane)
        raise UsageError(str(exc)) from exc
    if json_output:
        print_json(
            {
                "lane": lane,
                "dry_run": dry_run,
                "deleted": result.deleted,
                "by_type": dict(result.by_type),
                "cancelled": result.cancelled,
                "uncancelled": result.uncancelled,
                "later": result.later,
                "not_found": result.not_found,
            }
        )
    else:
        verb = "would delete" if dry_run else "deleted"
        kinds = ", ".join(f"{n} {t}" for t, n in result.by_type.most_common())
        typer.echo(
            f"{verb} {result.deleted} job{'' if result.deleted == 1 else 's'} from the {lane} queue"
            + (f" ({kinds})" if kinds else "")
            + (f"; {result.cancelled} tracked, now cancelled" if result.cancelled else "")
        )
    stats = _depths(aws, config, lane)
    if stats:
        stopped = lane in (paused(store) if store is not None else {})
        typer.echo(
            f"jf: note: {stats} (running, a retry's delay, a hand-back over a limit or a throttle, a "
            "delay=), which a purge does not see: purge again once they are back"
            + (
                ""
                if stopped
                else f", with the lane paused (jf queue pause {lane}) so that no consumer takes them first"
            ),
            err=True,
        )
    if not result.deleted and (job_type or matching) and not result.not_found:
        typer.echo(
            f"jf: note: no job waiting in the {lane} queue matched{_lane_hint(aws, config, lane, job_type)}",
            err=True,
        )
    if result.not_found:  # (as jf dlq purge --id's)
        raise CliError(
            f"no job waiting in the {lane} queue has the id {', '.join(result.not_found)} (run, cancelled, "
            f"in flight or delayed, or on another lane); `jf status ID` says where it is"
        )
    if result.uncancelled:
        raise CliError(
            f"the messages of {len(result.uncancelled)} tracked jobs were deleted, but their statuses could "
            f"not be set to cancelled: {', '.join(result.uncancelled[:5])}; `jf cancel ID` each"
        )


def _lane_hint(aws: Aws, config: RuntimeConfig, lane: str, job_type: str | None) -> str:
    """``: crm.ordered runs on the default-fifo queue`` when the job type runs on another lane."""
    from jobframework.cli.aws import catalog_of

    route = catalog_of(aws, config).get(job_type) if job_type else None
    if route is None or route.lane == lane:
        return ""
    return f": {job_type} runs on the {route.lane} queue (jf queue purge {route.lane} ...)"


def _depths(aws: Aws, config: RuntimeConfig, lane: str) -> str:
    """``3 messages are in flight and 2 delayed`` (what is left that a purge cannot see), or ``""``."""
    attrs = (
        aws.sqs(config)
        .get_queue_attributes(
            QueueUrl=config.endpoints(lane).url,
            AttributeNames=["ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed"],
        )
        .get("Attributes", {})
    )
    in_flight = int(attrs.get("ApproximateNumberOfMessagesNotVisible", 0))
    delayed = int(attrs.get("ApproximateNumberOfMessagesDelayed", 0))
    parts = [f"{in_flight} in flight"] if in_flight else []
    parts += [f"{delayed} delayed"] if delayed else []
    return f"{' and '.join(parts)} {'is' if in_flight + delayed == 1 else 'are'} left" if parts else ""
