"""The saga's state machine, pure: a transition changes a record and queues messages in its outbox."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from jobframework.saga.deadline import DEADLINE_JOB, DEADLINE_TOLERANCE_SECONDS
from jobframework.saga.record import (
    CompensationState,
    OutboxItem,
    SagaNotDue,
    SagaRecord,
    SagaStatus,
    StepState,
    iso_utc,
)
from jobframework.saga.steps import Step, Wait

if TYPE_CHECKING:
    from jobframework.saga.definition import Saga

log = logging.getLogger("jobframework.saga")  # the package's one logger, named as before the split


def _job_id(saga_id: str, index: int, kind: str = "") -> str:
    return f"{saga_id}-{kind}{index}"


def enter_step(defn: Saga, record: SagaRecord, index: int, now: datetime) -> None:
    """Move the saga into step ``index`` (or finish it past the last step)."""
    while index < len(defn.steps):
        spec, current = defn.steps[index], record.steps[index]
        if isinstance(spec, Wait):
            current.started_at = current.started_at or iso_utc(now)
            if spec.name in record.signals:
                current.state = StepState.SIGNALLED
                current.output = record.signals[spec.name]
                current.finished_at = iso_utc(now)
                index += 1
                continue
            deadline = now + timedelta(seconds=round(spec.timeout))
            current.state = StepState.WAITING
            current.deadline = iso_utc(deadline)
            record.outbox.append(
                OutboxItem(
                    job=DEADLINE_JOB,
                    payload={"saga_id": record.id, "wait": spec.name},
                    key=f"saga:{record.id}:deadline:{spec.name}",
                    job_id=_job_id(record.id, index, "d"),
                    step=f"deadline:{spec.name}",
                    not_before=current.deadline,
                )
            )
            return
        try:
            payload = spec.payload(record.data())
        except (ValidationError, ValueError, TypeError, KeyError) as exc:
            error = f"{type(exc).__name__}: {exc}"
            if isinstance(exc, ValidationError) and spec.input is None:  # (first: an error is cut at 1,000)
                # (a chain ported from Celery passes the return value on: here it is the saga's data's)
                error = (
                    f"the saga's data does not make {spec.name}'s payload (its start payload and the earlier "
                    "steps' dict outputs; a step that returns a plain value keeps it under its own name: "
                    f"return a dict of {spec.name}'s fields, or give the step input=): {error}"
                )
            _fail_step(defn, record, index, reason="invalid_payload", error=error, now=now)
            return
        current.state = StepState.QUEUED
        current.job_id = _job_id(record.id, index)
        current.queued_at = iso_utc(now)
        record.outbox.append(
            OutboxItem(
                job=spec.job.name,
                payload=payload,
                key=f"saga:{record.id}:{spec.name}",
                job_id=current.job_id,
                step=spec.name,
            )
        )
        return
    record.status = SagaStatus.SUCCEEDED
    record.finished_at = iso_utc(now)


def _fail_step(defn: Saga, record: SagaRecord, index: int, *, reason: str, error: str, now: datetime) -> None:
    current = record.steps[index]
    current.state = StepState.TIMED_OUT if reason == "deadline" else StepState.FAILED
    current.error = error[:1000]
    current.finished_at = iso_utc(now)
    record.status = SagaStatus.COMPENSATING
    failed = f"step {current.name} failed ({reason})"
    record.reason = f"{record.reason}, then {failed}" if record.cancel_requested_at else failed
    record.error = error[:1000]
    _compensate_next(defn, record, now)


def _compensate_next(defn: Saga, record: SagaRecord, now: datetime) -> None:
    """Queue the compensation of the latest completed step not yet undone, or end ``compensated``."""
    for index in range(len(defn.steps) - 1, -1, -1):
        spec, current = defn.steps[index], record.steps[index]
        if (
            not isinstance(spec, Step)
            or spec.compensate is None
            or current.state is not StepState.SUCCEEDED
            or current.compensation_state is CompensationState.COMPENSATED
        ):
            continue
        try:
            payload = spec.compensation_payload(record.data())
        except (ValidationError, ValueError, TypeError, KeyError) as exc:
            current.compensation_state = CompensationState.FAILED
            current.compensation_error = f"invalid_payload: {type(exc).__name__}: {exc}"[:1000]
            record.status = SagaStatus.FAILED
            record.reason = f"compensation {spec.compensate.name} of step {spec.name} could not be built"
            record.error = current.compensation_error
            record.finished_at = iso_utc(now)
            return
        current.compensation_state = CompensationState.QUEUED
        current.compensation_job_id = _job_id(record.id, index, "c")
        current.compensation_queued_at = iso_utc(now)
        record.outbox.append(
            OutboxItem(
                job=spec.compensate.name,
                payload=payload,
                key=f"saga:{record.id}:compensate:{spec.name}",
                job_id=current.compensation_job_id,
                step=f"compensate:{spec.name}",
            )
        )
        return
    record.status = SagaStatus.COMPENSATED
    record.finished_at = iso_utc(now)


def cancel(defn: Saga, record: SagaRecord, reason: str | None, now: datetime) -> bool:
    """Cancel a running saga (``False``: it has ended, compensates already, or was cancelled before).

    A saga at a wait rolls back now; a saga whose step is queued or running lets that step end (its
    job may already act), then rolls back, that step's compensation included if it succeeded. Steps
    not reached never run. The saga ends ``compensated`` with reason ``cancelled: <reason>``.
    """
    if record.status is not SagaStatus.RUNNING or record.cancel_requested_at is not None:
        return False
    record.cancel_requested_at = iso_utc(now)
    record.reason = f"cancelled: {reason}" if reason else "cancelled"
    running = next((s for s in record.steps if s.state in (StepState.QUEUED, StepState.WAITING)), None)
    if running is not None and running.state is StepState.QUEUED:
        return True  # advance() rolls back when the step's job ends
    if running is not None:
        running.state = StepState.CANCELLED
        running.finished_at = iso_utc(now)
    _roll_back_cancelled(defn, record, now)
    return True


def _roll_back_cancelled(defn: Saga, record: SagaRecord, now: datetime) -> None:
    record.status = SagaStatus.COMPENSATING
    record.error = None
    _compensate_next(defn, record, now)


@dataclass(frozen=True, slots=True)
class StepEvent:
    """What the consumer reports of one saga job."""

    kind: str
    """``step``, ``compensate`` or ``deadline``."""
    name: str
    event: str
    """``completed`` or ``failed``."""
    output: Any = None
    reason: str | None = None
    error: str | None = None
    attempts: int | None = None
    started_at: str | None = None


def parse_step(ref: str) -> tuple[str, str]:
    """``reserve`` -> ``("step", "reserve")``; ``compensate:reserve`` -> ``("compensate", "reserve")``."""
    kind, sep, name = ref.partition(":")
    if sep and kind in ("compensate", "deadline"):
        return kind, name
    return "step", ref


def awaits_step(record: SagaRecord, index: int) -> bool:
    """Whether the saga waits for its step ``index``'s job: it runs and the step is queued (a step's
    outcome counts only then, and the consumer runs a step's job only then)."""
    return record.status is SagaStatus.RUNNING and record.steps[index].state is StepState.QUEUED


def advance(defn: Saga, record: SagaRecord, event: StepEvent, now: datetime) -> bool:
    """Apply one event to the record; returns whether it changed (``False``: a duplicate or stale event).

    Raises:
        SagaError: a deadline check arrived before its deadline (retried later).
    """
    index = defn.index(event.name)
    current = record.steps[index]
    failure = f"{event.reason}: {event.error}" if event.reason else (event.error or "failed")
    if event.kind == "step":
        if not awaits_step(record, index):
            return False
        current.attempts = event.attempts or current.attempts
        current.started_at = event.started_at or current.started_at
        if event.event == "completed":
            current.state = StepState.SUCCEEDED
            current.output = event.output
            current.finished_at = iso_utc(now)
            if record.cancel_requested_at is not None:  # cancelled while it ran: undo it too
                _roll_back_cancelled(defn, record, now)
            else:
                enter_step(defn, record, index + 1, now)
        else:
            _fail_step(
                defn, record, index, reason=event.reason or "failed", error=event.error or "failed", now=now
            )
        return True
    if event.kind == "compensate":
        if record.status not in (SagaStatus.COMPENSATING, SagaStatus.FAILED):
            return False
        if current.compensation_state is CompensationState.COMPENSATED or current.compensation_state is None:
            return False
        current.compensation_attempts = event.attempts or current.compensation_attempts
        if event.event == "completed":
            if current.compensation_state is CompensationState.FAILED:
                log.info(
                    "saga %s: compensation of %s completed after a redrive; resuming", record.id, current.name
                )
            current.compensation_state = CompensationState.COMPENSATED
            current.compensation_error = None
            current.compensation_finished_at = iso_utc(now)
            record.status = SagaStatus.COMPENSATING
            record.finished_at = None
            _compensate_next(defn, record, now)
            return True
        if current.compensation_state is not CompensationState.QUEUED:
            return False
        current.compensation_state = CompensationState.FAILED
        current.compensation_error = failure[:1000]
        current.compensation_finished_at = iso_utc(now)
        record.status = SagaStatus.FAILED
        record.reason = (
            f"compensation {current.compensation} of step {current.name} was dead-lettered ({event.reason})"
        )
        record.error = failure[:1000]
        record.finished_at = iso_utc(now)
        return True
    # a deadline check
    if event.event != "completed" or record.status is not SagaStatus.RUNNING:
        return False
    if current.state is not StepState.WAITING or current.deadline is None:
        return False
    deadline = datetime.fromisoformat(current.deadline)
    early = (deadline - now).total_seconds()
    if early > DEADLINE_TOLERANCE_SECONDS:
        raise SagaNotDue(f"deadline check of {current.name} arrived {early:.1f}s early", early)
    spec = defn.steps[index]
    timeout = spec.timeout if isinstance(spec, Wait) else 0
    _fail_step(
        defn,
        record,
        index,
        reason="deadline",
        error=f"no {current.name!r} signal within {timeout:g}s",
        now=now,
    )
    return True
