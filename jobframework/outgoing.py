"""What the client sends: an enqueue request, the message it is prepared into, what became of it,
and the limits that apply (SQS's delay and size, the dedup window).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypedDict

from pydantic import BaseModel

from jobframework import envelope as wire
from jobframework.core import SQS_BATCH_ENTRIES, SQS_MAX_DELAY_SECONDS
from jobframework.dead_letter import REASON_ATTRIBUTES_BYTES
from jobframework.envelope import Envelope, SagaRef
from jobframework.errors import EnqueueOptionError
from jobframework.idempotency import DEFAULT_EXPIRY_SECONDS
from jobframework.jobs import Job, Priority

MAX_DELAY_SECONDS = SQS_MAX_DELAY_SECONDS
"""SQS DelaySeconds limit (15 minutes); longer delays go through EventBridge Scheduler."""
MAX_SCHEDULED_DELAY_SECONDS = 365 * 24 * 3600
"""The longest delay a job can be given (one year)."""
BATCH_ENTRIES = SQS_BATCH_ENTRIES
DEFAULT_DEDUP_WINDOW = float(DEFAULT_EXPIRY_SECONDS)
"""Seconds an enqueue given an explicit ``key=`` dedups for by default: as long as the consumer's
idempotency record of a completed job lasts (24 hours)."""
MAX_DEDUP_WINDOW = 7 * 24 * 3600
MAX_ENQUEUE_BYTES = wire.SQS_MAX_MESSAGE_BYTES - REASON_ATTRIBUTES_BYTES
"""The largest message the client sends (body and attributes, signature included): SQS's 1 MiB less
the room its dead letter needs for the reason attributes, so that a dead letter keeps everything it
must (signature, trace, type) and is never cut to fit."""


def delay_seconds(delay: float | timedelta | datetime | None) -> int:
    """A delay as whole seconds (up to 900 via SQS ``DelaySeconds``, up to a year via Scheduler); a
    ``datetime`` (with its time zone) is when to run: the seconds until then, none once it is past
    (Celery's ``eta``).

    Raises:
        EnqueueOptionError: negative, not a number, a datetime without a time zone, or over a year.

    Example:
        >>> delay_seconds(90), delay_seconds(timedelta(minutes=2))
        (90, 120)
        >>> 3599 <= delay_seconds(datetime.now(UTC) + timedelta(hours=1)) <= 3600
        True
    """
    if delay is None:
        return 0
    if isinstance(delay, datetime):
        if delay.tzinfo is None or delay.utcoffset() is None:
            raise EnqueueOptionError(
                f"delay as a time to run at needs its time zone (datetime(..., tzinfo=UTC)), got {delay!r}"
            )
        # (in UTC: two times of one tzinfo subtract as wall times, an hour off across a DST change)
        return delay_seconds(max(0.0, (delay.astimezone(UTC) - datetime.now(UTC)).total_seconds()))
    seconds = delay.total_seconds() if isinstance(delay, timedelta) else delay
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or math.isnan(seconds):
        raise EnqueueOptionError(
            f"delay must be seconds (a number), a timedelta or a datetime to run at, got {delay!r}"
        )
    if seconds < 0:
        raise EnqueueOptionError(f"delay must be >= 0 seconds, got {seconds:g}")
    if seconds > MAX_SCHEDULED_DELAY_SECONDS:
        raise EnqueueOptionError(
            f"delay {seconds:,.0f}s is over the one-year limit ({MAX_SCHEDULED_DELAY_SECONDS:,}s); "
            "use a recurring schedule or enqueue it later"
        )
    return round(seconds)


def payloads_only(job_name: str, payloads: Sequence[object]) -> None:
    """Check that none of ``job.enqueue_many``'s payloads is already a request.

    Raises:
        EnqueueOptionError: an entry is an :class:`EnqueueRequest` (``job.request(...)``), which
            ``client.enqueue_many`` takes.
    """
    for n, p in enumerate(payloads):
        if isinstance(p, EnqueueRequest):
            raise EnqueueOptionError(
                f"enqueue_many of job {job_name} takes payloads, and entry {n} is an EnqueueRequest "
                "(job.request(...)): send requests with client.enqueue_many([...]), or pass the "
                "payloads here (with the same options for each: delay=, priority=, ...)"
            )


def dedup_window_seconds(value: float | timedelta) -> float:
    """A ``dedup_window=`` as seconds (0 to 7 days).

    Raises:
        EnqueueOptionError: not a number, negative, or longer than 7 days.
    """
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or math.isnan(seconds):
        raise EnqueueOptionError(f"dedup_window must be seconds (a number) or a timedelta, got {value!r}")
    if not 0 <= seconds <= MAX_DEDUP_WINDOW:
        raise EnqueueOptionError(
            f"dedup_window must be 0 (off) to 7 days ({MAX_DEDUP_WINDOW:,} s), got {seconds:g}"
        )
    return float(seconds)


@dataclass(frozen=True, slots=True)
class EnqueueResult:
    """What became of one enqueue. ``error`` is set (and ``ok`` false) when SQS refused it."""

    id: str
    key: str
    job_type: str
    priority: Priority
    message_id: str | None = None
    duplicate: bool = False
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    if not TYPE_CHECKING:  # (a type checker keeps flagging a name it lacks)

        def __getattr__(self, name: str) -> Any:
            """Celery's ``AsyncResult`` calls, said where they are here (only for names it lacks)."""
            if name in _ASYNC_RESULT:
                said = f"EnqueueResult has no {name}: {_ASYNC_RESULT[name]} (a tracked job's; it has the .id)"
                raise AttributeError(said, name=name, obj=self)
            raise AttributeError(
                f"{type(self).__name__!r} object has no attribute {name!r}", name=name, obj=self
            )


_ASYNC_RESULT = {
    "get": "client.wait(result.id, timeout=30).result waits for the job's end and gives what it returned",
    "wait": "client.wait(result.id, timeout=30) waits for the job's end",
    "result": "client.status(result.id).result is what the job returned, once it ended",
    "state": "client.status(result.id).status is its state",
    "status": "client.status(result.id).status is its state",
    "ready": "client.status(result.id).status in FINAL_STATES (jobframework.status) says whether it ended",
    "revoke": "client.cancel(result.id) cancels it",
}
"""What a Celery user asks of what an enqueue returns, and where it is here."""


class EnqueueOptions(TypedDict, total=False):
    """An enqueue's options (:meth:`JobClient.enqueue`'s keywords) as a job's ``enqueue`` and
    ``enqueue_many`` take them: typed, so that a type checker flags ``countdown=`` or ``delay="10"``."""

    key: str | None
    delay: float | timedelta | datetime | None
    priority: Priority | str | None
    dedup_window: float | timedelta | None
    expires_in: float | timedelta | None
    debounce: float | timedelta | None
    tenant: str | None
    track: bool | None
    group: str | None
    payload_version: int | None


class RequestOptions(EnqueueOptions, total=False):
    """A request's options (:class:`EnqueueRequest`'s fields): an enqueue's, and the job's own id."""

    job_id: str | None


ENQUEUE_OPTIONS: tuple[str, ...] = tuple(EnqueueOptions.__annotations__)
"""The names of an enqueue's options."""
REQUEST_OPTIONS: tuple[str, ...] = tuple(RequestOptions.__annotations__)
"""The names of a request's options (an enqueue's and ``job_id``)."""


@dataclass(slots=True)
class EnqueueRequest:
    """One job to send with :meth:`JobClient.enqueue_many`."""

    job: Job[Any] | str
    payload: BaseModel | dict[str, Any]
    key: str | None = None
    delay: float | timedelta | datetime | None = None
    priority: Priority | str | None = None
    saga: SagaRef | None = None
    job_id: str | None = None
    dedup_window: float | timedelta | None = None
    expires_in: float | timedelta | None = None
    debounce: float | timedelta | None = None
    tenant: str | None = None
    track: bool | None = None
    group: str | None = None
    payload_version: int | None = None


@dataclass(slots=True)
class Prepared:
    """An enqueue made ready to send: its envelope, where it goes and what the send carries."""

    envelope: Envelope
    priority: Priority
    queue_url: str
    body: str
    attributes: dict[str, Any]
    delay: int
    xray: str | None
    trace_id: str | None = None
    dedup_window: float | None = None
    group: str | None = None
    """``MessageGroupId``: the tenant on a standard queue (SQS fair queues), the ordered group on a
    FIFO lane."""
    dedup_id: str | None = None
    """``MessageDeduplicationId`` on a FIFO lane (:func:`jobframework.flow.ordered.deduplication_id`)."""

    @property
    def scheduled(self) -> bool:
        """Delayed beyond SQS's 15 minutes: sent by an EventBridge Scheduler one-time schedule."""
        return self.delay > MAX_DELAY_SECONDS

    @property
    def batchable(self) -> bool:
        """Sent by ``SendMessageBatch`` in ``enqueue_many`` (a dedup key is claimed first)."""
        return not self.scheduled and self.envelope.debounce is None

    @property
    def deduplicated(self) -> bool:
        return self.dedup_window is not None

    def result(
        self, message_id: str | None = None, error: str | None = None, duplicate_of: str | None = None
    ) -> EnqueueResult:
        env = self.envelope
        if duplicate_of is not None:
            return EnqueueResult(duplicate_of, env.key, env.type, self.priority, None, duplicate=True)
        return EnqueueResult(env.id, env.key, env.type, self.priority, message_id, error=error)


def unsent_said(results: list[EnqueueResult], *, raise_on_error: bool) -> list[EnqueueResult]:
    """``results`` of an ``enqueue_many``, its entries not sent logged as a WARNING (a backfill that
    went on read them as sent), or raised as :class:`~jobframework.errors.EnqueueManyError`."""
    unsent = [(i, r) for i, r in enumerate(results) if not r.ok]
    if not unsent:
        return results
    first_index, first = unsent[0]
    said = (
        f"enqueue_many: {len(unsent)} of {len(results)} entries were not sent (their results' .ok is "
        f"False and .error says why; entry {first_index}, job {first.id}: {first.error})"
    )
    if raise_on_error:
        from jobframework.errors import EnqueueManyError

        raise EnqueueManyError(said, results)
    logging.getLogger("jobframework.client").warning("%s", said)
    return results
