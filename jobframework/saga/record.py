"""The durable record of a saga: its statuses, steps and outbox (kept by :mod:`jobframework.stores.sagas`)."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from jobframework.errors import ConfigurationError, JobFrameworkError

if TYPE_CHECKING:
    from jobframework.state import StateStore


class SagaError(JobFrameworkError):
    """A saga could not be read or advanced (the consumer retries the step's record)."""


class SagaNotDue(SagaError):
    """A deadline check arrived before its deadline (a delay cut short, a test's ``fire_due`` with a
    later ``now``): its record comes back at the deadline, said at ``INFO``, no error."""

    def __init__(self, message: str, seconds: float) -> None:
        super().__init__(message)
        self.seconds = seconds
        """How long until the deadline."""


class UnknownSagaError(ConfigurationError):
    """A saga job reached a consumer whose registry does not define its saga (no retry can help: a
    deploy that imports the saga's module can)."""


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
    CANCELLED = "cancelled"
    """A wait the saga was cancelled in."""


class CompensationState(StrEnum):
    QUEUED = "queued"
    COMPENSATED = "compensated"
    FAILED = "failed"


def utc_now() -> datetime:
    return datetime.now(UTC)


def iso_utc(when: datetime) -> str:
    return when.isoformat(timespec="milliseconds")


class StepRecord(BaseModel):
    """One step of a saga as the record keeps it. Times are ISO 8601 UTC."""

    model_config = ConfigDict(defer_build=True)  # built on first use, not at cold start

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

    model_config = ConfigDict(defer_build=True)  # built on first use, not at cold start

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

    model_config = ConfigDict(defer_build=True)  # built on first use, not at cold start

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
    cancel_requested_at: str | None = None
    """When :meth:`Saga.cancel` was asked: the saga compensates as soon as its running step ends."""
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


# --- reading ------------------------------------------------------------------------------------------


def load_saga(store: StateStore, saga_id: str) -> SagaRecord | None:
    """The record of a saga (consistent read), ``None`` if unknown."""
    if not isinstance(saga_id, str) or not 0 < len(saga_id) <= 128:
        raise ConfigurationError(f"a saga id is a string of 1 to 128 characters, got {saga_id!r}")
    return store.sagas.get(saga_id)


def list_sagas(
    store: StateStore, *, status: SagaStatus | str | None = None, name: str | None = None, limit: int = 100
) -> list[SagaRecord]:
    """Sagas in the state table, newest first (a filtered Scan: meant for operators, not hot paths)."""
    wanted = SagaStatus(status).value if status is not None else None
    return store.sagas.find(status=wanted, name=name, limit=limit)
