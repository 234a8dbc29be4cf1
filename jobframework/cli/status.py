"""``jf status``: what is known of a job, by its id or by its key."""

from __future__ import annotations

import json
import re
import shlex
from typing import TYPE_CHECKING, Annotated

import typer

from jobframework.cli.aws import aws_of
from jobframework.cli.base import JsonOption, app, print_json, rich_console
from jobframework.cli.errors import CliError

if TYPE_CHECKING:
    from jobframework.cli.aws import Aws
    from jobframework.client import JobClient
    from jobframework.state import JobStatus
    from jobframework.topology import RuntimeConfig

KEY_MATCHES = 20
"""How many of a key's jobs ``--key`` lists (newest first)."""


@app.command()
def status(  # noqa: PLR0917 (typer options)
    ctx: typer.Context,
    job_id: Annotated[
        str | None,
        typer.Argument(metavar="[ID]", help="The job id that enqueue printed.", show_default=False),
    ] = None,
    key: Annotated[
        str | None,
        typer.Option(
            "--key",
            metavar="KEY",
            help="The job(s) of this idempotency key instead (an order's, a customer's: the key= of the "
            "job), newest first; a scan of the state table, for an operator, not a hot path.",
            show_default=False,
        ),
    ] = None,
    matching: Annotated[
        str | None,
        typer.Option(
            "--match",
            metavar="TEXT",
            help="The jobs whose key contains this text (a customer's id within keys such as "
            "order:c-42:o-1:confirm), newest first; a scan, as --key.",
            show_default=False,
        ),
    ] = None,
    summary: Annotated[
        bool,
        typer.Option(
            "--summary",
            help="With --match or --key: how many of ALL their jobs are in each state (a backfill's "
            "progress), not the newest 20.",
        ),
    ] = False,
    json_output: JsonOption = False,
) -> None:
    """What is known of a job: queued, scheduled, running, retrying, succeeded or dead.

    Example: jf status 0190b8a4-6f1e-7c3a-9d2b-1a2b3c4d5e6f
    Example: jf status --key invoice:42:pdf
    Example: jf status --match c-42
    Example: jf status --match backfill-2026-12 --summary
    """
    if sum(given is not None for given in (job_id, key, matching)) != 1:
        raise typer.BadParameter(
            "give one of a job id (jf status ID), a key (--key KEY) or text within keys (--match TEXT)",
            param_hint="ID",
        )
    if summary and job_id is not None:
        raise typer.BadParameter("--summary counts the jobs of --match or --key", param_hint="--summary")
    aws = aws_of(ctx)
    if key is not None or matching is not None:
        whole = key is not None
        text = (key if whole else matching) or ""
        if summary:
            _summarize(aws, text.strip(), whole=whole, json_output=json_output)
            return
        found = _by_key(aws, text.strip(), whole=whole)
        if json_output:
            print_json([job.model_dump(mode="json") for job in found])
        elif len(found) == 1:  # (read whole, as jf status ID reads it: a list's read leaves fields out)
            one = _client(aws).status(found[0].id) or found[0]
            _print_one(one)
            _dead_letter_hint(aws, one)
        else:
            _print_many(f"the key {text.strip()}" if whole else f"keys containing {text.strip()}", found)
        return
    assert job_id is not None
    job_id = job_id.strip()  # (a pasted id with a space or a newline around it)
    if not 0 < len(job_id) <= 128:
        raise typer.BadParameter("a job id has 1 to 128 characters", param_hint="ID")
    from jobframework.state import no_status

    config = aws.runtime_config()
    status = _client(aws).status(job_id)
    if status is None:  # (an untracked job leaves no status, but its dead letter names its id)
        step = _saga_step(aws, config, job_id)
        if step is not None:  # (a saga's step is never dead-lettered: its saga has it)
            raise CliError(f"{no_status(job_id)}; {step}")
        raise CliError(
            f"{no_status(job_id)}; an untracked job that failed for good is in its lane's DLQ: "
            f"jf dlq ls, then jf dlq peek LANE --id {shlex.quote(job_id)}"
        )
    if json_output:
        print_json(status.model_dump(mode="json"))
        return
    _print_one(status)
    _dead_letter_hint(aws, status, config)


_SAGA_JOB = re.compile(r"^(?P<saga>.+)-(?P<kind>[cd]?)(?P<index>\d+)$")
"""A saga's job id: ``<saga id>-<n>`` (a step), ``-c<n>`` (its compensation), ``-d<n>`` (a deadline)."""


def _saga_step(aws: Aws, config: RuntimeConfig, job_id: str) -> str | None:
    """What to say of an id with no status that is a saga's job (one read of the saga), else ``None``."""
    match = _SAGA_JOB.match(job_id)
    if match is None or not config.state_table:
        return None
    from jobframework.saga import load_saga

    try:
        saga = load_saga(aws.state_store(config, "the saga"), match["saga"])
    except Exception:  # (no saga to read: the DLQ's hint)
        return None
    index = int(match["index"])
    if saga is None or index >= len(saga.steps):
        return None
    step, kind = saga.steps[index], match["kind"]
    known = {"": step.job_id, "c": step.compensation_job_id}.get(kind)  # (None: not queued yet)
    if (kind == "d") != (step.kind == "wait") or known not in (job_id, None):
        return None  # (an id of this shape that is not one of this saga's jobs)
    what = {"": "step", "c": "compensation of step", "d": "deadline check of step"}[kind]
    return (
        f"it is the {what} {match['index']} of saga {saga.id} ({saga.name}, {saga.status.value}), whose "
        f"record has every step's state, attempts and error: jf saga show {saga.id}"
    )


def _dead_letter_hint(aws: Aws, job: JobStatus, config: RuntimeConfig | None = None) -> None:
    """Where a dead job's letter is and the redrive that runs it again (an on-call trial's status said
    ``dead`` and left finding the letter to the reader): its job's lane from the topology's catalog
    (a job enqueued at another priority is in that priority's DLQ)."""
    from jobframework.status import TAKEN_BY_SAGA

    if job.status.value != "dead" or TAKEN_BY_SAGA in (job.reason or ""):
        return  # (a saga's step whose failure its saga took: no letter)
    lane, hedge = job.lane, ""  # (where its last run came from: its letter is in that lane's DLQ)
    if lane is None:  # (a status written before it kept the lane: the catalog's, hedged)
        from jobframework.cli.aws import catalog_of

        route = catalog_of(aws, config or aws.runtime_config()).get(job.type or "")
        if route is None:
            typer.echo(
                f"{'dead letter:':<13} in its lane's DLQ: jf dlq ls, then jf dlq peek LANE --id {job.id}"
            )
            return
        lane, hedge = route.lane, "; enqueued at another priority, it is in that priority's DLQ"
    typer.echo(
        f"{'dead letter:':<13} jf dlq peek {lane} --id {job.id}  (jf dlq redrive {lane} --id {job.id} "
        f"runs it again{hedge})"
    )


def _client(aws: Aws) -> JobClient:
    """A client to read statuses with, on this command's configuration and clients."""
    from jobframework.client import JobClient

    config = aws.runtime_config()
    return JobClient(
        config, sqs_client=aws.sqs(config), clients={"dynamodb": aws.client("dynamodb", config=config)}
    )


def _summarize(aws: Aws, text: str, *, whole: bool, json_output: bool) -> None:
    """``--summary``: every tracked job of the key (or of keys containing the text), counted by state."""
    from collections import Counter

    from jobframework.ui.records import find_jobs

    if not 0 < len(text) <= 1024:
        raise typer.BadParameter("give 1 to 1024 characters", param_hint="--key" if whole else "--match")
    store = aws.state_store(aws.runtime_config(), "status --summary")
    found = find_jobs(store, key=text if whole else None, key_contains=None if whole else text, limit=None)
    counts = Counter(job.status.value for job in found.jobs)
    if json_output:
        print_json({"total": len(found.jobs), "by_status": dict(counts), "complete": found.complete})
        return
    of = f"the key {text!r}" if whole else f"keys containing {text!r}"
    states = ", ".join(f"{state} {n}" for state, n in counts.most_common()) or "none"
    typer.echo(f"{len(found.jobs)} tracked jobs of {of}: {states}")
    if not found.complete:
        typer.echo(f"jf: note: the scan stopped after {found.scanned} records: there may be more", err=True)


def _by_key(aws: Aws, key: str, *, whole: bool = True) -> list[JobStatus]:
    """The tracked jobs of ``key`` (a debounce window's of it too; ``whole=False``: of every key
    containing it), newest first; none is an error saying why a job of the key may have no status."""
    option = "--key" if whole else "--match"
    if not 0 < len(key) <= 1024:
        raise typer.BadParameter("give 1 to 1024 characters", param_hint=option)
    from jobframework.ui.records import find_jobs

    store = aws.state_store(aws.runtime_config(), f"status {option}")
    if whole:
        found = find_jobs(store, key=key, limit=KEY_MATCHES)
    else:
        found = find_jobs(store, key_contains=key, limit=KEY_MATCHES)
    if not found.jobs:
        stopped = "" if found.complete else f" in the {found.scanned} records read (the scan stopped early)"
        which = f"has the key {key!r}" if whole else f"has a key containing {key!r}"
        raise CliError(
            f"no tracked job {which}{stopped}: a job keeps a status only with track=True (or track= at "
            "its enqueue), for a week after it ends"
            + ("; --key matches a key whole (jf status --match TEXT finds text within keys)" if whole else "")
        )
    return found.jobs


def _print_many(of: str, jobs: list[JobStatus]) -> None:
    from rich.table import Table

    # No box, and folded rather than cut to "inve…": an on-call trial's 80-column terminal.
    table = Table(title=f"jobs of {of} (newest first)", title_justify="left", box=None, pad_edge=False)
    for column in ("id", "status", "attempts", "type", "key", "updated (UTC)"):
        table.add_column(column, no_wrap=column in ("id", "status"), overflow="fold")
    for job in jobs:
        updated = str(job.updated_at or "-").replace("T", " ")[:19]
        table.add_row(job.id, job.status.value, str(job.attempts), job.type, job.key or "-", updated)
    rich_console().print(table)  # (piped: as wide as peek's and queue ls's, not folded at 80)
    more = " (at most the newest 20)" if len(jobs) >= KEY_MATCHES else ""
    typer.echo(f"{len(jobs)} jobs{more}: jf status ID for one in full", err=True)


def _redriven(redrives: int) -> str | None:
    """``redriven: 2 times (its attempts are this run's)``, or ``None`` for a job never redriven."""
    if not redrives:
        return None
    return f"{redrives} time{'s' if redrives > 1 else ''} (its attempts are the latest run's)"


def _print_one(found: JobStatus) -> None:
    started: object = found.started_at
    if started is not None and found.attempts > 1:
        started = f"{started} (attempt {found.attempts}, the latest)"
    rows = {
        "id": found.id,
        "type": found.type,
        "status": found.status.value,
        "attempts": found.attempts,
        "redriven": _redriven(found.redrives),
        "key": found.key,
        "enqueued at": found.enqueued_at,
        "runs at": found.run_at if found.status.value in ("queued", "scheduled") else None,
        "next attempt": found.next_attempt_at,
        "progress": None
        if found.progress is None
        else f"{found.progress:g} %" + (f" ({found.progress_note})" if found.progress_note else ""),
        "started at": started,
        "finished at": found.finished_at,
        "updated at": found.updated_at,
        "cancel asked": found.cancel_requested_at,
        "reason": found.reason,
        "error": found.error,
        "result": None if found.result is None else json.dumps(found.result),
    }
    for name, value in rows.items():
        if value is not None:
            typer.echo(f"{name + ':':<13} {value}")
