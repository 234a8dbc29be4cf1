"""A job's status as the framework reports it: its states, the record, and what to say about an id
with none. The records themselves are kept by :mod:`jobframework.stores.job_records`."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict

STATUS_TTL_SECONDS = 7 * 24 * 3600
MAX_RESULT_CHARS = 1000


class JobState(StrEnum):
    QUEUED = "queued"
    SCHEDULED = "scheduled"
    RUNNING = "running"
    RETRYING = "retrying"
    SUCCEEDED = "succeeded"
    DEAD = "dead"
    CANCELLED = "cancelled"
    """Acknowledged unrun: ``client.cancel`` before it started, or superseded by a debounce."""
    EXPIRED = "expired"
    """Acknowledged unrun: not started by its deadline (``expires_in`` / ``expires_after``)."""


TAKEN_BY_SAGA = "taken by saga"
"""What a saga step's status reason says when its saga took its failure (it compensates; no dead letter):
``permanent: taken by saga <id>, which compensates (no dead letter)``."""

FINAL_STATES = frozenset({JobState.SUCCEEDED, JobState.DEAD, JobState.CANCELLED, JobState.EXPIRED})


DUPLICATE_REASON = "duplicate: key {key} had already completed, so this job did not run"
"""A succeeded job's reason when its key's earlier run made it a duplicate (it did not run)."""


class JobStatus(BaseModel):
    """What is known of one job (``client.status(job_id)``, ``jf status ID``, ``GET /jobs/{id}``)."""

    model_config = ConfigDict(defer_build=True)  # built on first use, not at cold start

    id: str
    type: str | None = None
    status: JobState
    attempts: int = 0
    key: str | None = None
    enqueued_at: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    updated_at: str | None = None
    error: str | None = None
    reason: str | None = None
    result: Any = None
    trace_id: str | None = None
    """The W3C trace id the job travelled under (from its enqueue), to find its spans and logs."""
    cancel_requested_at: str | None = None
    """When a cancel was asked (``client.cancel``); a run it signalled may still have finished."""
    run_at: str | None = None
    """When a job enqueued with a ``delay`` is due (until it has run)."""
    next_attempt_at: str | None = None
    """When a retrying job's next attempt is due (its backoff's end: the message shows again then)."""
    progress: float | None = None
    """What a running job last said of its progress (``ctx.set_progress``), 0 to 100; ``None`` once it
    ended, or if it said nothing."""
    progress_note: str | None = None
    """What it said with it (``rendering page 4 of 10``)."""
    redrives: int = 0
    """Times its dead letter was redriven (``jf dlq redrive``): each run's ``attempts`` start at 1."""
    lane: str | None = None
    """The lane of the queue its last run came from (``high``, ``low-cpu``): a dead job's letter is in
    that lane's DLQ (``None`` until a consumer wrote its status)."""
    expires_at: int | None = None
    """Epoch seconds when the state table drops this status: 7 days after its last change, or after
    the job's run time for a job enqueued with a longer ``delay``."""

    @property
    def duplicate(self) -> bool:
        """It succeeded without running: its key's earlier run had completed (``reason`` says which)."""
        return self.status is JobState.SUCCEEDED and (self.reason or "").startswith(
            DUPLICATE_REASON.split("{", 1)[0]
        )


def now_iso(later: float = 0.0) -> str:
    """Now (or ``later`` seconds from now), as the status records write times (ISO 8601, UTC,
    milliseconds)."""
    return (datetime.now(UTC) + timedelta(seconds=later)).isoformat(timespec="milliseconds")


def summarize(result: Any) -> str | None:
    """A JSON summary of a job's return value, at most 1000 characters (``None`` for ``None``)."""
    if result is None:
        return None
    from pydantic_core import to_jsonable_python

    try:
        text = json.dumps(to_jsonable_python(result), separators=(",", ":"))
    except Exception:
        text = json.dumps(repr(result))
    return text if len(text) <= MAX_RESULT_CHARS else json.dumps(text[: MAX_RESULT_CHARS - 20] + "...")


def no_status(job_id: str) -> str:
    """What to tell someone who asked for a job that has no status record.

    Example:
        >>> no_status("0190B8A4-6F1E").split(" in the state table")[0]
        'no job 0190B8A4-6F1E (ids the client makes are lowercase: 0190b8a4-6f1e)'
        >>> no_status("")
        "'' is no job id (0 characters): a job id has 1 to 128"
    """
    if not 0 < len(job_id) <= 128:
        cut = "..." if len(job_id) > 40 else ""
        return f"{job_id[:40]!r}{cut} is no job id ({len(job_id)} characters): a job id has 1 to 128"
    shown = repr(job_id) if job_id != job_id.strip() or not job_id.isprintable() else job_id
    if job_id.strip().lower() != job_id.strip():
        shown += f" (ids the client makes are lowercase: {job_id.strip().lower()})"
    return (
        f"no job {shown} in the state table: an unknown id, an expired status (kept 7 days after its last "
        "change, or after its run time for a delayed job), or a job that "
        "is not tracked (@job(..., track=True) or enqueue(..., track=True) keeps a status)"
    )


def wait_for_final(
    read: Callable[[], JobStatus | None],
    job_id: str,
    *,
    timeout: float,
    every: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> JobStatus:
    """Poll ``read`` (one status read each) until the job ends (succeeded, dead, cancelled, expired);
    its final status. Reads start 0.1 s apart and slow to ``every`` seconds.

    Raises:
        ValueError: ``every`` is not above 0, or ``timeout`` is below 0.
        LookupError: the job has no status record (unknown, untracked or expired).
        TimeoutError: it has not ended after ``timeout`` seconds (the message says its status then).
    """
    if not every > 0 or not timeout >= 0:
        raise ValueError(
            f"wait polls every > 0 seconds for timeout >= 0 seconds, got every={every!r}, timeout={timeout!r}"
        )
    deadline, pause = clock() + timeout, min(0.1, every)
    while True:
        status = read()
        if status is None:
            raise LookupError(no_status(job_id))
        if status.status in FINAL_STATES:
            return status
        left = deadline - clock()
        if left <= 0:
            raise TimeoutError(
                f"job {job_id} has not ended after {timeout:g} s: it is {status.status.value} "
                f"(attempts {status.attempts}); wait again, or see it with `jf status {job_id}`"
            )
        sleep(min(pause, left))
        pause = min(every, pause * 2)
