"""The arguments the ``jf dlq`` commands share: the lane, the filters, and the configuration's dead
letters (a lane it has no queue of is a usage error, exit 2); and what they say when a selection took
none, or not every letter it named."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from jobframework.cli.aws import aws_of, catalog_of
from jobframework.cli.errors import CliError
from jobframework.errors import ConfigurationError

if TYPE_CHECKING:
    from jobframework.dlq import DeadLetters, RedriveResult
    from jobframework.topology import RuntimeConfig


FAIL_AGAIN = frozenset(
    {"permanent", "malformed", "unknown-type", "invalid-payload", "version", "signature", "unknown-saga"}
)
"""Dead-letter reasons whose letter, redriven as it is, fails the same way unless the job's code (or
the deployed modules) or the data changed: a redrive says so."""


def lane_argument(value: str) -> str:
    """A DLQ's lane: a priority, or a lane of one (``low-cpu``, ``default-fifo``)."""
    from jobframework.jobs import lane_priority

    try:
        lane_priority(value)
    except ConfigurationError:
        from jobframework.core import all_lanes
        from jobframework.errortext import closest

        close = closest(value.lower().replace("_", "-"), all_lanes(), cutoff=0.8)
        hint = f"did you mean {close}? " if close else ""
        raise typer.BadParameter(
            f"{value!r}: {hint}name a priority (critical, high, default, low) or a lane of one such as "
            "low-cpu or default-fifo (`jf dlq ls` lists this topology's)"
        ) from None
    return value


PriorityArg = Annotated[
    str,
    typer.Argument(
        metavar="LANE",
        callback=lane_argument,
        help="Which DLQ: critical, high, default or low, or a lane's (low-cpu, default-fifo).",
    ),
]


TypeOption = Annotated[
    str | None,
    typer.Option(
        "--type", metavar="TYPE", help="Only this job type ('?': letters whose type cannot be read)."
    ),
]


def known_reason(value: str | None) -> str | None:
    """A ``--reason`` the consumer writes (a misspelt one matched nothing, which a scan found out)."""
    from jobframework.classification import Reason

    known = [r.value for r in Reason]
    if value is not None and value not in known:
        raise typer.BadParameter(f"{value!r} is not a dead-letter reason; they are: {', '.join(known)}")
    return value


ReasonOption = Annotated[
    str | None,
    typer.Option(
        metavar="REASON",
        help="Only this dead-letter reason (exhausted, permanent, malformed, ...; see peek).",
        callback=known_reason,
    ),
]


def some_text(value: str | None) -> str | None:
    """A ``--match`` with something to match: an empty one (an unset shell variable) would select
    every letter, and a purge would delete them all."""
    if value is not None and not value.strip():
        raise typer.BadParameter("give the text to match (it is empty: an unset variable?)")
    return value


MatchOption = Annotated[
    str | None,
    typer.Option(
        "--match",
        metavar="TEXT",
        help="Only letters whose body (payload, key), error or tenant contains TEXT, e.g. a tenant's id.",
        callback=some_text,
    ),
]


ErrorOption = Annotated[
    str | None,
    typer.Option(
        "--error",
        metavar="TEXT",
        help="Only letters whose error contains TEXT (429: the throttled ones, not a payload holding 429).",
        callback=some_text,
    ),
]


YesOption = Annotated[bool, typer.Option("--yes", help="Really delete (required).")]
DryRunOption = Annotated[
    bool, typer.Option("--dry-run", help="Count what would be deleted, by type; delete nothing.")
]


def stripped_ids(values: list[str] | None) -> list[str] | None:
    """``--id`` values without the spaces a paste brings (as ``jf status`` takes an id)."""
    return [v.strip() for v in values] if values else values


IdOption = Annotated[
    list[str] | None,
    typer.Option(
        "--id",
        metavar="ID",
        help="Only this letter: a job id or an SQS message id (repeat for more).",
        callback=stripped_ids,
    ),
]


def dead_letters_of(
    ctx: typer.Context, lane: str | None = None, *, attempts: int = 2
) -> tuple[DeadLetters, RuntimeConfig]:
    """The dead letters of the configuration (``lane``: refused, exit 2, when it has no such queue)."""
    from jobframework.dlq import DeadLetters

    aws = aws_of(ctx)
    config = aws.runtime_config()
    if lane is not None and lane not in config.queues:
        from jobframework.core import lane_sort_key

        lanes = ", ".join(sorted(config.queues, key=lane_sort_key)) or "none"
        raise typer.BadParameter(
            f"{lane!r}: no such queue here (its lanes: {lanes}; `jf dlq ls` lists their DLQs)",
            param_hint="LANE",
        )
    sqs = aws.sqs(config, attempts=attempts)
    s3 = aws.client("s3", config=config, attempts=attempts) if config.payload_bucket else None
    dynamodb = aws.client("dynamodb", config=config, attempts=attempts) if config.state_table else None
    letters = DeadLetters(
        config, sqs, s3_client=s3, dynamodb_client=dynamodb, wait_time_seconds=0 if config.endpoint_url else 1
    )
    return letters, config


def check_named(lane: str, ids: list[str], result: RedriveResult, *, filtered: bool) -> None:
    """Fail a redrive given ``--id`` when a named id is in no letter of the DLQ (the rest moved), or
    when none of the named letters matched the other filters (they are there: say so, not "no id")."""
    peek = f"`jf dlq peek {lane}` shows their job ids and message ids"
    if result.not_found and len(result.not_found) == len(set(ids)):
        raise CliError(f"no dead letter of the {lane} DLQ has the id {', '.join(result.not_found)}; {peek}")
    if result.not_found:
        n = len(result.not_found)
        raise CliError(
            f"{n} of the ids given {'is' if n == 1 else 'are'} in no dead letter of the {lane} DLQ (the "
            f"others were there): {', '.join(result.not_found)}; {peek}"
        )
    if not result.matched and lane.endswith("-fifo"):  # (its not_found is never filled: see there)
        raise CliError(
            f"no dead letter of the {lane} DLQ with the ids given was seen: not there, or behind ten "
            f"letters of its group that were not selected (a FIFO DLQ gives no more of a group while "
            f"those are held; redrive the group's earlier letters first); {peek}"
        )
    if not result.matched and filtered:
        raise CliError(
            f"the dead letters with the ids given are in the {lane} DLQ but do not match --type, --reason, "
            f"--match or --older-than; `jf dlq peek {lane} --id ...` shows their type, reason and age"
        )


def none_selected(ctx: typer.Context, lane: str, config: RuntimeConfig, job_type: str | None) -> None:
    """Say, when a selection took nothing, where to see what the DLQ holds (a mistyped type, say), and
    the lane of a job type whose letters are in another DLQ (the topology's job catalog knows it)."""
    catalog = catalog_of(aws_of(ctx), config) if job_type else {}
    route = catalog.get(job_type) if job_type else None
    from jobframework.dlq.letter import UNTYPED

    if job_type and catalog and route is None and job_type != UNTYPED:
        from jobframework.errortext import closest

        close = closest(job_type, list(catalog), cutoff=0.8)
        typer.echo(
            f"no dead letter of the {lane} DLQ matched; this topology has no job type {job_type!r}"
            + (f": did you mean {close}?" if close else f" (`jf dlq peek {lane}` shows their types)"),
            err=True,
        )
        return
    if route is not None and route.lane != lane:
        typer.echo(
            f"no dead letter of the {lane} DLQ matched; {job_type} runs on {route.lane}: its letters are "
            f"in the {route.lane} DLQ (`jf dlq peek {route.lane} --type {job_type}`)",
            err=True,
        )
        return
    typer.echo(
        f"no dead letter of the {lane} DLQ matched; `jf dlq peek {lane}` shows their types, ids and reasons",
        err=True,
    )


def redrive_summary(
    lane: str, result: RedriveResult, *, dry_run: bool, limit: int | None
) -> tuple[str, str | None]:
    """What ``jf dlq redrive`` prints of its result, and a note (stderr) when letters it took were
    dead-lettered for a reason that fails the same way again (:data:`FAIL_AGAIN`)."""
    if not (result.matched or result.skipped or result.later or result.limited):
        return f"the {lane} DLQ is empty: nothing to redrive", None
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(result.by_type.items())) or "none"
    if len(result.by_reason) > 1:  # (one reason: the operator chose it, or the DLQ has no other)
        kinds += "; by reason: " + ", ".join(f"{k} {v}" for k, v in sorted(result.by_reason.items()))
    limited = f"; --limit {limit} reached (more may match)" if result.limited else ""
    if dry_run:
        summary = f"dry run: would redrive {result.matched} ({kinds}); {result.skipped} not matching{limited}"
    else:
        summary = (
            f"redrove {result.moved} ({kinds}); {result.skipped} not matching{limited}; "
            f"{result.failed} failed"
            + (f"; {result.payload_missing} left: payload gone" if result.payload_missing else "")
            + (
                f"; {result.later} arrived in the DLQ while it ran (a redriven job that failed again): "
                "left for the next redrive"
                if result.later
                else ""
            )
        )
    again = sum(n for r, n in result.by_reason.items() if r in FAIL_AGAIN)
    if not again:
        return summary, None
    reasons = ", ".join(sorted(set(result.by_reason) & FAIL_AGAIN))
    # (they were dead-lettered so: a dry run's "would be" read as a forecast of the redrive's outcome)
    which = "the letters it would redrive" if dry_run else "them"
    verb = "were" if again > 1 else "was"
    signed = (
        "; a signature letter is sent back as it came, unsigned or tampered: it fails again unless the "
        "consumer no longer checks signatures; enqueue the job again from a producer with the keys "
        "(JF_SIGNING_KEYS)"
        if "signature" in result.by_reason
        else ""
    )
    return summary, (
        f"{again} of {which} {verb} dead-lettered {reasons}: such a letter fails the same way again "
        f"unless its job's code or its data changed{signed}"
    )
