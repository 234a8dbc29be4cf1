"""``jf enqueue-many``: a backfill from a file, one job a line (JSON Lines), sent ten to a request."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from typer._click.exceptions import UsageError  # typer carries its own copy of click

from jobframework.cli.aws import aws_of
from jobframework.cli.base import (
    JobsOption,
    JsonOption,
    PriorityName,
    app,
    optional_jobs,
    print_json,
    progress_bar,
)
from jobframework.cli.errors import CliError

CHUNK = 500
"""Lines sent per ``enqueue_many`` call (the progress bar moves by these)."""


def payload_lines(source: str) -> list[tuple[int, dict[str, Any]]]:
    """The payloads of a JSON Lines file (``-``: stdin), each with its line number; blank lines are
    skipped, and a line that is not a JSON object is a usage error naming it."""
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise typer.BadParameter(f"cannot read {source}: {exc}", param_hint="FILE") from None
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except ValueError as exc:
            raise typer.BadParameter(f"line {number} is not JSON: {exc}", param_hint="FILE") from None
        if not isinstance(data, dict):
            raise typer.BadParameter(f"line {number} is not a JSON object", param_hint="FILE")
        found.append((number, data))
    if not found:
        raise typer.BadParameter(f"{source} holds no payload (one JSON object a line)", param_hint="FILE")
    return found


@app.command("enqueue-many")
def enqueue_many(  # noqa: PLR0917 (typer options)
    ctx: typer.Context,
    job_type: Annotated[str, typer.Argument(metavar="TYPE", help="Registered job name.")],
    source: Annotated[
        str, typer.Argument(metavar="FILE", help="JSON Lines: one payload a line; - reads stdin.")
    ],
    priority: Annotated[PriorityName | None, typer.Option(help="Send to another priority's queue.")] = None,
    track: Annotated[
        bool | None,
        typer.Option("--track/--no-track", help="Keep (or not) a status of each; default the job's own."),
    ] = None,
    payload_version: Annotated[
        int | None, typer.Option(min=1, help="The version of the payloads' schema, when older.")
    ] = None,
    dedup_window: Annotated[
        float | None,
        typer.Option(
            help="Seconds each job's key (its key= function's) dedups for at enqueue: a run of the same "
            "file within it sends no job twice (default: the job's own dedup_window, else none).",
            min=0,
            max=7 * 24 * 3600,
        ),
    ] = None,
    jobs: JobsOption = None,
    json_output: JsonOption = False,
) -> None:
    """Enqueue one job per line of a JSON Lines file (a backfill): every line is validated before any
    is sent, then they go ten to a SendMessageBatch; prints each job's id, a line each.

    Each job's key is its job's key= function's; with --dedup-window on each run, a backfill run twice
    sends each key once (a duplicate prints the first job's id); without, the consumer's idempotency
    acknowledges the second run's jobs as duplicates.

    Example: jf enqueue-many crm.sync_contact contacts.jsonl --dedup-window 86400 > ids.txt
    """
    from jobframework.errors import EnqueueOptionError, JobFrameworkError
    from jobframework.outgoing import EnqueueRequest

    lines = payload_lines(source)
    optional_jobs(jobs)
    aws = aws_of(ctx)
    config = aws.runtime_config()
    client = aws.job_client(config)
    client.job(job_type)  # an unknown type fails before anything is read further or sent
    options: dict[str, Any] = {
        "priority": priority.value if priority else None,
        "track": track,
        "payload_version": payload_version,
        "dedup_window": dedup_window,
    }
    prepared = []
    for number, data in lines:  # (all of them, once, before any is sent)
        try:
            prepared.append(client.prepare(EnqueueRequest(job_type, data, **options)))
        except EnqueueOptionError as exc:
            raise UsageError(str(exc)) from exc
        except JobFrameworkError as exc:
            raise CliError(f"line {number} of {source}: {exc}; nothing was sent") from exc
    results = []
    with progress_bar(f"enqueueing {job_type}", len(prepared)) as bar:
        for start in range(0, len(prepared), CHUNK):
            chunk = client.send_many(prepared[start : start + CHUNK])
            results.extend(chunk)
            bar.advance(len(chunk))
    if json_output:
        print_json(
            [
                {"line": n, "id": r.id, "key": r.key, "duplicate": r.duplicate, "error": r.error}
                for (n, _), r in zip(lines, results, strict=True)
            ]
        )
    else:
        for r in results:
            if r.ok:
                typer.echo(r.id)
    sent = sum(r.ok and not r.duplicate for r in results)
    duplicates = sum(r.duplicate for r in results)
    failed = [(n, r) for (n, _), r in zip(lines, results, strict=True) if not r.ok]
    typer.echo(
        f"jf: enqueued {sent} {job_type} jobs"
        + (f"; {duplicates} duplicates of keys sent before (their first jobs' ids)" if duplicates else ""),
        err=True,
    )
    if failed:
        shown = ", ".join(str(n) for n, _ in failed[:10])
        raise CliError(
            f"{len(failed)} lines were not sent (lines {shown}): {failed[0][1].error}; send those again"
        )
