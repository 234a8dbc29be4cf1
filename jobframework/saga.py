"""Sagas: orchestrated multi-step jobs with compensations, signals with deadlines, a durable record.

A saga is declared from registered jobs::

    order_saga = saga(
        "order.place",
        steps=[
            step(charge, compensate=refund),
            step(reserve, compensate=release),
            wait("approval", timeout=timedelta(hours=4)),
            step(notify),
        ],
    )
    saga_id = order_saga.start({"order_id": "o-1", "amount_cents": 1999})
    order_saga.signal(saga_id, "approval", {"approved_by": "ops"})

How it runs (the orchestration lives in the consumer's saga hook, :func:`on_step_event`):

- Every step, compensation and deadline check is an **ordinary queued job** whose envelope carries
  ``saga={id, step}``; it gets classification, backoff, idempotency, tracing and the DLQ like any job.
  Keys are deterministic: ``saga:<id>:<step>``, ``saga:<id>:compensate:<step>`` and
  ``saga:<id>:deadline:<wait>`` (job ids ``<saga id>-<n>``, ``-c<n>``, ``-d<n>``), so a duplicate
  send is skipped by idempotency and a redrive behaves.
- **Data flows forward**: a step's payload is validated from the saga's *data*: the start payload
  merged with the outputs of the steps completed so far, in order (a step that returns a dict merges
  its keys; any other non-``None`` return value is stored under the step's name; a signal's data
  likewise). ``step(job, input=lambda data: {...})`` builds the payload explicitly. Compensations get
  the same data (including the output of the step they undo), or ``compensate_input=``. Outputs are the
  consumer's JSON summary of the return value (at most 1000 characters): return ids, not documents.
- The **record** (state table, ``pk=saga#<id>``, ``sk=saga``) holds the status, each step's state,
  output, attempts, error and timings, the signals, the saga's root trace, and a ``version``. Every
  transition is a conditional write on the version, so two deliveries of one completion advance once.
  Messages are sent through an **outbox** in the record: the transition is written first (with the
  messages it implies), then they are sent and the outbox cleared; whoever finds a non-empty outbox
  (e.g. a retried delivery after a crash) sends it again. A message may so be sent twice; its
  deterministic key makes the second a skipped duplicate.
- **Compensation**: a step that is dead-lettered (permanent failure, retries exhausted, ...) or a wait
  whose deadline passes turns the saga ``compensating``: the compensations of the completed steps run
  in reverse order, one queued job at a time, each with its own retries. All undone: ``compensated``.
  A compensation dead-lettered: ``failed`` with the reason, and the EMF metric ``SagaFailed``
  (namespace ``JobFramework``, dimension ``Saga``) for the stack to alarm on. Redriving that dead
  letter resumes the compensation where it stopped.
- **Waiting**: ``wait(name, timeout=...)`` parks the saga until ``signal(saga_id, name, data)``; the
  deadline is a delayed check job (SQS ``DelaySeconds`` up to 15 minutes, which works on the embedded
  AWS; EventBridge Scheduler beyond). A signal that arrives before the saga reaches its wait is kept.
- **Tracing**: the record keeps the root ``traceparent`` of :meth:`Saga.start`; every step is sent as
  a child of it, so a saga is one trace.

Statuses: ``running``, ``compensating``, ``succeeded``, ``compensated`` (rolled back, nothing left
over) and ``failed`` (a compensation could not run: an operator must look). Metrics ``SagaSucceeded``,
``SagaCompensated`` and ``SagaFailed`` are written once per saga by the transition that ends it.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, ValidationError

from jobframework.envelope import SagaRef, new_job_id
from jobframework.errors import ConfigurationError, EnqueueError, JobFrameworkError, PayloadValidationError
from jobframework.jobs import Job, JobRegistry, Priority, job
from jobframework.jobs import registry as default_registry

if TYPE_CHECKING:
    from jobframework.client import JobClient
    from jobframework.envelope import Envelope
    from jobframework.state import StateStore

log = logging.getLogger(__name__)

DEADLINE_JOB = "jf.saga.deadline"
"""The job that checks a wait's deadline (registered when a saga has a wait)."""
TERMINAL_TTL_SECONDS = 30 * 24 * 3600
"""A finished saga's record is kept this long (a running one a year)."""
RUNNING_TTL_SECONDS = 365 * 24 * 3600
DEADLINE_TOLERANCE_SECONDS = 1.0
"""A deadline check delivered this early counts as on time (SQS delays are whole seconds)."""
MAX_WRITE_ATTEMPTS = 20
_STEP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_\-.]{0,63}$")
_SAGA_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_\-]*(\.[A-Za-z0-9_\-]+)*$")


class SagaError(JobFrameworkError):
    """A saga could not be read or advanced (the consumer retries the step's record)."""


class SagaNotFoundError(SagaError, LookupError):
    """No saga record with that id (never started, or expired)."""


class SagaStatus(StrEnum):
    RUNNING = "running"
    COMPENSATING = "compensating"
    SUCCEEDED = "succeeded"
    COMPENSATED = "compensated"
    FAILED = "failed"

    @property
    def terminal(self) -> bool:
        return self in (SagaStatus.SUCCEEDED, SagaStatus.COMPENSATED, SagaStatus.FAILED)


class StepState(StrEnum):
    PENDING = "pending"
    QUEUED = "queued"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    WAITING = "waiting"
    SIGNALLED = "signalled"
    TIMED_OUT = "timed_out"


class CompensationState(StrEnum):
    QUEUED = "queued"
    COMPENSATED = "compensated"
    FAILED = "failed"


# --- the durable record -----------------------------------------------------------------------------


def _now() -> datetime:
    return datetime.now(UTC)


def _iso(when: datetime) -> str:
    return when.isoformat(timespec="milliseconds")


class StepRecord(BaseModel):
    """One step of a saga as the record keeps it. Times are ISO 8601 UTC."""

    name: str
    kind: str = "job"
    """``job`` or ``wait``."""
    job: str | None = None
    compensation: str | None = None
    state: StepState = StepState.PENDING
    job_id: str | None = None
    attempts: int = 0
    output: Any = None
    error: str | None = None
    queued_at: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    deadline: str | None = None
    compensation_state: CompensationState | None = None
    compensation_job_id: str | None = None
    compensation_attempts: int = 0
    compensation_error: str | None = None
    compensation_queued_at: str | None = None
    compensation_finished_at: str | None = None


class OutboxItem(BaseModel):
    """A message a transition decided to send; sent after the transition is written."""

    job: str
    payload: dict[str, Any]
    key: str
    job_id: str
    step: str
    """The envelope's ``saga.step``: ``<step>``, ``compensate:<step>`` or ``deadline:<wait>``."""
    not_before: str | None = None
    """Send with a delay that ends at this time (deadline checks)."""


class SagaRecord(BaseModel):
    """The durable state of one saga (``client.saga_status(id)``, ``jf saga show ID``)."""

    id: str
    name: str
    status: SagaStatus = SagaStatus.RUNNING
    version: int = 1
    payload: dict[str, Any] = Field(default_factory=dict)
    steps: list[StepRecord] = Field(default_factory=list)
    signals: dict[str, Any] = Field(default_factory=dict)
    created_at: str
    updated_at: str
    finished_at: str | None = None
    reason: str | None = None
    error: str | None = None
    traceparent: str | None = None
    tracestate: str | None = None
    outbox: list[OutboxItem] = Field(default_factory=list)

    @property
    def trace_id(self) -> str | None:
        return self.traceparent[3:35] if self.traceparent else None

    def step(self, name: str) -> StepRecord:
        for s in self.steps:
            if s.name == name:
                return s
        raise SagaError(f"saga {self.id} ({self.name}) has no step {name!r}")

    def data(self) -> dict[str, Any]:
        """The start payload merged with the outputs of the completed steps and signals, in order."""
        data = dict(self.payload)
        for s in self.steps:
            if s.state in (StepState.SUCCEEDED, StepState.SIGNALLED) and s.output is not None:
                if isinstance(s.output, dict):
                    data.update(s.output)
                else:
                    data[s.name] = s.output
        return data


# --- the definition ---------------------------------------------------------------------------------

InputFn = Callable[[dict[str, Any]], Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class Step:
    """A saga step that runs a job; made by :func:`step`."""

    job: Job[Any]
    name: str
    compensate: Job[Any] | None = None
    input: InputFn | None = None
    compensate_input: InputFn | None = None

    def payload(self, data: dict[str, Any]) -> dict[str, Any]:
        """The step's payload from the saga's data; raises pydantic ``ValidationError``."""
        return _payload(self.job, self.input, data)

    def compensation_payload(self, data: dict[str, Any]) -> dict[str, Any]:
        assert self.compensate is not None
        return _payload(self.compensate, self.compensate_input, data)


@dataclass(frozen=True, slots=True)
class Wait:
    """A saga step that waits for a signal; made by :func:`wait`. ``timeout`` is seconds."""

    name: str
    timeout: float


def _payload(target: Job[Any], build: InputFn | None, data: dict[str, Any]) -> dict[str, Any]:
    source = dict(build(dict(data))) if build is not None else data
    dumped: dict[str, Any] = target.validate(source).model_dump(mode="json")
    return dumped


def _require_job(value: Any, what: str) -> Job[Any]:
    if not isinstance(value, Job):
        name = getattr(value, "__qualname__", repr(value))
        raise ConfigurationError(
            f"{what} must be a registered job (decorate {name} with @job(...)), got {type(value).__name__}"
        )
    return value


def step(
    job_: Job[Any],
    *,
    compensate: Job[Any] | None = None,
    name: str | None = None,
    input: InputFn | None = None,
    compensate_input: InputFn | None = None,
) -> Step:
    """A saga step: run ``job_``; if a later step fails, run ``compensate`` to undo it.

    Args:
        job_: the step's job (a ``@job`` function).
        compensate: the job that undoes it (gets the saga's data, including this step's output).
        name: the step's name in the saga (default: the job's name); unique within the saga.
        input: builds the payload from the saga's data (default: the data itself, validated against
            the job's model, extra keys ignored).
        compensate_input: the same for the compensation.

    Raises:
        ConfigurationError: the job or the compensation is not a job, a name is not valid.
    """
    target = _require_job(job_, "a saga step")
    undo = _require_job(compensate, f"the compensation of step {target.name}") if compensate else None
    step_name = name if name is not None else target.name
    if not isinstance(step_name, str) or not _STEP_NAME.match(step_name):
        raise ConfigurationError(
            f"saga step name {step_name!r} is not valid: 1-64 letters, digits, '.', '_' or '-'"
        )
    for option, fn in (("input", input), ("compensate_input", compensate_input)):
        if fn is not None and not callable(fn):
            raise ConfigurationError(f"step {step_name}: {option}= must be a function of the saga's data")
    if compensate_input is not None and undo is None:
        raise ConfigurationError(f"step {step_name}: compensate_input= needs compensate=")
    return Step(target, step_name, undo, input, compensate_input)


def wait(name: str, *, timeout: float | timedelta) -> Wait:
    """A saga step that waits for the signal ``name``; past ``timeout`` seconds the saga compensates.

    Raises:
        ConfigurationError: a bad name, or a timeout not within (0 s, 1 year].
    """
    if not isinstance(name, str) or not _STEP_NAME.match(name):
        raise ConfigurationError(f"wait name {name!r} is not valid: 1-64 letters, digits, '.', '_' or '-'")
    seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not 0 < seconds <= 365 * 86400:
        raise ConfigurationError(f"wait {name}: timeout must be within (0, 1 year] seconds, got {timeout!r}")
    return Wait(name, float(seconds))


_sagas: weakref.WeakKeyDictionary[JobRegistry, dict[str, Saga]] = weakref.WeakKeyDictionary()


def find_saga(registry: JobRegistry, name: str) -> Saga | None:
    """The saga called ``name`` defined on ``registry``'s jobs."""
    return _sagas.get(registry, {}).get(name)


def sagas_of(registry: JobRegistry | None = None) -> list[Saga]:
    """The sagas defined on a registry's jobs (the default registry when ``None``)."""
    reg = registry if registry is not None else default_registry
    return sorted(_sagas.get(reg, {}).values(), key=lambda s: s.name)


class DeadlineCheck(BaseModel):
    saga_id: str
    wait: str


def _check_deadline(check: DeadlineCheck) -> None:
    """Nothing to do in the job itself: the consumer's saga hook compares the deadline with the clock."""


def _deadline_job(registry: JobRegistry) -> Job[Any]:
    found = registry.find(DEADLINE_JOB)
    if found is not None:
        return found
    return job(DEADLINE_JOB, priority=Priority.HIGH, timeout=10, registry=registry)(_check_deadline)


class Saga:
    """A declared saga: start it, signal it, read its status. Made by :func:`saga`."""

    def __init__(self, name: str, steps: Sequence[Step | Wait], registry: JobRegistry) -> None:
        self.name = name
        self.steps = tuple(steps)
        self.registry = registry
        self._index = {s.name: i for i, s in enumerate(self.steps)}

    def __repr__(self) -> str:
        return f"<Saga {self.name} steps={[s.name for s in self.steps]}>"

    def stale(self) -> bool:
        """Its jobs are no longer the registry's (the registry was cleared and the module reloaded)."""
        for s in self.steps:
            if isinstance(s, Step) and any(
                j is not None and self.registry.find(j.name) is not j for j in (s.job, s.compensate)
            ):
                return True
        return False

    def index(self, name: str) -> int:
        try:
            return self._index[name]
        except KeyError:
            raise SagaError(f"saga {self.name} has no step {name!r}") from None

    def new_record(self, payload: dict[str, Any], saga_id: str) -> SagaRecord:
        from jobframework.tracing import current

        now = _iso(_now())
        trace = current()
        return SagaRecord(
            id=saga_id,
            name=self.name,
            payload=payload,
            steps=[
                StepRecord(name=s.name, kind="wait", deadline=None)
                if isinstance(s, Wait)
                else StepRecord(
                    name=s.name,
                    job=s.job.name,
                    compensation=s.compensate.name if s.compensate else None,
                )
                for s in self.steps
            ],
            created_at=now,
            updated_at=now,
            traceparent=trace.traceparent,
            tracestate=trace.tracestate,
        )

    def start(
        self,
        payload: BaseModel | Mapping[str, Any],
        *,
        client: JobClient | None = None,
        saga_id: str | None = None,
    ) -> str:
        """Write the saga's record and enqueue its first step; returns the saga id.

        Args:
            payload: the start payload (a dict or a pydantic model); the first step's payload is
                validated from it before anything is written.
            client: the client to send with (the default client when ``None``); it needs the state table.
            saga_id: start idempotently under this id: when the saga exists already nothing new is
                started (an unsent first step is sent) and the id is returned.

        Raises:
            PayloadValidationError: the first step's payload does not match its job's model.
            ConfigurationError: no state table is configured.
            EnqueueError: the first step could not be sent (the record stays; start again with the id).
        """
        engine = _Engine(self, _client_or_default(client))
        data = payload.model_dump(mode="json") if isinstance(payload, BaseModel) else dict(payload)
        first = self.steps[0]
        if isinstance(first, Step):
            try:
                first.payload(data)
            except ValidationError as exc:
                problems = "; ".join(
                    f"{'.'.join(map(str, e['loc'])) or 'payload'}: {e['msg']}" for e in exc.errors()[:10]
                )
                raise PayloadValidationError(
                    f"saga {self.name}: the payload does not fit its first step {first.name} "
                    f"({first.job.payload_model.__name__}): {problems}"
                ) from exc
        sid = saga_id or new_job_id()
        record = self.new_record(data, sid)
        _enter(self, record, 0, _now())
        if not engine.create(record):
            log.info("saga %s (%s) exists already; not started again", sid, self.name)
            existing = engine.read(sid)
            if existing is not None:
                engine.flush(existing)
            return sid
        engine.flush(record)
        log.info("saga %s (%s) started", sid, self.name)
        return sid

    def signal(self, saga_id: str, name: str, data: Any = None, *, client: JobClient | None = None) -> bool:
        """Deliver the signal ``name`` (with ``data``, merged into the saga's data) to a saga.

        Returns ``True`` when the saga took it (it was waiting, or will find it when it reaches the
        wait; a repeated signal is taken once); ``False`` when the saga has ended or the wait's
        deadline has passed (the saga compensates).

        Raises:
            ConfigurationError: the saga has no wait called ``name``.
            SagaNotFoundError: no saga with that id.
        """
        index = self._index.get(name)
        if index is None or not isinstance(self.steps[index], Wait):
            waits = ", ".join(s.name for s in self.steps if isinstance(s, Wait)) or "none"
            raise ConfigurationError(f"saga {self.name} has no wait named {name!r} (waits: {waits})")
        engine = _Engine(self, _client_or_default(client))
        accepted = False

        def transition(record: SagaRecord, now: datetime) -> bool:
            nonlocal accepted
            accepted = False
            if record.status.terminal:
                return False
            current = record.steps[index]
            if name in record.signals:
                accepted = current.state is not StepState.TIMED_OUT
                return False
            if current.state is StepState.WAITING:
                if current.deadline and now > datetime.fromisoformat(current.deadline):
                    return False  # too late: the deadline check compensates
                record.signals[name] = data
                current.state = StepState.SIGNALLED
                current.output = data
                current.finished_at = _iso(now)
                _enter(self, record, index + 1, now)
                accepted = True
                return True
            if current.state is StepState.PENDING and record.status is SagaStatus.RUNNING:
                record.signals[name] = data  # the saga finds it when it reaches the wait
                accepted = True
                return True
            return False

        engine.apply(saga_id, transition)
        return accepted

    def status(self, saga_id: str, *, client: JobClient | None = None) -> SagaRecord | None:
        """The saga's record, ``None`` if unknown."""
        return _client_or_default(client).saga_status(saga_id)


def saga(name: str, *, steps: Iterable[Step | Wait | Job[Any]], registry: JobRegistry | None = None) -> Saga:
    """Declare a saga from registered jobs.

    Args:
        name: the saga's name (``area.verb``, like a job's), unique per registry.
        steps: :func:`step` and :func:`wait` entries, run in order (a bare job is ``step(job)``).
        registry: the registry its jobs are registered in (the default registry when ``None``);
            consumers of that registry advance the saga.

    Raises:
        ConfigurationError: an empty saga, a step that is not a job, a compensation that is not a job,
            a duplicate step, a job not registered in ``registry``, a batched or non-idempotent step.
    """
    reg = registry if registry is not None else default_registry
    if not isinstance(name, str) or not _SAGA_NAME.match(name):
        raise ConfigurationError(f"saga name {name!r} is not valid: use letters, digits, '-', '_' and dots")
    given: Any = steps
    if isinstance(given, str | bytes | Job | Step | Wait) or not isinstance(given, Iterable):
        raise ConfigurationError(f"saga {name}: steps= takes a list of step(...) and wait(...)")
    items: list[Step | Wait] = []
    for given_entry in given:
        entry = step(given_entry) if isinstance(given_entry, Job) else given_entry
        if not isinstance(entry, Step | Wait):
            raise ConfigurationError(
                f"saga {name}: {entry!r} is not a step; use step(my_job, compensate=...) or wait(...)"
            )
        items.append(entry)
    if not items:
        raise ConfigurationError(f"saga {name} has no steps; give it at least one step(...)")
    seen: set[str] = set()
    for s in items:
        if s.name in seen:
            raise ConfigurationError(
                f"saga {name}: step {s.name!r} appears twice; give one of them another name= "
                "(step names key the saga's jobs)"
            )
        seen.add(s.name)
        if isinstance(s, Wait):
            continue
        for role, target in (("step", s.job), ("compensation", s.compensate)):
            if target is None:
                continue
            if reg.find(target.name) is not target:
                raise ConfigurationError(
                    f"saga {name}: the {role} job {target.name} is not registered in the saga's registry"
                )
            if target.batch is not None:
                raise ConfigurationError(
                    f"saga {name}: the {role} job {target.name} is batched; use a plain job"
                )
            if not target.idempotent:
                raise ConfigurationError(
                    f"saga {name}: the {role} job {target.name} has idempotent=False; saga jobs must be "
                    "idempotent (a redelivery must not repeat its effect)"
                )
    defined = _sagas.setdefault(reg, {})
    if name in defined and not defined[name].stale():
        raise ConfigurationError(f"a saga named {name!r} is already defined on this registry")
    if any(isinstance(s, Wait) for s in items):
        _deadline_job(reg)
    created = Saga(name, items, reg)
    defined[name] = created
    return created


# --- transitions (pure: they change a record and queue messages in its outbox) -----------------------


def _job_id(saga_id: str, index: int, kind: str = "") -> str:
    return f"{saga_id}-{kind}{index}"


def _enter(defn: Saga, record: SagaRecord, index: int, now: datetime) -> None:
    """Move the saga into step ``index`` (or finish it past the last step)."""
    while index < len(defn.steps):
        spec, current = defn.steps[index], record.steps[index]
        if isinstance(spec, Wait):
            current.started_at = current.started_at or _iso(now)
            if spec.name in record.signals:
                current.state = StepState.SIGNALLED
                current.output = record.signals[spec.name]
                current.finished_at = _iso(now)
                index += 1
                continue
            deadline = now + timedelta(seconds=round(spec.timeout))
            current.state = StepState.WAITING
            current.deadline = _iso(deadline)
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
            _fail_step(
                defn, record, index, reason="invalid_payload", error=f"{type(exc).__name__}: {exc}", now=now
            )
            return
        current.state = StepState.QUEUED
        current.job_id = _job_id(record.id, index)
        current.queued_at = _iso(now)
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
    record.finished_at = _iso(now)


def _fail_step(defn: Saga, record: SagaRecord, index: int, *, reason: str, error: str, now: datetime) -> None:
    current = record.steps[index]
    current.state = StepState.TIMED_OUT if reason == "deadline" else StepState.FAILED
    current.error = error[:1000]
    current.finished_at = _iso(now)
    record.status = SagaStatus.COMPENSATING
    record.reason = f"step {current.name} failed ({reason})"
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
            record.finished_at = _iso(now)
            return
        current.compensation_state = CompensationState.QUEUED
        current.compensation_job_id = _job_id(record.id, index, "c")
        current.compensation_queued_at = _iso(now)
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
    record.finished_at = _iso(now)


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


def advance(defn: Saga, record: SagaRecord, event: StepEvent, now: datetime) -> bool:
    """Apply one event to the record; returns whether it changed (``False``: a duplicate or stale event).

    Raises:
        SagaError: a deadline check arrived before its deadline (retried later).
    """
    index = defn.index(event.name)
    current = record.steps[index]
    failure = f"{event.reason}: {event.error}" if event.reason else (event.error or "failed")
    if event.kind == "step":
        if record.status is not SagaStatus.RUNNING or current.state is not StepState.QUEUED:
            return False
        current.attempts = event.attempts or current.attempts
        current.started_at = event.started_at or current.started_at
        if event.event == "completed":
            current.state = StepState.SUCCEEDED
            current.output = event.output
            current.finished_at = _iso(now)
            _enter(defn, record, index + 1, now)
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
            current.compensation_finished_at = _iso(now)
            record.status = SagaStatus.COMPENSATING
            record.finished_at = None
            _compensate_next(defn, record, now)
            return True
        if current.compensation_state is not CompensationState.QUEUED:
            return False
        current.compensation_state = CompensationState.FAILED
        current.compensation_error = failure[:1000]
        current.compensation_finished_at = _iso(now)
        record.status = SagaStatus.FAILED
        record.reason = (
            f"compensation {current.compensation} of step {current.name} was dead-lettered ({event.reason})"
        )
        record.error = failure[:1000]
        record.finished_at = _iso(now)
        return True
    # a deadline check
    if event.event != "completed" or record.status is not SagaStatus.RUNNING:
        return False
    if current.state is not StepState.WAITING or current.deadline is None:
        return False
    deadline = datetime.fromisoformat(current.deadline)
    early = (deadline - now).total_seconds()
    if early > DEADLINE_TOLERANCE_SECONDS:
        raise SagaError(f"deadline check of {current.name} arrived {early:.1f}s early; checking again")
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


# --- persistence and sending ----------------------------------------------------------------------------


def _key(saga_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"saga#{saga_id}"}, "sk": {"S": "saga"}}


def _item(record: SagaRecord) -> dict[str, Any]:
    ttl = TERMINAL_TTL_SECONDS if record.status.terminal else RUNNING_TTL_SECONDS
    return {
        **_key(record.id),
        "saga_name": {"S": record.name},
        "status": {"S": record.status.value},
        "version": {"N": str(record.version)},
        "created_at": {"S": record.created_at},
        "updated_at": {"S": record.updated_at},
        "doc": {"S": record.model_dump_json()},
        "expires_at": {"N": str(int(time.time()) + ttl)},
    }


def _record(item: Mapping[str, Any]) -> SagaRecord:
    return SagaRecord.model_validate_json(item["doc"]["S"])


def load_saga(store: StateStore, saga_id: str) -> SagaRecord | None:
    """The record of a saga (consistent read), ``None`` if unknown."""
    if not isinstance(saga_id, str) or not 0 < len(saga_id) <= 128:
        raise ConfigurationError(f"a saga id is a string of 1 to 128 characters, got {saga_id!r}")
    item = store.client.get_item(TableName=store.table, Key=_key(saga_id), ConsistentRead=True).get("Item")
    return _record(item) if item else None


def list_sagas(
    store: StateStore, *, status: SagaStatus | str | None = None, name: str | None = None, limit: int = 100
) -> list[SagaRecord]:
    """Sagas in the state table, newest first (a filtered Scan: meant for operators, not hot paths)."""
    names: dict[str, str] = {}
    values: dict[str, Any] = {":prefix": {"S": "saga#"}}
    filters = ["begins_with(pk, :prefix)"]
    if status is not None:
        names["#status"] = "status"  # a reserved word
        values[":status"] = {"S": SagaStatus(status).value}
        filters.append("#status = :status")
    if name is not None:
        values[":name"] = {"S": name}
        filters.append("saga_name = :name")
    found: list[SagaRecord] = []
    kwargs: dict[str, Any] = {
        "TableName": store.table,
        "FilterExpression": " AND ".join(filters),
        "ExpressionAttributeValues": values,
    }
    if names:
        kwargs["ExpressionAttributeNames"] = names
    while True:
        page = store.client.scan(**kwargs)
        found.extend(_record(item) for item in page.get("Items", []))
        start = page.get("LastEvaluatedKey")
        if not start:
            break
        kwargs["ExclusiveStartKey"] = start
    found.sort(key=lambda r: r.created_at, reverse=True)
    return found[:limit]


def _emit_metric(metric: str, saga_name: str) -> None:
    """One EMF line (``SagaSucceeded``, ``SagaCompensated`` or ``SagaFailed``, dimension ``Saga``)."""
    try:
        from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

        from jobframework.telemetry import DEFAULT_NAMESPACE, NAMESPACE_ENV, SERVICE

        metrics = EphemeralMetrics(
            namespace=os.environ.get(NAMESPACE_ENV, DEFAULT_NAMESPACE), service=SERVICE
        )
        metrics.add_dimension("Saga", saga_name)
        metrics.add_metric(name=metric, unit=MetricUnit.Count, value=1)
        metrics.flush_metrics()
    except Exception:
        log.warning("writing the %s metric failed; the saga is not affected", metric, exc_info=True)


_TERMINAL_METRIC = {
    SagaStatus.SUCCEEDED: "SagaSucceeded",
    SagaStatus.COMPENSATED: "SagaCompensated",
    SagaStatus.FAILED: "SagaFailed",
}


def _client_or_default(client: JobClient | None) -> JobClient:
    from jobframework.client import default_client

    return client if client is not None else default_client()


def _conditional_failed(exc: Exception) -> bool:
    response = getattr(exc, "response", None)
    return (
        isinstance(response, dict)
        and response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"
    )


class _Engine:
    """Reads, transitions (conditional on the version), writes and flushes the outbox of one saga."""

    def __init__(self, defn: Saga, client: JobClient, store: StateStore | None = None) -> None:
        self.defn = defn
        self.client = client
        state = store if store is not None else client.state
        if state is None:
            raise ConfigurationError("sagas need the state table: set JF_STATE_TABLE")
        self.store = state

    def read(self, saga_id: str) -> SagaRecord | None:
        return load_saga(self.store, saga_id)

    def create(self, record: SagaRecord) -> bool:
        try:
            self.store.client.put_item(
                TableName=self.store.table, Item=_item(record), ConditionExpression="attribute_not_exists(pk)"
            )
        except Exception as exc:
            if _conditional_failed(exc):
                return False
            raise
        return True

    def _write(self, record: SagaRecord, expected: int) -> bool:
        try:
            self.store.client.put_item(
                TableName=self.store.table,
                Item=_item(record),
                ConditionExpression="version = :expected",
                ExpressionAttributeValues={":expected": {"N": str(expected)}},
            )
        except Exception as exc:
            if _conditional_failed(exc):
                return False
            raise
        return True

    def apply(self, saga_id: str, transition: Callable[[SagaRecord, datetime], bool]) -> SagaRecord:
        """Read, transition, write conditionally on the version (re-reading on a conflict); then flush.

        Raises:
            SagaNotFoundError: no record.
            SagaError: the record kept changing under us.
        """
        for _ in range(MAX_WRITE_ATTEMPTS):
            record = self.read(saga_id)
            if record is None:
                raise SagaNotFoundError(f"no saga {saga_id} (never started, or its record expired)")
            before = record.status
            updated = record.model_copy(deep=True)
            now = _now()
            if not transition(updated, now):
                self.flush(record)  # a duplicate: make sure what the transition decided went out
                return record
            updated.version = record.version + 1
            updated.updated_at = _iso(now)
            if self._write(updated, record.version):
                if updated.status is not before and updated.status in _TERMINAL_METRIC:
                    log.info(
                        "saga %s (%s) %s: %s",
                        saga_id,
                        updated.name,
                        updated.status.value,
                        updated.reason or "",
                    )
                    _emit_metric(_TERMINAL_METRIC[updated.status], updated.name)
                self.flush(updated)
                return updated
            log.debug("saga %s changed under us (version %d); re-reading", saga_id, record.version)
        raise SagaError(f"saga {saga_id}: {MAX_WRITE_ATTEMPTS} conflicting writes in a row; retrying later")

    def flush(self, record: SagaRecord) -> None:
        """Send the outbox's messages (in the saga's trace), then clear them from the record."""
        if not record.outbox:
            return
        for item in record.outbox:
            self._send(record, item)
        sent = {item.job_id for item in record.outbox}
        for _ in range(MAX_WRITE_ATTEMPTS):
            left = [item for item in record.outbox if item.job_id not in sent]
            if len(left) == len(record.outbox):
                return
            cleared = record.model_copy(update={"outbox": left, "version": record.version + 1})
            if self._write(cleared, record.version):
                return
            fresh = self.read(record.id)
            if fresh is None:
                return
            record = fresh

    def _send(self, record: SagaRecord, item: OutboxItem) -> None:
        from jobframework.client import MAX_DELAY_SECONDS, EnqueueRequest
        from jobframework.tracing import TraceContext, continue_trace, to_xray_header, valid_traceparent

        delay = None
        if item.not_before is not None:
            delay = max(0.0, (datetime.fromisoformat(item.not_before) - _now()).total_seconds())
        request = EnqueueRequest(
            item.job,
            item.payload,
            key=item.key,
            saga=SagaRef(id=record.id, step=item.step),
            job_id=item.job_id,
            delay=delay or None,
        )
        root = None
        if record.traceparent and valid_traceparent(record.traceparent):
            root = TraceContext(record.traceparent, record.tracestate)
            root = TraceContext(root.traceparent, root.tracestate, to_xray_header(root))
        try:
            if root is None:
                prepared = self.client.prepare(request)
            else:
                with continue_trace(root):
                    prepared = self.client.prepare(request)
            self.client._send_one(prepared)
        except EnqueueError as exc:
            if delay is not None and delay > MAX_DELAY_SECONDS and "ConflictException" in str(exc.__cause__):
                return  # the deadline's Scheduler schedule exists already: sent before
            raise


# --- the consumer's hook --------------------------------------------------------------------------------

_clients: weakref.WeakKeyDictionary[Any, JobClient] = weakref.WeakKeyDictionary()


def _consumer_client(consumer: Any) -> JobClient:
    client = _clients.get(consumer)
    if client is None:
        from jobframework.client import JobClient

        client = JobClient(consumer.config, registry=consumer.registry, sqs_client=consumer.sqs)
        _clients[consumer] = client
    return client


def on_step_event(consumer: Any, envelope: Envelope, event: str, **details: Any) -> None:
    """Advance the saga of ``envelope`` after its job ``event`` (``completed`` or ``failed``).

    Called by the consumer after a saga job succeeded (``result``: the JSON summary of its return
    value) or before it is dead-lettered for good (``reason``, ``error``). Idempotent: a repeated
    event changes nothing (conditional writes on the record's version) but re-sends an unsent outbox.

    Raises:
        SagaError: the saga could not be advanced now (the consumer retries the record).
        ConfigurationError: no state table, or the saga is not defined on the consumer's registry.
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
        raise ConfigurationError(
            f"saga {record.name} is not defined on this consumer's registry: "
            "import the module that declares it"
        )
    kind, name = parse_step(ref.step)
    result = details.get("result")
    output = None
    if isinstance(result, str):
        try:
            output = json.loads(result)
        except ValueError:
            output = result
    attempts = started_at = None
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
    engine = _Engine(defn, _consumer_client(consumer), store)
    engine.apply(ref.id, lambda record, now: advance(defn, record, step_event, now))


__all__ = [
    "CompensationState",
    "Saga",
    "SagaError",
    "SagaNotFoundError",
    "SagaRecord",
    "SagaStatus",
    "Step",
    "StepRecord",
    "StepState",
    "Wait",
    "advance",
    "find_saga",
    "list_sagas",
    "load_saga",
    "on_step_event",
    "saga",
    "sagas_of",
    "step",
    "wait",
]
