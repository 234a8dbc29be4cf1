"""``jf cancel``: cancel one job by id, or in bulk by type and age (with a dry run)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from jobframework.cli.aws import aws_of, catalog_of
from jobframework.cli.base import JsonOption, app, parse_duration, print_json
from jobframework.cli.errors import EXIT_FAILED

if TYPE_CHECKING:
    from jobframework.config import JobRoute
    from jobframework.state import JobState, StateStore


@app.command("cancel")
def cancel(  # noqa: PLR0917
    ctx: typer.Context,
    job_id: Annotated[
        str | None, typer.Argument(metavar="[ID]", help="The job to cancel (or use --type and --older-than).")
    ] = None,
    job_type: Annotated[
        str | None, typer.Option("--type", help="Cancel the unfinished jobs of this type...")
    ] = None,
    older_than: Annotated[
        str | None, typer.Option("--older-than", help="...enqueued longer ago than this (90s, 15m, 2h, 1d).")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List what would be cancelled; change nothing.")
    ] = False,
    matching: Annotated[
        str | None,
        typer.Option(
            "--match", metavar="TEXT", help="...and whose key contains TEXT (one customer's, one tenant's)."
        ),
    ] = None,
    json_output: JsonOption = False,
) -> None:
    """Cancel a job: not started, it is acknowledged unrun (status cancelled); running, it sees
    ctx.cancelled and may stop. Safe to repeat. Exits 1 when it was too late (the job had ended).

    Example: jf cancel --type reports.generate --older-than 1h --dry-run
    """
    if job_id is None and job_type is None:
        raise typer.BadParameter("give a job ID, or --type TYPE --older-than AGE for a bulk cancel")
    if job_id is not None and job_type is not None:
        raise typer.BadParameter("give either a job ID or --type (with --older-than), not both")
    if job_type is not None and older_than is None:
        raise typer.BadParameter("a bulk cancel needs --older-than (0s for every unfinished job)")
    if matching is not None and (job_type is None or not matching.strip()):
        raise typer.BadParameter(
            "--match selects among a bulk cancel's jobs (--type and --older-than) by text in their key; "
            "give it a text that is not empty",
            param_hint="--match",
        )
    from jobframework.flow.cancel import cancel as cancel_job
    from jobframework.flow.cancel import cancellable

    aws = aws_of(ctx)
    config = aws.runtime_config()
    store = aws.state_store(config, "cancel")

    def unschedule(found_id: str) -> None:  # a job delayed past 15 minutes: its schedule never fires
        from jobframework.delays import delete_one_time_schedule

        delete_one_time_schedule(aws.client("scheduler", config=config), config.schedule_group, found_id)

    if job_id is not None:
        job_id = job_id.strip()  # (a pasted id with a space or a newline around it)
        if not 0 < len(job_id) <= 128:
            raise typer.BadParameter("a job id has 1 to 128 characters", param_hint="ID")
        result = cancel_job(store, job_id, unschedule=unschedule)
        after = _value(result.status_after)
        before = _value(result.status)
        if json_output:
            print_json(
                {"id": job_id, "outcome": result.outcome.value, "status": after, "status_before": before}
            )
        elif before == after == "cancelled":  # (a second cancel: the first one stands)
            typer.echo(f"{job_id}: already cancelled (nothing changed)")
        elif result.outcome.value == "finished":
            typer.echo(f"{job_id}: too late, it had already ended: {before} (nothing changed)")
            if before == "dead":  # its letter waits in a DLQ, where the next bulk redrive runs it again
                typer.echo(_dead_letter_hint(job_id, store, catalog_of(aws, config)), err=True)
        else:
            typer.echo(f"{job_id}: {result.outcome.value} (status {after}, was {before})")
            if result.outcome.value == "signalled":
                typer.echo(_SIGNALLED_NOTE, err=True)
        if result.outcome.value == "finished":  # not cancelled: a script's `jf cancel ID || ...` sees it
            raise typer.Exit(EXIT_FAILED)
        return
    assert job_type is not None and older_than is not None
    seconds = parse_duration(older_than, option="--older-than")
    found = list(cancellable(store, job_type, seconds, matching=matching))
    jobs = []
    for job in found:
        entry: dict[str, str | None] = {
            "id": job.id,
            "status": job.status.value,
            "key": job.key,
            "enqueued_at": job.enqueued_at,
        }
        if not dry_run:
            result = cancel_job(store, job.id, unschedule=unschedule)
            entry.update(
                outcome=result.outcome.value,
                status=_value(result.status_after),
                status_before=_value(result.status),
            )
        jobs.append(entry)
    if json_output:
        print_json(
            {
                "type": job_type,
                "older_than_seconds": seconds,
                "match": matching,
                "dry_run": dry_run,
                "jobs": jobs,
            }
        )
        return
    for entry in jobs:
        if dry_run:
            key = entry["key"] or "-"
            typer.echo(f"{entry['id']}  {entry['status']:<9} key {key}  enqueued {entry['enqueued_at']}")
        else:
            was = f"(status {entry['status']}, was {entry['status_before']})"
            typer.echo(f"{entry['id']}  {entry['outcome']:<9} {was}  enqueued {entry['enqueued_at']}")
    if not jobs:
        from jobframework.errortext import closest

        known = catalog_of(aws, config)  # (the topology's jobs: a mistyped type's close one)
        close = closest(job_type, list(known), cutoff=0.8) if known and job_type not in known else None
        typer.echo(
            f"no unfinished tracked job of type {job_type} "
            + (f"whose key contains {matching!r} " if matching else "")
            + f"was enqueued more than {older_than} ago (nothing changed); "
            + (
                f"did you mean {close}? "
                if close
                else ""
                if known and job_type in known  # (a type it knows: its jobs are finished, or newer)
                else "check the type's spelling: "
            )
            + "`jf status ID` shows a job's type and key"
            + (
                " (a job sent by name without its module, key= not given, has its key= function's key "
                "only once it ran: until then its key is its id)"
                if matching
                else ""
            )
        )
        return
    if dry_run:
        typer.echo(f"{len(jobs)} job(s) of {job_type} would be cancelled (dry run: nothing changed)")
    else:
        counts: dict[str, int] = {}
        for entry in jobs:
            outcome = str(entry["outcome"])
            counts[outcome] = counts.get(outcome, 0) + 1
        summary = ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items())) or "none"
        typer.echo(f"{len(jobs)} job(s) of {job_type}: {summary}")
        if "signalled" in counts:
            typer.echo(_SIGNALLED_NOTE, err=True)


_SIGNALLED_NOTE = (
    "jf: note: a signalled job was running: no further attempt starts, and the run stops only where "
    "the job's code checks ctx.cancelled; otherwise it runs to its end (`jf status ID` then says so)"
)


def _value(state: JobState | None) -> str | None:
    return state.value if state is not None else None


def _dead_letter_hint(job_id: str, store: StateStore, catalog: dict[str, JobRoute]) -> str:
    """How to keep a dead job from running again: its dead letter stays in its lane's DLQ (a saga's
    step has none: its saga took the failure)."""
    from jobframework.status import TAKEN_BY_SAGA

    status = store.jobs.get_status(job_id)
    if status is not None and status.reason and f": {TAKEN_BY_SAGA} " in status.reason:
        return f"jf: it has no dead letter: {status.reason.split(': ', 1)[1]}"
    route = catalog.get(status.type) if status is not None and status.type else None
    where, lane = (f"the {route.lane} DLQ", route.lane) if route is not None else ("its lane's DLQ", "LANE")
    return (
        f"jf: its dead letter stays in {where} (or its priority's, if it was enqueued with priority=), "
        f"where a redrive runs it again; to drop it: jf dlq purge {lane} --id {job_id} --yes"
    )
