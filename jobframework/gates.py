"""Gates: checks between a record's admission and its job's run, each of which may end the record.

The pipeline (:mod:`jobframework.pipeline`) runs, per record: parse, verify, load the payload, then
the **gates** in order, then execute and classify. A gate is a callable::

    def gate(admitted: Admitted, consumer: Consumer) -> Verdict | None

* ``admitted`` holds the record's :class:`~jobframework.delivery.Delivery` (its envelope, source queue,
  attempt), the :class:`~jobframework.jobs.Job`, the validated payload and the Lambda context;
* ``consumer`` is the :class:`~jobframework.consumer.Consumer` (its ``sqs`` client, ``queue_url()``,
  ``state`` store, ``config``);
* it returns ``None`` to let the record go on to the next gate (and then the job), or a
  :class:`~jobframework.verdict.Verdict` that ends the record there. Build one with :func:`release`
  (hand it back unrun, not an attempt), :func:`refuse` (dead-letter it with a reason) or
  :func:`skip` (acknowledge it unrun). A gate never calls SQS about the record itself: the settler
  applies its verdict with the batch's others.

A gate runs on the thread of its record (records of a batch run concurrently), so whatever it
shares across records must be thread-safe; an exception it raises is that record's alone (it comes
back when its visibility runs out). Gates are the consumer's ``gates`` list
(:data:`DEFAULT_GATES` unless ``consumer(gates=...)`` says otherwise); add one with
``consumer(gates=[*DEFAULT_GATES, my_gate])``.

The built-in gates: :func:`~jobframework.throttle.throttle_gate` (a throttled record back before its
``Retry-After`` ended is handed back again), :func:`backlog_gate` (a scheduled run whose queue is
backlogged is skipped or deferred, per ``when_backlogged``), :func:`time_left_gate` (a record whose
job could not finish in the invocation's remaining time is released unstarted) and :func:`flow_gate`
(expiry, debounce, concurrency and rate limits, cancel: :mod:`jobframework.flow`).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from jobframework.attempts import (
    ATTR_LIMIT_WAITS,
    ATTR_SHORT_RELEASES,
    deferrals,
    limit_waits,
    receive_count,
    short_releases,
)
from jobframework.delivery import Outcome, OutcomeName, queue_wait_ms_of, refusal_logged, remaining_seconds_of
from jobframework.envelope import ATTR_RATE_SLOT, record_attribute
from jobframework.flow.options import check_limit_keys, nothing_to_check
from jobframework.jobs import WhenBacklogged
from jobframework.scheduling import SCHEDULE_KEY_PREFIX
from jobframework.state import JobState
from jobframework.throttle import throttle_gate
from jobframework.verdict import Kind, Verdict

if TYPE_CHECKING:
    from jobframework.classification import Reason
    from jobframework.consumer import Consumer
    from jobframework.delivery import Batch, Delivery
    from jobframework.flow.outcome import Drop, RateInputs
    from jobframework.jobs import Job
    from jobframework.tracing import TraceContext

log = logging.getLogger("jobframework.consumer")

RELEASE_MARGIN_SECONDS = 1.0
"""A job starts only if the invocation has its ``timeout`` plus this left."""
DEFER_SECONDS = 60
"""How long a deferred scheduled run waits before the backlog is checked again."""


@dataclass(slots=True)
class Admitted:
    """A record that passed parse, verify and load: what a gate looks at. Read it, do not change it
    (not a frozen dataclass: one is made for every record, and a frozen one took twice as long)."""

    delivery: Delivery
    job: Job[Any]
    payload: Any
    context: Any
    """The Lambda context (``get_remaining_time_in_millis``), or ``None``."""
    batch: Batch | None = None
    """What the records of the invocation share (``demand(job_type)``: how many of them run together)."""
    trace: TraceContext | None = None
    """The producer's trace context, as the record carries it (the job's span continues it)."""
    log_token: Any = None
    """Restores the job logger's keys as they were before the record's (``ContextVar.reset``)."""


Gate = Callable[[Admitted, "Consumer"], Verdict | None]


def release(
    d: Delivery,
    delay: int,
    *,
    deferred: int = 0,
    why: str = "",
    outcome: OutcomeName = Outcome.RELEASED,
    state: JobState | None = None,
) -> Verdict:
    """Hand the record back unrun in ``delay`` seconds, as a fresh copy that is not an attempt.

    ``outcome`` is what the listeners hear (``released``, or ``retried`` for a wait on another
    delivery or a deferral). The job's status becomes ``state`` if given, else stays as it is: a
    record that did not run changes nothing a status says (a batch's status writes replace the
    item, so a ``queued`` written here would hide a ``cancelled``, or a retry's error, until a
    later copy settled).
    """
    details: dict[str, Any] = {"delay": delay, "unrun": True} if outcome != Outcome.RELEASED else {}
    if why:
        details["reason" if outcome == Outcome.RETRIED and why == "backlogged" else "error"] = why
    return Verdict(
        d,
        Kind.RELEASE,
        delay=delay,
        copy=True,
        executions=d.attempt - 1,
        deferred=deferred,
        status=(state, {"attempts": d.attempt - 1}) if state is not None else None,
        outcome=d.outcome(outcome, **details),
    )


def refuse(d: Delivery, reason: Reason, error: str) -> Verdict:
    """Dead-letter the record before its job runs (logged as every dead letter is, same keys)."""
    with refusal_logged(d, reason, error, log):
        pass
    return dead_letter(d, reason, error)


def dead_letter(d: Delivery, reason: Reason, error: str, processing_ms: float | None = None) -> Verdict:
    """The verdict that sends the record to its DLQ (the saga, if any, is told first)."""
    from jobframework.delivery import safe_text

    error = safe_text(error)
    env = d.envelope
    return Verdict(
        d,
        Kind.DEAD_LETTER,
        reason=reason,
        error=error,
        status=(JobState.DEAD, {"attempts": d.attempt, "error": error, "reason": reason.value})
        if env is not None
        else None,
        outcome=d.outcome(Outcome.DEAD_LETTERED, reason=reason, error=error, processing_ms=processing_ms),
        saga=("failed", {"reason": reason.value, "error": error})
        if env is not None and env.saga is not None
        else None,
    )


def skip(d: Delivery, result: str, *, reason: str) -> Verdict:
    """Acknowledge the record unrun; its status says ``succeeded`` with ``result``."""
    return Verdict(
        d,
        Kind.SKIPPED,
        status=(JobState.SUCCEEDED, {"attempts": d.attempt, "result": result}),
        outcome=d.outcome(Outcome.SKIPPED, reason=reason),
    )


def dropped(d: Delivery, drop: Drop, *, attempts: int, processing_ms: float | None = None) -> Verdict:
    """Acknowledge the record with the final status ``drop`` says (``cancelled``, ``expired``) and its
    per-job-type count; ``attempts`` is how many runs the job had; ``processing_ms``, how long this one
    ran, when it did (its start goes into the status)."""
    from jobframework.status import now_iso

    fields = {"attempts": attempts, "reason": drop.status_reason or drop.reason, "finished_at": now_iso()}
    return Verdict(
        d,
        Kind.SKIPPED,
        status=(drop.state, fields),
        outcome=d.outcome(Outcome.SKIPPED, reason=drop.reason, processing_ms=processing_ms),
        events=[drop.metric],
    )


def stopped(d: Delivery, processing_ms: float, *, error: str | None = None) -> Verdict:
    """The job stopped itself after a cancel (it raised ``JobCancelled``) after ``processing_ms``, or
    failed (``error``) after one was asked: acknowledged, no further attempt and no dead letter; its
    status says ``cancelled``, with the run's start."""
    from jobframework.flow.outcome import Drop

    reason = "cancelled while running" + (f"; the attempt then failed: {error}" if error else "")
    drop = Drop(JobState.CANCELLED, reason, "Cancelled")
    return dropped(d, drop, attempts=d.attempt, processing_ms=processing_ms)


def cancelled_unrun(d: Delivery) -> Verdict:
    """The run found its job's cancel marker right after claiming its key
    (:mod:`jobframework.stores.key_records`): acknowledged unrun, status ``cancelled``, as the cancel
    gate's drop."""
    from jobframework.flow.cancel import cancelled_drop

    return dropped(d, cancelled_drop(d.attempt), attempts=d.attempt - 1)


def backlog_gate(admitted: Admitted, consumer: Consumer) -> Verdict | None:
    """For a scheduled run whose queue is backlogged: skip it or defer it (``when_backlogged``)."""
    d, job = admitted.delivery, admitted.job
    env = d.require_envelope()
    if job.schedule is None or not env.key.startswith(SCHEDULE_KEY_PREFIX):
        return None
    if job.when_backlogged is WhenBacklogged.RUN:
        d.events.append("Heartbeat")
        return None
    try:
        depth = int(
            consumer.sqs.get_queue_attributes(
                QueueUrl=consumer.queue_url(d.source), AttributeNames=["ApproximateNumberOfMessages"]
            )["Attributes"].get("ApproximateNumberOfMessages", 0)
        )
    except Exception:
        log.warning("reading the depth of %s failed; running the scheduled job", d.source, exc_info=True)
        d.events.append("Heartbeat")
        return None
    waited = queue_wait_ms_of(d.record, env) / 1000
    backlogged = depth > job.backlog_depth or (job.backlog_age is not None and waited > job.backlog_age)
    if not backlogged:
        d.events.append("Heartbeat")
        return None
    if job.when_backlogged is WhenBacklogged.SKIP:
        log.warning("scheduled run %s of %s skipped: %s has %d waiting", env.key, env.type, d.source, depth)
        d.events.append("ScheduleSkipped")
        return skip(d, '"skipped: queue backlogged"', reason="backlogged")
    deferred = deferrals(d.record) + (receive_count(d.record) or 1) - 1
    if deferred >= job.retry.max_attempts:
        log.warning("scheduled run %s of %s deferred %d times; running it now", env.key, env.type, deferred)
        d.events.append("Heartbeat")
        return None
    log.info(
        "scheduled run %s of %s deferred %ds: %s has %d waiting",
        env.key,
        env.type,
        DEFER_SECONDS,
        d.source,
        depth,
    )
    d.events.append("ScheduleDeferred")
    return release(d, DEFER_SECONDS, deferred=deferred + 1, why="backlogged", outcome=Outcome.RETRIED)


UNRUNNABLE_RELEASE_SECONDS = 60
"""The longest a record waits when its invocation was shorter than its job's timeout from the start."""


def time_left_gate(admitted: Admitted, consumer: Consumer) -> Verdict | None:
    """Release the record unstarted when the invocation has not the job's timeout (and a margin) left."""
    d, job, batch = admitted.delivery, admitted.job, admitted.batch
    # (the invocation's end, known once a batch: asking the context is a call a record)
    remaining = (
        batch.hard_end - time.monotonic() if batch is not None else remaining_seconds_of(admitted.context)
    )
    if remaining >= job.timeout + RELEASE_MARGIN_SECONDS:
        return None
    env = d.require_envelope()
    if batch is not None and batch.hard_end - batch.started < job.timeout + RELEASE_MARGIN_SECONDS:
        # Not even the whole invocation had the time: this queue's consumer may never run it (the job
        # came to another lane's queue than its own). Back at once a few times, then ever later, not
        # again and again at once (a trial's misrouted export was released 70 times a second).
        released = short_releases(d.record) + 1
        delay = 0 if released <= 3 else min(UNRUNNABLE_RELEASE_SECONDS, 2 ** (released - 3))
        log.error(
            "job %s (%s) released unstarted for %ds: its timeout (%gs) is longer than this consumer's "
            "invocation (%.0fs); if it came to %s rather than its own lane's queue (%s), send it there",
            env.id,
            env.type,
            delay,
            job.timeout,
            batch.hard_end - batch.started,
            d.source,
            job.lane,
        )
        verdict = release(d, delay)
        verdict.attributes = {ATTR_SHORT_RELEASES: str(released)}  # (its copy counts them)
        return verdict
    log.warning(
        "job %s (%s) released unstarted: %.1fs left in the invocation, the job may take %gs (its timeout "
        "and %gs more must fit in the time left: a longer function timeout, or a shorter job timeout)",
        env.id,
        env.type,
        remaining,
        job.timeout,
        RELEASE_MARGIN_SECONDS,
    )
    return release(d, 0)


def flow_gate(admitted: Admitted, consumer: Consumer) -> Verdict | None:
    """Flow control (:mod:`jobframework.flow.gates`: expiry, debounce, concurrency and rate limits,
    cancel): a dropped record is acknowledged unrun with its final status (``cancelled``, ``expired``)
    and a count; a record over a limit is handed back unrun, not an attempt."""
    d = admitted.delivery
    env = d.require_envelope()
    if nothing_to_check(env, admitted.job):
        return None
    flow = _flow()
    job = admitted.job
    if job.flow.concurrency_key is not None or job.flow.rate_key is not None:
        try:  # a payload no limit can hold is dead-lettered, not handed back for ever
            check_limit_keys(job, admitted.payload)
        except ValueError as exc:
            from jobframework.classification import Reason

            return refuse(d, Reason.INVALID_PAYLOAD, str(exc))
    from jobframework.flow.outcome import NO_RATE_INPUTS, RateInputs  # loaded with the gates above

    if job.flow.rate is not None:
        rate = rate_inputs(admitted)
    elif job.flow.concurrency is not None:  # (may wait in the process for a lease held here)
        rate = RateInputs(
            waits=limit_waits(d.record), may_wait=_time_to_spare(admitted), holder=lease_holder(d.record)
        )
    else:
        rate = NO_RATE_INPUTS
    from jobframework.flow.cancel import claimant_of  # (loaded with the flow gates)

    claimant = claimant_of(d.record) if env.track else ""  # (only a tracked job's start is claimed)
    decided = flow.flow_gates(consumer).check(
        env, job, admitted.payload, d.attempt, time.time(), rate=rate, claimant=claimant
    )
    if decided is None:
        return None
    from jobframework.flow.outcome import Drop  # a record the gates stopped: the rare path

    if isinstance(decided, Drop):
        return dropped(d, decided, attempts=d.attempt - 1)  # unrun: this delivery was no attempt
    handed = release(d, decided.delay)
    handed.back_at = decided.back_at
    carried: dict[str, str] = {}
    if decided.rate_slot is not None:
        carried[ATTR_RATE_SLOT] = f"{decided.rate_slot:.3f}:{d.attempt}"
    if decided.waits is not None:
        carried[ATTR_LIMIT_WAITS] = str(decided.waits)
    handed.attributes = carried or handed.attributes
    return dataclasses.replace(
        handed, outcome=d.outcome(Outcome.RELEASED, reason=decided.reason, delay=decided.delay)
    )


def rate_inputs(admitted: Admitted) -> RateInputs:
    """What the rate gate learns of a record: its batch's demand, the turn it carries, how long it may
    wait, and whether its hand-back can carry a turn: a copy, so not on a FIFO lane (in place), nor a
    record already handed back in place (received more than once: its last copy's send failed, and a
    turn reserved again each time would push its own turn off for good)."""
    from jobframework.flow.limits import rate_slot
    from jobframework.flow.outcome import RateInputs

    d, batch, job = admitted.delivery, admitted.batch, admitted.job
    env = d.require_envelope()
    fifo = str(d.record.get("eventSourceARN", "")).endswith(".fifo")
    return RateInputs(
        demand=batch.demand(env.type) if batch is not None else 1,
        reserved=rate_slot(record_attribute(d.record, ATTR_RATE_SLOT), d.attempt),
        waits=limit_waits(d.record) if job.flow.concurrency is not None else 0,
        may_wait=_time_to_spare(admitted),
        can_carry=not fifo and (receive_count(d.record) or 1) == 1,
        holder=lease_holder(d.record) if job.flow.concurrency is not None else "",
    )


def _time_to_spare(admitted: Admitted) -> float:
    """Seconds a record may wait in the gates: the invocation's time left past its job's timeout."""
    return remaining_seconds_of(admitted.context) - admitted.job.timeout - RELEASE_MARGIN_SECONDS


def lease_holder(record: dict[str, Any]) -> str:
    """Who holds a concurrency lease a record takes: its delivery (its receipt handle; a second
    delivery of the same job is another holder), freed by that delivery only.

    Example:
        >>> lease_holder({"receiptHandle": "AQEB-1", "messageId": "m-1"}), lease_holder({"messageId": "m-1"})
        ('AQEB-1', 'm-1')
    """
    return str(record.get("receiptHandle") or record.get("messageId") or "")


@functools.cache
def _flow() -> ModuleType:
    """:mod:`jobframework.flow.gates`, imported on the first record that reaches the flow gate (not
    at cold start), then at no cost per record."""
    import jobframework.flow.gates

    return jobframework.flow.gates


def saga_gate(admitted: Admitted, consumer: Consumer) -> Verdict | None:
    """A step of a saga that has moved past it (a dead letter redriven after its saga compensated) is
    acknowledged unrun, status ``cancelled`` (:func:`jobframework.saga.hooks.passed_step`)."""
    d = admitted.delivery
    env = d.require_envelope()
    if env.saga is None:
        return None
    from jobframework.flow.outcome import Drop
    from jobframework.saga.hooks import passed_step

    try:
        why = passed_step(consumer, env)
    except Exception:
        log.warning("reading the saga of job %s (%s) failed; running it", env.id, env.type, exc_info=True)
        return None
    if why is None:
        return None
    log.warning("job %s (%s) is not run: %s", env.id, env.type, why)
    return dropped(d, Drop(JobState.CANCELLED, "saga moved on", "SagaStepSkipped"), attempts=d.attempt - 1)


DEFAULT_GATES: tuple[Gate, ...] = (throttle_gate, backlog_gate, time_left_gate, flow_gate, saga_gate)
"""The consumer's gates unless it is given others, in the order they run."""
