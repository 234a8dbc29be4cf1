"""One SQS record as the consumer handles it: the delivery, its outcome and the helpers around them.

A :class:`Delivery` is what the consumer learns about a record (source queue, attempt, envelope);
a :class:`RecordOutcome` is what became of it, told to the consumer's listeners. The records of one
invocation share a :class:`Batch` (metrics, retry budget, pending status records).
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, Literal

from jobframework import envelope as wire
from jobframework import errortext
from jobframework.attempts import attempt_of, receive_count
from jobframework.errors import RetryableError
from jobframework.jobs import JobContext

if TYPE_CHECKING:
    from jobframework.budget import BatchBudget
    from jobframework.classification import Reason
    from jobframework.envelope import Envelope
    from jobframework.jobs import Job
    from jobframework.state import StateStore
    from jobframework.telemetry import BatchMetrics
    from jobframework.tracing import TraceContext

log = logging.getLogger(__name__)


class Unavailable(RetryableError):
    """Something a record needs before its job can run (key ring, payload store) cannot be read now.

    A :class:`~jobframework.errors.RetryableError`: classified like a job's transient failure (retried
    within the job's policy and the retry budget, then ``exhausted``)."""


class RecordRetry(Exception):
    """Kept for older imports: the consumer now reports records through verdicts
    (:mod:`jobframework.verdict`), not by raising this."""


OutcomeName = Literal["succeeded", "retried", "released", "dead_lettered", "skipped", "failed"]
"""What became of a record (:attr:`RecordOutcome.outcome`): a type checker flags a comparison with
any other text (``outcome == "dead-lettered"`` is always false)."""


class Outcome:
    SUCCEEDED: Final = "succeeded"
    RETRIED: Final = "retried"
    RELEASED: Final = "released"
    DEAD_LETTERED: Final = "dead_lettered"
    SKIPPED: Final = "skipped"
    """A scheduled run dropped because its queue was backlogged (``when_backlogged="skip"``)."""
    FAILED: Final = "failed"
    """A saga step that failed for good, taken by its saga (which compensates): acknowledged, with no
    dead letter (the saga's record keeps the failure; a letter would page, and must not be redriven)."""


@dataclass(slots=True)
class RecordOutcome:
    """What happened to one record; given to the consumer's listeners (the local runtime's stats).

    Read it, do not change it: the metrics and every listener are given the same one. (Not a frozen
    dataclass: one is made for every record, and a frozen one took four times as long to make.)"""

    message_id: str
    outcome: OutcomeName
    job_type: str | None
    job_id: str | None
    priority: str | None
    attempt: int
    reason: str | None = None
    error: str | None = None
    delay: float | None = None
    queue_wait_ms: float | None = None
    processing_ms: float | None = None
    duplicate: bool = False
    """A delivery of a job that had already completed: skipped (counted as succeeded)."""
    enqueued_at: datetime | None = None
    """The envelope's first enqueue time (UTC): the start of the job's end-to-end latency."""
    lane: str | None = None
    """The lane of the queue the record came from (``default-fifo``: its DLQ is that lane's)."""
    started_at: float | None = None
    """When the job started (epoch seconds), if it ran."""
    result: Any = None
    """What a job that succeeded returned, as JSON data, as ``client.status(id).result`` gives it
    (its JSON of at most 1,000 characters, else that JSON's first 980 and ``...`` as text)."""
    unrun: bool = False
    """Handed back without running (it waits for another delivery of its key, a deferred schedule, a
    limit): no attempt was spent."""

    @property
    def ended_at(self) -> float | None:
        """When its job ended (epoch seconds), if it ran."""
        if self.started_at is None or self.processing_ms is None:
            return None
        return self.started_at + self.processing_ms / 1000


Listener = Callable[[RecordOutcome], None]


@dataclass(slots=True)
class Batch:
    """What the records of one invocation share: the metrics, the retry budget, the status records."""

    metrics: BatchMetrics
    budget: BatchBudget | None
    statuses: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Job status records, written together when the batch ends (one ``BatchWriteItem`` per 25)."""
    otel: Any = None
    """The OpenTelemetry API when spans are recorded (looked up once a batch), else ``None``."""
    log_keys: Any = None
    """The context variable of the job logger's keys (:func:`~jobframework.telemetry.log_keys_context`),
    looked up once a batch: a record's keys are set on it with a token, reset when the record ends."""
    sources: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)
    """The priority and lane of each source queue, looked up once a batch."""
    together: list[dict[str, Any]] = field(default_factory=list)
    """The records that run concurrently (none when they run one at a time or in FIFO groups)."""
    demands: dict[str, int] = field(default_factory=dict)
    hard_end: float = math.inf
    """When the invocation ends (``time.monotonic()``; ``inf`` without a Lambda context's deadline)."""
    started: float = field(default_factory=time.monotonic)
    """When the invocation's batch started (``time.monotonic()``)."""
    turns: dict[str, threading.Lock] = field(default_factory=dict)
    """A lock per idempotency key of the batch's running records (:meth:`key_turn`)."""

    @contextmanager
    def key_turn(self, key: str, run_seconds: float) -> Iterator[None]:
        """Two records of one key in this batch run in turn: the second finds the first's completion (a
        duplicate, acknowledged at once), not its in-progress record (handed back until that lapses, a
        minute). It waits at most ``run_seconds`` (the job's run and margin), and only while the
        invocation has that long left after the wait; past that it goes on and is handed back as before."""
        lock = self.turns.get(key) or self.turns.setdefault(key, threading.Lock())
        wait = min(run_seconds, self.hard_end - time.monotonic() - run_seconds)
        held = lock.acquire(timeout=max(0.0, wait))
        try:
            yield
        finally:
            if held:
                lock.release()

    def demand(self, job_type: str) -> int:
        """How many of the records that run together are of ``job_type`` and need a rate token (at
        least 1), counted once a batch from the bodies (a hint: the limits take that many tokens in
        one update; a record that carries its reserved turn takes none)."""
        n = self.demands.get(job_type)
        if n is None:
            needle = f'"type":{json.dumps(job_type)}'
            n = sum(
                1
                for r in self.together
                if needle in str(r.get("body", ""))
                and wire.ATTR_RATE_SLOT not in (r.get("messageAttributes") or {})
            )
            self.demands[job_type] = n = max(1, n)
        return n


@dataclass(slots=True)
class Delivery:
    """One record as the consumer learns about it: where it came from and what it carries."""

    record: dict[str, Any]
    message_id: str
    source: str
    attempt: int
    """The execution this delivery is (see :mod:`jobframework.attempts`), never the receive count."""
    priority: str | None = None
    lane: str | None = None
    """The source queue's lane (``default``, ``default-fifo``, ``high-cpu``): what ``jf dlq`` takes."""
    envelope: Envelope | None = None
    events: list[str] = field(default_factory=list)
    """Per-job-type schedule metrics this record adds to its batch's (``Heartbeat``, ``Overrun``, ...)."""
    budget: str | None = None
    """The key of the retry budget it counts in, once its job is known (``None``: none)."""
    started_at: float | None = None
    """When its job started (epoch seconds), once it did: its outcome's and status's start."""

    @classmethod
    def of(cls, record: dict[str, Any]) -> Delivery:
        return cls(
            record=record,
            message_id=str(record.get("messageId", "")),
            source=arn_queue_name(str(record.get("eventSourceARN", ""))),
            attempt=attempt_of(record),
        )

    def require_envelope(self) -> Envelope:
        assert self.envelope is not None
        return self.envelope

    def outcome(self, outcome: OutcomeName, **details: Any) -> RecordOutcome:
        env = self.envelope
        ms = details.get("processing_ms")
        if ms is not None:  # it ran: from its start (else it ended now, when the outcome is made)
            started = self.started_at
            details["started_at"] = started if started is not None else time.time() - ms / 1000
        return RecordOutcome(
            message_id=self.message_id,
            outcome=outcome,
            job_type=env.type if env else None,
            job_id=env.id if env else None,
            priority=self.priority,
            attempt=self.attempt,
            lane=self.lane,
            enqueued_at=env.enqueued_at if env else None,
            **details,
        )


def log_keys_of(d: Delivery, trace_id: str | None) -> dict[str, Any]:
    """The keys the consumer's lines about a record carry (``job_id``, ``job_type``, ``job_key``,
    ``attempt``, ``trace_id``: put on the logger with :func:`~jobframework.telemetry.put_log_keys`
    for as long as the record is handled; the console formatter reads them)."""
    env = d.envelope
    return {
        "job_id": env.id if env else None,
        "job_type": env.type if env else None,
        "job_key": env.key if env else None,
        "attempt": d.attempt,
        "trace_id": trace_id,
    }


@contextmanager
def refusal_logged(d: Delivery, reason: Reason, error: str, logger_: logging.Logger) -> Iterator[None]:
    """Log (through ``logger_``, the consumer's) a dead letter of a record refused before its job ran,
    at WARNING, with the keys and the wording of every other dead letter's line."""
    from jobframework.telemetry import job_logger, put_log_keys, reset_log_keys
    from jobframework.tracing import extract

    env = d.envelope
    job_logger()  # (routes the consumer's records through the job logger's handler, with its keys)
    token = put_log_keys(log_keys_of(d, extract(d.record, env.traceparent if env else None).trace_id))
    try:
        logger_.warning(
            "job %s (%s) dead-lettered (%s) after attempt %d: %s",
            env.id if env else f"message {d.message_id}",
            env.type if env else "-",
            reason.value,
            d.attempt,
            safe_text(error),
        )
        yield
    finally:
        reset_log_keys(token)


def identified_records(records: list[Any]) -> list[dict[str, Any]]:
    """The records of an event that Lambda can be told about (objects with a ``messageId``).

    Any other entry cannot be acknowledged, retried or reported (a partial batch response names records
    by ``messageId``): it is logged at ERROR with what it holds, and the rest of the batch goes on. A
    message in the batch twice is kept once, its later receipt in the earlier one's place.
    """
    kept: dict[str, dict[str, Any]] = {}
    for n, record in enumerate(records):
        if isinstance(record, dict) and isinstance(record.get("messageId"), str) and record["messageId"]:
            kept[record["messageId"]] = _later(kept.get(record["messageId"]), record)
            continue
        log.error(
            "record %d of the batch is not an SQS record with a messageId, so it cannot be settled: %s",
            n,
            safe_text(errortext.safe_str(repr_of(record)), limit=500),
        )
    return list(kept.values())


def _later(seen: dict[str, Any] | None, record: dict[str, Any]) -> dict[str, Any]:
    """Of two receipts of one message in a batch, the later (the higher receive count; SQS honours the
    latest receipt handle). A message received again while the batch filled (its visibility lapsed
    in the batching window) is one record to Lambda, whose partial batch response names records by
    ``messageId``: run both and each would settle, retry or dead-letter the other's job."""
    if seen is None:
        return record
    later = record if (receive_count(record) or 0) >= (receive_count(seen) or 0) else seen
    log.warning(
        "message %s is in the batch twice (receive counts %s and %s): the later receipt runs, once",
        record["messageId"],
        receive_count(seen),
        receive_count(record),
    )
    return later


def repr_of(value: object) -> str:
    """``repr(value)``, never raising."""
    try:
        return repr(value)
    except Exception:
        return f"<{type(value).__name__}>"


def arn_queue_name(arn: str) -> str:
    """``arn:aws:sqs:us-east-1:123456789012:jf-dev-high`` -> ``jf-dev-high``."""
    return arn.rsplit(":", 1)[-1]


def safe_text(text: str, limit: int = wire.MAX_ERROR_CHARS) -> str:
    """Text SQS accepts as an attribute value: valid XML characters, bounded length."""
    cleaned = "".join(
        ch
        if ch in "\t\n\r" or "\x20" <= ch <= "\ud7ff" or "\ue000" <= ch <= "\ufffd" or ch >= "\U00010000"
        else "?"
        for ch in text[:limit]
    )
    return cleaned or "-"


def describe(exc: BaseException) -> str:
    """The exception as attribute-safe text (never raises: see :mod:`jobframework.errortext`)."""
    return safe_text(errortext.describe(exc))


def queue_wait_ms_of(record: dict[str, Any], env: Envelope) -> float:
    """Milliseconds from the send onto this queue (``SentTimestamp``; a redrive is a new send) to now."""
    now_ms = time.time() * 1000
    attributes = record.get("attributes")
    sent = attributes.get("SentTimestamp") if isinstance(attributes, dict) else None
    try:
        sent_ms = float(sent) if sent is not None else env.enqueued_at.timestamp() * 1000
    except (TypeError, ValueError):
        sent_ms = env.enqueued_at.timestamp() * 1000
    return max(0.0, now_ms - sent_ms)


def remaining_seconds_of(context: Any) -> float:
    getter = getattr(context, "get_remaining_time_in_millis", None)
    if getter is None:
        return float("inf")
    try:
        return float(getter()) / 1000.0
    except Exception:
        return float("inf")


def job_context_of(
    d: Delivery,
    job: Job[Any],
    *,
    own: TraceContext,
    parent: TraceContext,
    context: Any,
    logger: Any,
    state: StateStore | None = None,
) -> JobContext:
    """The job's context; with ``state``, a tracked job's ``set_progress`` writes to its status."""
    env = d.require_envelope()
    progress = None
    if state is not None and env.track:
        from jobframework.progress import ProgressWriter

        progress = ProgressWriter(state.jobs, env.id)
    return JobContext(
        job_id=env.id,
        job_type=env.type,
        key=env.key,
        attempt=d.attempt,
        max_attempts=job.retry.max_attempts,
        priority=job.priority,
        enqueued_at=env.enqueued_at,
        trace_id=own.trace_id,
        traceparent=own.traceparent,
        xray_trace_header=parent.xray_header,
        saga=env.saga.model_dump() if env.saga else None,
        logger=logger,
        timeout=job.timeout,
        _remaining=lambda: remaining_seconds_of(context),
        _progress_sink=progress,
    )
