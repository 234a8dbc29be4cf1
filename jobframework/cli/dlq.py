"""``jf dlq ...``: inspect, export, purge and redrive dead letters."""

from __future__ import annotations

import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer._click.exceptions import UsageError  # typer carries its own copy of click
from typer.core import TyperGroup

from jobframework.cli.aws import aws_of
from jobframework.cli.base import (
    JsonOption,
    age_text,
    app,
    parse_duration,
    print_json,
    progress_bar,
    rich_console,
    where_text,
)
from jobframework.cli.dlq_args import (
    DryRunOption,
    ErrorOption,
    IdOption,
    MatchOption,
    PriorityArg,
    ReasonOption,
    TypeOption,
    YesOption,
    check_named,
    dead_letters_of,
    none_selected,
    redrive_summary,
)
from jobframework.cli.dlq_show import payload_pointer, print_table, purge_preview, show_in_full
from jobframework.cli.errors import CliError

if TYPE_CHECKING:
    pass

dlq_app = typer.Typer(
    cls=TyperGroup,
    help="Inspect, export, purge and redrive dead letters.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(dlq_app, name="dlq")


@dlq_app.command("ls")
def dlq_ls(
    ctx: typer.Context,
    json_output: JsonOption = False,
    sample: Annotated[
        int, typer.Option(help="Messages read per DLQ to find the oldest (0: skip).", min=0)
    ] = 100,
) -> None:
    """Each DLQ's depth and the age of its oldest dead letter.

    Example: jf dlq ls
    """
    letters, config = dead_letters_of(ctx)
    depths = letters.depths(sample=sample)
    stopped = aws_of(ctx).paused_lanes(config)
    if json_output:
        print_json(
            [
                {
                    **asdict(d),
                    "source_paused": d.priority in stopped,
                    "source_paused_since": stopped.get(d.priority),
                }
                for d in depths
            ]
        )
        return
    from rich.table import Table

    table = Table(title=f"DLQs of {where_text(config)}", title_justify="left")
    for name in ("dlq", "queue", "depth", "in flight", "oldest", "its queue"):
        table.add_column(name, justify="right" if name in ("depth", "in flight", "oldest") else "left")
    for d in depths:
        oldest = age_text(d.oldest_age_seconds) + ("+" if d.sampled and d.sampled < d.depth else "")
        source = f"paused since {stopped[d.priority]}" if d.priority in stopped else "not paused"
        table.add_row(d.priority, d.name, str(d.depth), str(d.in_flight), oldest, source)
    rich_console().print(table)


@dlq_app.command("peek")
def dlq_peek(  # noqa: PLR0917 (typer options)
    ctx: typer.Context,
    priority: PriorityArg,
    count: Annotated[
        int, typer.Option("-n", "--count", "--limit", help="How many to show.", min=1, max=1000)
    ] = 10,
    job_type: TypeOption = None,
    reason: ReasonOption = None,
    ids: IdOption = None,
    matching: MatchOption = None,
    error: ErrorOption = None,
    json_output: JsonOption = False,
) -> None:
    """Show dead letters (type, id, reason, error, attempts, dead-at) without removing anything; with
    --id, those letters in full (body and attributes).

    Example: jf dlq peek default -n 5 --reason exhausted
    """
    letters, config = dead_letters_of(ctx, priority)
    if ids:
        found = letters.peek(priority, limit=None, ids=ids)
        s3 = letters.s3 if config.payload_bucket else None
        show_in_full(priority, found, ids, json_output=json_output, s3=s3)
        return
    depth = letters.depth(priority)  # (before the peek, which holds what it reads for a moment)
    found = letters.peek(
        priority, limit=count, job_type=job_type, reason=reason, matching=matching, error_contains=error
    )
    pointers = [payload_pointer(d.body) for d in found]
    filtered = bool(job_type or reason or matching or error)
    if not found and filtered:
        none_selected(ctx, priority, config, job_type)  # (on stderr: --json's [] stands)
        if not json_output:
            return  # (no empty table under the explanation)
    if json_output:
        print_json(
            [
                {**d.summary(), **({"payload_ref": ref} if ref else {})}
                for d, ref in zip(found, pointers, strict=True)
            ]
        )
        return
    print_table(priority, found, pointers, depth=depth, count=count, filtered=filtered)


@dlq_app.command("export")
def dlq_export(
    ctx: typer.Context,
    priority: PriorityArg,
    out: Annotated[Path, typer.Option("--out", "-o", help="JSON Lines file to write ('-' for stdout).")],
) -> None:
    """Write every dead letter (body, attributes, reason) as JSON Lines; nothing is removed. A new
    file is readable by its owner only: it holds the payloads.

    Example: jf dlq export low --out low-dlq.jsonl
    """
    letters, _ = dead_letters_of(ctx, priority)
    if str(out) == "-":
        count = letters.export(priority, sys.stdout)
        return
    try:
        with (
            open(_owner_only(out), "w", encoding="utf-8") as fh,
            progress_bar(f"exporting {priority} DLQ", letters.depth(priority)) as bar,
        ):
            count = letters.export(priority, fh, progress=bar.advance)
    except OSError as exc:
        raise CliError(f"cannot write {out}: {exc.strerror or exc}") from exc
    typer.echo(f"exported {count} dead letters to {out}")


@dlq_app.command("purge")
def dlq_purge(  # noqa: PLR0917
    ctx: typer.Context,
    priority: PriorityArg,
    job_type: TypeOption = None,
    reason: ReasonOption = None,
    ids: IdOption = None,
    matching: MatchOption = None,
    error: ErrorOption = None,
    yes: YesOption = False,
    dry_run: DryRunOption = False,
    json_output: JsonOption = False,
) -> None:
    """Delete dead letters for good (all, or those of a type, a reason or given ids). Needs --yes.

    Only the letters in the DLQ when it starts are deleted.

    Example: jf dlq purge low --type reports.generate --dry-run, then --yes
    """
    if not yes and not dry_run:
        raise UsageError(
            "purge deletes dead letters for good; add --yes to confirm (--dry-run counts what it would "
            "delete first)"
        )
    letters, config = dead_letters_of(ctx, priority)
    if dry_run:
        found = letters.peek(
            priority,
            limit=None,
            job_type=job_type,
            reason=reason,
            ids=ids,
            matching=matching,
            error_contains=error,
        )
        filtered = bool(job_type or reason or matching or error)
        # (an id whose letter the other filters leave out is not "in no letter": named only unfiltered)
        purge_preview(priority, found, None if filtered else ids, json_output=json_output)
        if not found and filtered:
            none_selected(ctx, priority, config, job_type)
        return
    purged = letters.purge(
        priority, job_type=job_type, reason=reason, ids=ids, matching=matching, error_contains=error
    )
    deleted = purged.deleted
    if json_output:
        print_json(
            {
                "priority": priority,
                "type": job_type,
                "reason": reason,
                "ids": ids,
                "match": matching,
                "error": error,
                "deleted": deleted,
                "not_found": purged.not_found,
            }
        )
    else:
        typer.echo(f"deleted {deleted} dead letter{'' if deleted == 1 else 's'} from the {priority} DLQ")
    if purged.not_found:  # (as a redrive's: the rest were deleted)
        raise CliError(
            f"no dead letter of the {priority} DLQ has the id {', '.join(purged.not_found)} (a typo, or "
            f"deleted already); `jf dlq peek {priority}` shows their job ids and message ids"
        )
    if not deleted and ids:  # named letters that are there, but not selected (or a FIFO DLQ's unseen)
        raise CliError(
            f"no dead letter of the {priority} DLQ has the id {', '.join(ids)}"
            + (
                " and matches --type, --reason, --match or --error"
                if job_type or reason or matching or error
                else ""
            )
            + f"; `jf dlq peek {priority}` shows their job ids and message ids"
        )
    if not deleted and (job_type or reason or matching or error):
        none_selected(ctx, priority, config, job_type)


@dlq_app.command("redrive")
def dlq_redrive(  # noqa: PLR0917
    ctx: typer.Context,
    priority: PriorityArg,
    job_type: TypeOption = None,
    reason: ReasonOption = None,
    ids: IdOption = None,
    matching: MatchOption = None,
    error: ErrorOption = None,
    older_than: Annotated[
        str | None,
        typer.Option(metavar="AGE", help="Only dead letters at least this old (90s, 15m, 2h, 1d)."),
    ] = None,
    limit: Annotated[int | None, typer.Option(metavar="N", help="At most this many.", min=1)] = None,
    rate: Annotated[float | None, typer.Option(help="At most this many messages a second.", min=0.1)] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show what would move; move nothing.")] = False,
    native: Annotated[
        bool,
        typer.Option("--native", help="Start an SQS StartMessageMoveTask instead (the console's redrive)."),
    ] = False,
    json_output: JsonOption = False,
) -> None:
    """Send dead letters back to their source queue: attempts reset; id, key and trace kept.

    Each message is deleted from the DLQ only after its send succeeded. Only the letters in the DLQ
    when it starts are considered: a redriven job that fails again stays for the next redrive.

    Example: jf dlq redrive default --type crm.sync --older-than 10m --dry-run
    """
    seconds = parse_duration(older_than, option="--older-than") if older_than else None
    if native:
        if job_type or reason or ids or matching or error or seconds or limit or dry_run:
            raise UsageError(
                "--native moves the whole DLQ: it takes no --type, --reason, --id, --match, --error, "
                "--older-than, --limit or --dry-run"
            )
        letters, _ = dead_letters_of(ctx, priority, attempts=1)
        handle = letters.start_native_redrive(priority, rate=int(rate) if rate else None)
        if json_output:
            print_json({"task_handle": handle})
        else:
            typer.echo(f"started message move task {handle}; follow it with `jf dlq tasks {priority}`")
        return
    letters, config = dead_letters_of(ctx, priority)
    select: dict[str, Any] = {"job_type": job_type, "reason": reason, "older_than": seconds}
    select["message_ids"], select["matching"], select["error_contains"] = ids or None, matching, error
    if json_output:
        result = letters.redrive(priority, **select, limit=limit, rate=rate, dry_run=dry_run)
    else:
        # The bar counts letters considered (each once, matching or not), against the DLQ's depth at
        # the start; a --limit ends it early (its total is not the limit: more letters than that may be
        # considered before that many match).
        total = letters.depth(priority)
        # (the letters read, matching or not: "1/1" of a redrive that moved none read as one moved)
        verb = "dry run" if dry_run else "redrive"
        label = f"{verb}: {priority} DLQ letters read" + (f" (at most {limit} moved)" if limit else "")
        with progress_bar(label, total) as bar:
            result = letters.redrive(
                priority, **select, limit=limit, rate=rate, dry_run=dry_run, progress=bar.advance
            )
    if json_output:
        print_json(result.as_dict())
    else:
        summary, note = redrive_summary(priority, result, dry_run=dry_run, limit=limit)
        typer.echo(summary)
        if note:
            typer.echo(f"jf: note: {note}", err=True)
        if result.matched:  # (they wait in a paused queue: say so, and for how long)
            aws_of(ctx).note_if_paused(config, priority, "each redriven job")
    if ids:  # named letters that are not there, or not selected: a script must hear it
        check_named(
            priority, ids, result, filtered=bool(job_type or reason or older_than or matching or error)
        )
    elif not result.matched and (job_type or reason or older_than or matching or error):
        none_selected(ctx, priority, config, job_type)
    missing = (  # (letters selected and left behind fail the command, so that a script hears of them)
        f"{result.payload_missing} dead letters stay in the DLQ because their offloaded payload is gone "
        "(expired or deleted): keep them with `jf dlq export`, then `jf dlq purge`"
        if result.payload_missing
        else ""
    )
    if result.failed:
        if missing:
            typer.echo(f"jf: {missing}", err=True)
        raise CliError(
            f"{result.failed} dead letters could not be sent (they stay in the DLQ): {result.errors[0]}"
        )
    if missing:
        raise CliError(missing)


@dlq_app.command("tasks")
def dlq_tasks(ctx: typer.Context, priority: PriorityArg, json_output: JsonOption = False) -> None:
    """The DLQ's native redrive tasks (StartMessageMoveTask) and their progress.

    Example: jf dlq tasks default
    """
    letters, _ = dead_letters_of(ctx, priority, attempts=1)
    tasks = letters.native_tasks(priority)
    if json_output:
        print_json(tasks)
        return
    if not tasks:
        typer.echo(f"no message move tasks on the {priority} DLQ")
    for t in tasks:
        typer.echo(
            f"{t.get('Status')}: {t.get('ApproximateNumberOfMessagesMoved', 0)}/"
            f"{t.get('ApproximateNumberOfMessagesToMove', '?')} moved, started {t.get('StartedTimestamp')}"
            + (f", {t['FailureReason']}" if t.get("FailureReason") else "")
        )


def _owner_only(path: Path) -> int:
    """``path`` opened for writing from its start, readable by its owner only (an export holds the
    payloads; a file that was there keeps no wider mode)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    return fd
