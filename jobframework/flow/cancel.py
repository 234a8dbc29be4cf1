"""Cancelling a job: a marker in the state table that the start of every run checks atomically.

Each job has a flow item (``pk = job#<id>``, ``sk = flow``; kept by
:mod:`jobframework.stores.job_records`). Before a run the consumer's cancel gate
writes ``started_at`` and ``runs_until`` (now plus the job's timeout) on the condition that the item
has no ``cancelled_at``; :func:`cancel` sets ``cancelled_at``. DynamoDB orders the two writes, so
exactly one of these holds, whatever the race:

- the cancel came first: the run does not start; the record is acknowledged unrun with status
  ``cancelled`` (and no later attempt starts either);
- the start came first: the run goes on, and ``ctx.cancelled`` turns true within a second, so that
  the job may stop; no later attempt starts.

A tracked job keyed by its id whose run claims its idempotency key makes no start claim: its run
reads the marker right after claiming the key, and :func:`cancel` reads the key after setting the
marker (:mod:`jobframework.stores.key_records`). Again one sees the other: a run that finds the
marker does not start; a cancel that finds the key held answers ``signalled``.

:func:`cancel` answers which, and is idempotent.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from jobframework.errors import UnknownJobError
from jobframework.flow.outcome import Drop
from jobframework.state import JobState, JobStatus, no_status
from jobframework.stores import key_records
from jobframework.stores.job_records import with_claims
from jobframework.stores.job_records_dynamodb import status_of_item
from jobframework.stores.key_records import KeyHolder, claims_key, keyed_by_id

if TYPE_CHECKING:
    from jobframework.envelope import Envelope
    from jobframework.jobs import Job
    from jobframework.state import StateStore

log = logging.getLogger(__name__)

CHECK_SECONDS = 1.0
"""How often a running job's ``ctx.cancelled`` reads the marker (at most)."""
WATCHED_JOBS = 1024
"""Running jobs whose cancel marker a process keeps track of (the oldest are forgotten first)."""
CANCELLABLE = (JobState.QUEUED, JobState.SCHEDULED, JobState.RETRYING, JobState.RUNNING)


class CancelOutcome(StrEnum):
    CANCELLED = "cancelled"
    """No run is in progress and none will start: it is acknowledged unrun when it arrives."""
    SIGNALLED = "signalled"
    """A run started within its timeout: it sees ``ctx.cancelled``; no further attempt starts. (A run
    that had only just claimed its key may see the cancel before the job's code: it ends cancelled.)"""
    FINISHED = "finished"
    """Too late: it already succeeded, died, expired (nothing was changed)."""


@dataclass(frozen=True, slots=True)
class CancelResult:
    job_id: str
    outcome: CancelOutcome
    status: JobState | None
    """The job's status before the cancel (``None``: the state table does not know the id yet)."""

    @property
    def status_after(self) -> JobState | None:
        """The job's status as the cancel left it: ``cancelled`` when the outcome is ``cancelled``;
        otherwise unchanged (``signalled``: the run goes on and writes its own status when it ends;
        ``finished``: nothing changed).

        Example:
            >>> CancelResult("j-1", CancelOutcome.CANCELLED, JobState.QUEUED).status_after
            <JobState.CANCELLED: 'cancelled'>
            >>> CancelResult("j-2", CancelOutcome.SIGNALLED, JobState.RUNNING).status_after
            <JobState.RUNNING: 'running'>
        """
        return JobState.CANCELLED if self.outcome is CancelOutcome.CANCELLED else self.status


def cancel(
    store: StateStore, job_id: str, *, unschedule: Callable[[str], None] | None = None
) -> CancelResult:
    """Cancel ``job_id``: it does not start, or, if running, is told to stop (``ctx.cancelled``).

    Only a tracked job can be cancelled: an id with no status record (unknown, untracked, expired, or
    one whose enqueue has not written its status yet) raises. Calling it again changes nothing.
    ``unschedule`` deletes the one-time schedule of a job delayed past 15 minutes (status
    ``scheduled``), given its id, so that it never fires (a failure is logged: the firing is then
    acknowledged unrun).

    Raises:
        UnknownJobError: the state table has no status record of ``job_id``.
        botocore.exceptions.ClientError: the state table refused the write.
    """
    before = store.get_status(job_id)
    if before is None:
        raise UnknownJobError(
            f"{no_status(job_id)}; cancel works on tracked jobs only (jf enqueue --track); an untracked "
            f"job still in its queue can be deleted before it runs: jf queue purge LANE --id {job_id} --yes"
        )
    state = before.status
    if state in (JobState.SUCCEEDED, JobState.DEAD, JobState.EXPIRED):
        return CancelResult(job_id, CancelOutcome.FINISHED, state)
    # A job scheduled further ahead than 7 days keeps its status until after its run: so does the marker.
    keep_until = before.expires_at or 0
    claim = store.jobs.mark_cancelled(job_id, time.time(), keep_until=keep_until)
    runs_until, started_attempt = claim.runs_until, claim.started_attempt
    now = time.time()
    # A job retrying after attempt n (its status says so once that attempt ended) runs only if a later
    # attempt claimed its start before the marker.
    ended = before.attempts if before is not None and state is JobState.RETRYING else -1
    if runs_until > now and started_attempt > ended and state is not JobState.CANCELLED:
        log.info("job %s is running; it is told to stop (ctx.cancelled)", job_id)
        return CancelResult(job_id, CancelOutcome.SIGNALLED, state)
    if before.type is not None and keyed_by_id(job_id, before.key):
        # A job whose run starts with its key's claim (no start claim): the marker is set, so a run that
        # claims the key from now on sees it; one that holds it already was told (stores/key_records.py).
        holder = store.jobs.key_holder(job_id, before.type)
        if holder is KeyHolder.RUN:
            log.info("job %s is running; it is told to stop (ctx.cancelled)", job_id)
            return CancelResult(job_id, CancelOutcome.SIGNALLED, state)
        if holder is KeyHolder.FINISHED:
            return CancelResult(job_id, CancelOutcome.FINISHED, state)
    store.jobs.finish_cancelled(job_id, cancelled_reason(ended + 1), keep_until=keep_until)
    if before.key and not keyed_by_id(job_id, before.key):
        # Its dedup key is free again (as a removed job's id is in BullMQ): an enqueue with that key
        # sends a new job instead of answering with this cancelled one. A marker another job holds stays.
        try:
            store.dedup.release(before.key, job_id)
        except Exception:
            log.warning("releasing the dedup key of cancelled job %s failed", job_id, exc_info=True)
    if state is JobState.SCHEDULED and unschedule is not None:
        try:
            unschedule(job_id)
        except Exception:
            log.warning(
                "deleting the schedule of cancelled job %s failed; when it fires the job is acknowledged "
                "unrun",
                job_id,
                exc_info=True,
            )
    return CancelResult(job_id, CancelOutcome.CANCELLED, state)


def cancellable(
    store: StateStore,
    job_type: str,
    older_than: float,
    *,
    now: datetime | None = None,
    matching: str | None = None,
) -> Iterator[JobStatus]:
    """The jobs of ``job_type`` (id, status, key, ``enqueued_at``) enqueued more than ``older_than``
    seconds ago that have not finished, and whose key contains ``matching`` when given (one
    customer's: ``evt:globex-...``), oldest first; a ``Scan`` of the state table: for operators, not
    hot paths. A job sent by name by a producer without its module has its ``key=`` function's key
    only once it ran: until then its key is its id."""
    cutoff = ((now or datetime.now(UTC)) - timedelta(seconds=older_than)).isoformat()
    values: dict[str, Any] = {
        ":job": {"S": "job#"},
        ":status": {"S": "status"},
        ":type": {"S": job_type},
        ":cutoff": {"S": cutoff},
    }
    for n, state in enumerate(CANCELLABLE):
        values[f":s{n}"] = {"S": state.value}
    kwargs: dict[str, Any] = {
        "TableName": store.table,
        "FilterExpression": (
            "begins_with(pk, :job) AND sk = :status AND job_type = :type AND enqueued_at < :cutoff AND "
            "#status IN (" + ", ".join(f":s{n}" for n in range(len(CANCELLABLE))) + ")"
        ),
        "ExpressionAttributeNames": {"#status": "status"},
        "ExpressionAttributeValues": values,
        "ConsistentRead": True,
    }
    while True:
        response = store.client.scan(**kwargs)
        found = [status_of_item(item) for item in response.get("Items", [])]
        found = with_claims(store.jobs, found, time.time())  # a running one read queued without its claim
        if store.key_table is not None:  # a run that finished in its key's record (stores/key_records.py)
            found = key_records.merged_all(store.client, store.key_table, found, time.time())
        for job in sorted(found, key=lambda j: j.enqueued_at or ""):
            if job.status in CANCELLABLE and (not matching or matching in (job.key or "")):
                yield job
        if "LastEvaluatedKey" not in response:
            return
        kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]


class CancelGate:
    """The consumer side: claim the start of a run unless the job was cancelled (one conditional write).

    ``runner_table`` is the consumer's idempotency table: a job whose run starts with its key's claim
    there makes no start claim; its run reads the marker after that claim instead
    (:mod:`jobframework.stores.key_records`).
    """

    def __init__(self, store: StateStore, runner_table: str | None = None) -> None:
        self.store = store
        self.runner_table = runner_table

    def __call__(
        self, env: Envelope, job: Job[Any], payload: Any, attempt: int, now: float, *, claimant: str = ""
    ) -> Drop | None:
        """``claimant``: the delivery (:func:`claimant_of` its record), whose claim only it undoes."""
        if not env.track:  # only a tracked job can be cancelled (its status is how a cancel finds it)
            return None
        if claims_key(self.runner_table, self.store.key_table, env, job):
            watch(env.id, self.store)  # its run reads the marker after claiming its key (the pipeline)
            return None
        try:
            started = self.store.jobs.claim_start(
                env.id, attempt=attempt, runs_until=now + job.timeout, now=now, claimant=claimant
            )
        except Exception:
            log.warning("checking job %s for a cancel failed; running it", env.id, exc_info=True)
            return None
        if not started:
            log.info("job %s (%s) was cancelled; acknowledged unrun", env.id, env.type)
            return cancelled_drop(attempt)
        watch(env.id, self.store)
        return None


CANCELLED_UNSTARTED = "cancelled before it started"
"""The status reason of a job cancelled before its first run (what :func:`cancel` writes, and what
the consumer that drops its record keeps: it had written ``cancelled`` over it)."""


def cancelled_reason(attempt: int) -> str:
    """The status reason of a job cancelled before ``attempt`` (what :func:`cancel` writes, and what the
    consumer that drops the record keeps): a job that had run and waited to retry was said to be
    "cancelled before it started".

    Example:
        >>> cancelled_reason(1), cancelled_reason(3)
        ('cancelled before it started', 'cancelled before attempt 3')
    """
    return CANCELLED_UNSTARTED if attempt <= 1 else f"cancelled before attempt {attempt}"


def cancelled_drop(attempt: int) -> Drop:
    """A cancelled record's drop (of its ``attempt``): the status says which attempt it did not start."""
    return Drop(JobState.CANCELLED, "cancelled", "Cancelled", cancelled_reason(attempt))


def claimant_of(record: dict[str, Any]) -> str:
    """Who claims a run's start: this receive of the record (a digest of its receipt handle, which
    each receive has its own of; two deliveries of one message are two claimants), else its id."""
    handle = record.get("receiptHandle")
    if isinstance(handle, str) and handle:
        return hashlib.blake2b(handle.encode(), digest_size=12).hexdigest()
    return str(record.get("messageId", ""))


def undo_start_claim(store: StateStore, env: Envelope, claimant: str) -> None:
    """Undo the cancel gate's start claim of a run that did not start (another delivery holds its
    key): the job reads ``queued`` again, not ``running`` until the claim lapses. Only this delivery's
    claim (``claimant``): a running delivery's of the same job stands. One write, on that rare path; a
    failure is logged (the job reads ``running`` until its claim lapses)."""
    if not env.track:
        return
    try:
        store.jobs.unclaim_start(env.id, claimant=claimant)
    except Exception:
        log.warning(
            "undoing the start claim of job %s failed; it reads running a while", env.id, exc_info=True
        )


# -- ctx.cancelled --------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Watch:
    store: StateStore
    checked_at: float = float("-inf")
    cancelled: bool = False


_watches: OrderedDict[str, _Watch] = OrderedDict()
_lock = threading.Lock()


def watch(job_id: str, store: StateStore) -> None:
    """Let ``ctx.cancelled`` of the run of ``job_id`` in this process read its marker."""
    with _lock:
        _watches[job_id] = _Watch(store)
        _watches.move_to_end(job_id)
        while len(_watches) > WATCHED_JOBS:
            _watches.popitem(last=False)


def cancel_requested(job_id: str) -> bool:
    """Whether ``job_id`` was cancelled (``ctx.cancelled``): read at most once a second, then kept.

    ``False`` for a job this process did not start through the cancel gate (no state table, inline
    runs), and when the read fails (logged).
    """
    with _lock:
        w = _watches.get(job_id)
        if w is None:
            return False
        if w.cancelled or time.monotonic() - w.checked_at < CHECK_SECONDS:
            return w.cancelled
        w.checked_at = time.monotonic()
    try:
        w.cancelled = w.store.jobs.cancel_marked(job_id)
    except Exception:
        log.warning("reading the cancel marker of job %s failed", job_id, exc_info=True)
        return False
    return w.cancelled
