"""The consumer's saga hook: advance a saga when one of its jobs completes or fails for good."""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from jobframework.errors import ConfigurationError
from jobframework.saga.definition import find_saga
from jobframework.saga.engine import SagaEngine
from jobframework.saga.record import SagaNotFoundError, UnknownSagaError, load_saga
from jobframework.saga.transitions import StepEvent, advance, awaits_step, parse_step

if TYPE_CHECKING:
    from jobframework.envelope import Envelope

log = logging.getLogger("jobframework.saga")  # the package's one logger, named as before the split


def is_forward_step(envelope: Envelope) -> bool:
    """``envelope`` is a saga's step (not a compensation or a deadline check)."""
    return envelope.saga is not None and parse_step(envelope.saga.step)[0] == "step"


def on_step_event(consumer: Any, envelope: Envelope, event: str, **details: Any) -> None:
    """Advance the saga of ``envelope`` after its job ``event`` (``completed`` or ``failed``).

    Called by the consumer after a saga job succeeded (``result``: the JSON summary of its return
    value) or before it is dead-lettered for good (``reason``, ``error``), with the job's ``attempt``
    and ``started_at`` (ISO 8601) when it ran. Idempotent: a repeated
    event changes nothing (conditional writes on the record's version) but re-sends an unsent outbox.

    Raises:
        SagaError: the saga could not be advanced now (the consumer retries the record).
        UnknownSagaError: the saga is not defined on the consumer's registry.
        SagaNotFoundError: the saga's record is gone.
        ConfigurationError: no state table.
    """
    ref = envelope.saga
    if ref is None:
        return
    store = consumer.state
    if store is None:
        raise ConfigurationError("saga jobs need the state table: set JF_STATE_TABLE on the consumer")
    record = load_saga(store, ref.id)
    if record is None:
        raise SagaNotFoundError(f"no saga {ref.id} for job {envelope.id} ({envelope.type})")
    defn = find_saga(consumer.registry, record.name)
    if defn is None:
        raise UnknownSagaError(
            f"saga {record.name} is not defined on this consumer's registry: import the module that "
            "declares it (the construct's job_modules, JF_JOBS or --jobs), deploy, then redrive"
        )
    kind, name = parse_step(ref.step)
    result = details.get("result")
    output = None
    if isinstance(result, str):
        try:
            output = json.loads(result)
        except ValueError:
            output = result
    attempts, started_at = details.get("attempt"), details.get("started_at")
    if attempts is None:  # (a caller that does not say: the job's status record, if it keeps one)
        try:
            status = store.get_status(envelope.id)
            if status is not None:
                attempts, started_at = status.attempts, status.started_at
        except Exception:
            log.debug("reading the status of job %s failed", envelope.id, exc_info=True)
    step_event = StepEvent(
        kind=kind,
        name=name,
        event=event,
        output=output,
        reason=details.get("reason"),
        error=details.get("error"),
        attempts=attempts,
        started_at=started_at,
    )
    engine = SagaEngine(defn, consumer.jobs_client(), store)
    engine.apply(ref.id, lambda record, now: advance(defn, record, step_event, now))


def passed_step(consumer: Any, envelope: Envelope) -> str | None:
    """Why a forward step of the saga of ``envelope`` must not run, ``None`` when it may: its saga has
    moved past it (compensating, compensated, failed, or the step is no longer the queued one). That is
    a dead letter of the step redriven after its saga was told of its failure: running it would act
    after what it builds on was undone, and its saga would never hear of it (``advance`` takes a step's
    outcome only while the saga waits for it: ``awaits_step``). One read of the saga record; a missing
    record or definition is said by the hook after the run, as before."""
    ref = envelope.saga
    store = consumer.state
    if ref is None or store is None:
        return None
    kind, name = parse_step(ref.step)
    if kind != "step":
        return None
    record = load_saga(store, ref.id)
    defn = find_saga(consumer.registry, record.name) if record is not None else None
    if record is None or defn is None:
        return None
    index = defn.index(name)
    if awaits_step(record, index):
        return None
    return (
        f"its saga {record.name} {record.id} is {record.status.value} and its step {name} is "
        f"{record.steps[index].state.value}: a step runs only while its saga waits for it"
    )
