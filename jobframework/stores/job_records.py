"""A job's records: its status, and the start claim and cancel marker its runs and cancels share.

Two items a tracked job, in the state table (``pk = job#<id>``):

* ``sk = status``: the status record, written at enqueue (``queued``/``scheduled``) and with each
  outcome (``retrying``, ``succeeded``, ``dead``, ``cancelled``, ``expired``);
* ``sk = flow``: the start claim of the cancel check (``started_at``, ``runs_until``,
  ``started_attempt``), written when a run starts unless the job was cancelled, and the cancel
  marker (``cancelled_at``). The claim is what makes ``status`` say ``running`` without a write of
  its own, and what makes a cancel racing a start safe: one of them sees the other.

:class:`JobRecords` is what the rest of the package asks of them. Two implementations keep the same
rules: :class:`~jobframework.stores.job_records_dynamodb.DynamoJobRecords` (the state table) and
:class:`~jobframework.stores.job_records_memory.InMemoryJobRecords` (a dict and a lock: for tests of
the pipeline without the embedded AWS). ``tests/functional/test_job_records.py`` runs the one
contract against both.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol

from jobframework.status import FINAL_STATES, STATUS_TTL_SECONDS, JobState, JobStatus
from jobframework.stores.key_records import KeyHolder

STATUS_FIELDS = {
    "type": "job_type",
    "key": "job_key",
    "attempts": "attempts",
    "enqueued_at": "enqueued_at",
    "started_at": "started_at",
    "finished_at": "finished_at",
    "error": "error",
    "reason": "reason",
    "result": "job_result",
    "trace_id": "trace_id",
    "next_attempt_at": "next_attempt_at",
    "redrives": "redrives",
    "lane": "lane",
}
"""Status fields (``put_statuses``' keys) and the attributes of the status item that hold them."""

EARLY_STATES = frozenset({JobState.QUEUED, JobState.SCHEDULED})
"""States a producer writes; they never overwrite a state a consumer wrote (the job may be done)."""


@dataclass(frozen=True, slots=True)
class StartClaim:
    """The start claim of a job's latest run, as a cancel found it."""

    runs_until: float = 0.0
    """Epoch seconds: when the run's hard deadline passes (0: no run claimed its start)."""
    started_attempt: int = 0


@dataclass(frozen=True, slots=True)
class StartCheck:
    """What a run whose key's claim is its start reads right after that claim (one consistent read)."""

    cancelled: bool
    """The job carries a cancel marker: the run does not start."""
    has_status: bool
    """The job has a status item (its producer wrote ``queued``, or an earlier attempt an outcome): the
    key's record can move it on. A tracked job sent by another producer has none, so its run writes
    its outcome as any run does."""


CLAIM_FIELDS = ("started_at", "runs_until", "started_attempt", "claimed_by")
"""The start claim's attributes of a job's flow item."""


def replaces_claim(flow: dict[str, Any], attempt: int, now: float, claimant: str) -> bool:
    """Whether a start claim of ``attempt`` by ``claimant`` takes the place of the one in ``flow``:
    none, a lapsed one, an earlier attempt's, its own, or one older than claimants (the state table's
    condition says the same)."""
    return (
        "runs_until" not in flow
        or float(flow["runs_until"]) < now
        or int(flow.get("started_attempt") or 0) < attempt
        or flow.get("claimed_by", claimant) == claimant
    )


class JobRecords(Protocol):
    """What the package asks of a job's records (see the module's docstring)."""

    def set_status(
        self,
        job_id: str,
        state: JobState,
        *,
        job_type: str | None = None,
        attempts: int | None = None,
        key: str | None = None,
        enqueued_at: str | None = None,
        error: str | None = None,
        reason: str | None = None,
        result: str | None = None,
        trace_id: str | None = None,
        run_at: str | None = None,
        ttl: int = STATUS_TTL_SECONDS,
    ) -> None:
        """Record a state; given fields overwrite, ``started_at`` is set once, ``finished_at`` on a
        final state, ``error`` cleared on success; ``queued``/``scheduled`` only over nothing or
        each other."""
        ...

    def put_statuses(self, statuses: list[dict[str, Any]], ttl: int = STATUS_TTL_SECONDS) -> None:
        """Write whole status records (dicts of ``id``, ``status`` and :data:`STATUS_FIELDS` keys)."""
        ...

    def get_status(self, job_id: str) -> JobStatus | None:
        """The job's status (``running`` while a claimed run has not ended), ``None`` if it has none."""
        ...

    def claims(self, job_ids: list[str]) -> dict[str, dict[str, Any]]:
        """The flow items (start claim, cancel marker; plain values) of those of ``job_ids`` that have one."""
        ...

    def set_progress(self, job_id: str, percent: float, note: str | None) -> bool:
        """Note a running job's progress on its status item (none is made: ``False`` when it has
        none)."""
        ...

    def requeue(self, job_id: str, reason: str) -> bool:
        """A dead job's status back to ``queued`` with ``reason`` (its letter was redriven), one more
        ``redrives``; its last error and attempts stay. Nothing changes unless it reads ``dead`` (a
        consumer may have run the redriven job already). ``True`` when the status changed."""
        ...

    def lapse_claim(self, job_id: str, *, died_at: str) -> None:
        """End a start claim made before ``died_at`` (the dead run's; ISO, as the records write times),
        so that a redriven job does not read ``running`` on it until its deadline. Called before the
        redrive sends the letter: a claim of the redriven job's own run is made after, and stands."""
        ...

    def claim_start(
        self, job_id: str, *, attempt: int, runs_until: float, now: float, claimant: str = ""
    ) -> bool:
        """Claim the start of a run for ``claimant`` (the delivery); ``False`` (nothing written) when
        the job was cancelled. Another delivery's live claim of this attempt is left as it is (``True``:
        this one goes on; its key, if any, decides whether it runs)."""
        ...

    def unclaim_start(self, job_id: str, *, claimant: str) -> None:
        """Undo ``claimant``'s start claim when its run did not start (its key is held by another
        delivery): the job reads as it did before the claim (``queued``, not ``running``). Another
        delivery's claim is left as it is."""
        ...

    def cancel_marked(self, job_id: str) -> bool:
        """Whether the job carries a cancel marker (a consistent read)."""
        ...

    def start_check(self, job_id: str) -> StartCheck:
        """Whether the job carries a cancel marker and whether it has a status item (one consistent
        read of both)."""
        ...

    def mark_cancelled(self, job_id: str, now: float, *, keep_until: float = 0) -> StartClaim:
        """Set the cancel marker (the first one stays) and return the start claim it found. The marker
        lasts 7 days, or until ``keep_until`` (epoch seconds) if later: as long as the job's status,
        which a job scheduled further ahead keeps until 7 days after its run time."""
        ...

    def finish_cancelled(self, job_id: str, reason: str, *, keep_until: float = 0) -> None:
        """Status ``cancelled`` with ``reason``, unless the job already reached a final state (a
        repeated cancel changes nothing); kept 7 days, or until ``keep_until`` if later."""
        ...

    def key_holder(self, job_id: str, job_type: str) -> KeyHolder | None:
        """What holds the idempotency key of a job keyed by its id (a consistent read; ``None``: nothing,
        or no idempotency table): see :mod:`jobframework.stores.key_records`."""
        ...


def kept_until(now: float, keep_until: float) -> int:
    """The ``expires_at`` of a record written at ``now``: 7 days on, or ``keep_until`` if later."""
    return max(int(now) + STATUS_TTL_SECONDS, int(keep_until))


def merged_status(
    job_id: str, status: dict[str, Any] | None, flow: dict[str, Any], now: float
) -> JobStatus | None:
    """The status a job's two items say (plain values: attribute name to value), at ``now``."""
    if status is None:
        return None
    state = JobState(status["status"])
    live = state not in FINAL_STATES
    result = status.get("job_result")
    return with_claim(
        JobStatus(
            id=job_id,
            type=status.get("job_type"),
            status=state,
            attempts=int(status.get("attempts") or 0),
            key=status.get("job_key"),
            enqueued_at=status.get("enqueued_at"),
            started_at=status.get("started_at"),
            finished_at=status.get("finished_at"),
            updated_at=status.get("updated_at"),
            error=status.get("error"),
            reason=status.get("reason"),
            result=json.loads(result) if isinstance(result, str) else None,
            trace_id=status.get("trace_id"),
            run_at=status.get("run_at"),
            next_attempt_at=status.get("next_attempt_at") if state is JobState.RETRYING else None,
            expires_at=int(status["expires_at"]) if status.get("expires_at") is not None else None,
            redrives=int(status.get("redrives") or 0),
            lane=status.get("lane"),
            # (what a run said of itself: of no more use once the job ended)
            progress=float(status["progress"]) if status.get("progress") is not None and live else None,
            progress_note=status.get("progress_note") if live else None,
        ),
        flow,
        now,
    )


OPEN_STATES = frozenset({JobState.QUEUED, JobState.SCHEDULED, JobState.RETRYING})
"""States a start claim can make ``running`` (the status item is not rewritten when a run starts)."""


def with_claim(status: JobStatus, flow: dict[str, Any], now: float) -> JobStatus:
    """``status`` as its job's flow item (start claim, cancel marker; plain values) says it is at ``now``:
    ``running`` while a run's claim holds (within its deadline, and for a retrying job a later attempt's)."""
    update: dict[str, Any] = {}
    if flow.get("cancelled_at"):
        update["cancel_requested_at"] = flow["cancelled_at"]
    started = flow.get("started_at")
    if started:
        update["started_at"] = status.started_at or started
        started_attempt = int(flow.get("started_attempt") or 0)
        ended = status.attempts if status.status is JobState.RETRYING else 0
        runs_until = float(flow.get("runs_until") or 0)
        if started_attempt > ended and status.status in OPEN_STATES:
            if runs_until > now:
                update |= {
                    "status": JobState.RUNNING,
                    "attempts": started_attempt,
                    "started_at": started,
                    "updated_at": max(status.updated_at or "", started),  # the start: its latest change
                    "next_attempt_at": None,
                }
            elif runs_until > 0:  # (0: a redrive lapsed it on purpose; the status says redriven)
                update |= {"reason": _cut_off(started_attempt, started), "next_attempt_at": None}
                if status.status is not JobState.RETRYING:  # (its attempts: the last that ended)
                    update["attempts"] = started_attempt
    return status.model_copy(update=update) if update else status


def _cut_off(attempt: int, started: str) -> str:
    """The reason of a job whose run's claim lapsed with no outcome written (a trial read ``queued,
    attempts 0`` after killing a worker mid-run)."""
    return (
        f"attempt {attempt}, started at {started}, ended without an outcome by its deadline (its "
        "process stopped, or it runs past its timeout): it runs again when SQS delivers it again"
    )


def with_claims(records: JobRecords, statuses: list[JobStatus], now: float) -> list[JobStatus]:
    """A list's statuses (as a scan of status items found them) each with its start claim (one read of
    the open jobs' flow items, :meth:`JobRecords.claims`): a running job read ``queued`` in lists."""
    open_ids = [s.id for s in statuses if s.status in OPEN_STATES]
    flows = records.claims(open_ids) if open_ids else {}
    return [with_claim(s, flows[s.id], now) if s.id in flows else s for s in statuses]
