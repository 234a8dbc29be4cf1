"""Job status records found by something other than their id: key, type, status, recent activity.

The state table is keyed by job id only (``job#<id>``), so these are filtered Scans, meant for an
operator's page, not for a hot path (like :func:`jobframework.saga.list_sagas`). A scan reads at most
``max_pages`` pages (1 MB each); :class:`Found` says when it stopped early. A job by id is
:meth:`jobframework.client.JobClient.status`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from jobframework.state import FINAL_STATES, JobState, JobStatus, StateStore
from jobframework.stores import key_records
from jobframework.stores.job_records import OPEN_STATES, with_claims
from jobframework.stores.job_records_dynamodb import status_of_item
from jobframework.stores.key_records import MOVABLE_STATES

MAX_PAGES = 20


@dataclass
class Found:
    """Status records a scan found, newest first, and whether it read the whole table."""

    jobs: list[JobStatus] = field(default_factory=list)
    complete: bool = True
    scanned: int = 0


def find_jobs(
    store: StateStore,
    *,
    key: str | None = None,
    key_prefix: str | None = None,
    key_contains: str | None = None,
    job_type: str | None = None,
    status: JobState | str | None = None,
    updated_since: datetime | None = None,
    limit: int | None = 100,
    max_pages: int = MAX_PAGES,
    started_since: bool = True,
) -> Found:
    """Job status records matching every filter given, newest (``updated_at``) first.

    Args:
        key: exactly this idempotency/dedup key, or a debounce window's of it (``<key>#<window id>``).
        key_prefix: keys that start with this (a schedule's runs: ``schedule:<job>:``).
        key_contains: keys that contain this text (the console's search, as ``jf cancel --match``: one
            customer's ``evt:globex-...``; a debounce window's too).
        job_type: this job type.
        status: this state.
        updated_since: only records written since then.
        limit: at most this many (``None``: all found).
        max_pages: stop after this many scan pages (``Found.complete`` is then false).
        started_since: with ``updated_since``, an open job whose run started since counts too (every
            open job's start claim is then read; ``False``: its status item's time alone decides).
    """
    # A tracked, idempotent job keyed by its id keeps its outcome in its idempotency record, not its
    # status item (stores/key_records.py): with that table, the items that record can move on are
    # scanned whatever their status and time, merged, then filtered here.
    merging = store.key_table is not None
    names: dict[str, str] = {}
    values: dict[str, Any] = {":prefix": {"S": "job#"}}
    filters = ["begins_with(pk, :prefix)", "sk = :sk"]
    values[":sk"] = {"S": "status"}
    movable = ""
    if merging and (status is not None or updated_since is not None):
        names["#status"] = "status"  # a reserved word
        values |= {f":m{n}": {"S": state.value} for n, state in enumerate(sorted(MOVABLE_STATES))}
        movable = f"#status IN ({', '.join(f':m{n}' for n in range(len(MOVABLE_STATES)))})"
    if key is not None:  # a debounced job's key is <key>#<window id>: the key finds its windows too
        values[":key"], values[":key_window"] = {"S": key}, {"S": f"{key}#"}
        filters.append("(job_key = :key OR begins_with(job_key, :key_window))")
    if key_prefix is not None:
        values[":key_prefix"] = {"S": key_prefix}
        filters.append("begins_with(job_key, :key_prefix)")
    if key_contains is not None:
        values[":key_part"] = {"S": key_contains}
        filters.append("contains(job_key, :key_part)")
    if job_type is not None:
        values[":type"] = {"S": job_type}
        filters.append("job_type = :type")
    wanted = JobState(status) if status is not None else None
    since = updated_since.astimezone(UTC).isoformat(timespec="milliseconds") if updated_since else None
    if wanted is JobState.RUNNING or (since is not None and wanted is None and started_since):
        # A run's start is its claim (read below): its status item still reads open, and as old as its
        # enqueue. So open items pass the scan whatever their status filter and time, and are
        # filtered once their claims are read.
        names["#status"] = "status"
        values |= {f":o{n}": {"S": state.value} for n, state in enumerate(sorted(OPEN_STATES))}
        opened = f"#status IN ({', '.join(f':o{n}' for n in range(len(OPEN_STATES)))})"
        movable = f"{movable} OR {opened}" if movable else opened
    if wanted is not None:
        names["#status"] = "status"
        values[":status"] = {"S": wanted.value}
        filters.append(f"(#status = :status OR {movable})" if movable else "#status = :status")
    if since is not None:
        values[":since"] = {"S": since}
        filters.append(f"(updated_at >= :since OR {movable})" if movable else "updated_at >= :since")
    kwargs: dict[str, Any] = {
        "TableName": store.table,
        "FilterExpression": " AND ".join(filters),
        "ExpressionAttributeValues": values,
    }
    if names:
        kwargs["ExpressionAttributeNames"] = names
    found = Found()
    for _ in range(max_pages):
        page = store.client.scan(**kwargs)
        found.scanned += int(page.get("ScannedCount", 0))
        jobs = with_claims(store.jobs, [status_of_item(item) for item in page.get("Items", [])], time.time())
        if merging:
            assert store.key_table is not None
            jobs = key_records.merged_all(store.client, store.key_table, jobs, time.time())
        found.jobs.extend(
            j
            for j in jobs
            if (wanted is None or j.status is wanted) and (since is None or (j.updated_at or "") >= since)
        )
        start = page.get("LastEvaluatedKey")
        if not start:
            break
        kwargs["ExclusiveStartKey"] = start
    else:
        found.complete = False
    found.jobs.sort(key=lambda j: j.updated_at or "", reverse=True)
    if limit is not None:
        found.jobs = found.jobs[:limit]
    return found


@dataclass
class TypeActivity:
    """One job type's last hour, from its status records."""

    job_type: str
    succeeded: int = 0
    dead: int = 0
    retried: int = 0
    """Finished jobs that needed more than one attempt."""
    unrun: int = 0
    """Ended without running: cancelled or expired."""
    in_progress: int = 0
    """Not in a final state yet: queued, scheduled, running or retrying."""

    @property
    def finished(self) -> int:
        return self.succeeded + self.dead

    @property
    def failure_rate(self) -> float | None:
        """Dead-lettered over finished (``None`` with nothing finished)."""
        return self.dead / self.finished if self.finished else None

    @property
    def first_attempt_failure_rate(self) -> float | None:
        return self.retried / self.finished if self.finished else None


def activity(
    store: StateStore, *, window: timedelta = timedelta(hours=1)
) -> tuple[list[TypeActivity], Found]:
    """Per job type: what finished in the last ``window`` (throughput, dead-letter and retry rates).

    Succeeded and dead-lettered jobs count as finished; cancelled and expired ones (final, never run)
    as ``unrun``; only those in no final state (:data:`jobframework.status.FINAL_STATES`) as in progress.
    """
    since = datetime.now(UTC) - window
    found = find_jobs(store, updated_since=since, limit=None, started_since=False)  # (no start is activity)
    by_type: dict[str, TypeActivity] = {}
    for job in found.jobs:
        row = by_type.setdefault(job.type or "?", TypeActivity(job.type or "?"))
        if job.status is JobState.SUCCEEDED:
            row.succeeded += 1
        elif job.status is JobState.DEAD:
            row.dead += 1
        elif job.status in FINAL_STATES:
            row.unrun += 1
        else:
            row.in_progress += 1
        if job.status in (JobState.SUCCEEDED, JobState.DEAD) and job.attempts > 1:
            row.retried += 1
    return sorted(by_type.values(), key=lambda r: r.job_type), found


def seconds_between(start: str | None, end: str | None) -> float | None:
    """Seconds from one ISO 8601 time to another (``None`` if either is missing or unreadable)."""
    if not start or not end:
        return None
    try:
        return round((datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds(), 3)
    except ValueError:
        return None
