"""A declared saga (:func:`saga`, :class:`Saga`: start, signal, status) and the sagas of each registry."""

from __future__ import annotations

import logging
import re
import weakref
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from jobframework.envelope import new_job_id
from jobframework.errors import ConfigurationError, PayloadValidationError
from jobframework.jobs import Job, JobRegistry
from jobframework.jobs import registry as default_registry
from jobframework.saga.deadline import deadline_job
from jobframework.saga.engine import SagaEngine, client_or_default
from jobframework.saga.record import (
    SagaError,
    SagaRecord,
    SagaStatus,
    StepRecord,
    StepState,
    iso_utc,
    utc_now,
)
from jobframework.saga.steps import Step, Wait, step
from jobframework.saga.transitions import cancel, enter_step
from jobframework.validation import validation_fields, validation_problems

if TYPE_CHECKING:
    from jobframework.client import JobClient

log = logging.getLogger("jobframework.saga")  # the package's one logger, named as before the split

_SAGA_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_\-]*(\.[A-Za-z0-9_\-]+)*$")


_sagas: weakref.WeakKeyDictionary[JobRegistry, dict[str, Saga]] = weakref.WeakKeyDictionary()


def find_saga(registry: JobRegistry, name: str) -> Saga | None:
    """The saga called ``name`` defined on ``registry``'s jobs."""
    return _sagas.get(registry, {}).get(name)


def saga_named(name: str) -> Saga | None:
    """The saga called ``name`` on any registry (the default one first): what ``jf`` finds after
    importing the job modules."""
    found = find_saga(default_registry, name)
    if found is None:
        found = next((d[name] for d in list(_sagas.values()) if name in d), None)
    return found


def defined_saga_names() -> list[str]:
    """The names of the sagas defined on any registry."""
    return sorted({name for d in list(_sagas.values()) for name in d})


def sagas_of(registry: JobRegistry | None = None) -> list[Saga]:
    """The sagas defined on a registry's jobs (the default registry when ``None``)."""
    reg = registry if registry is not None else default_registry
    return sorted(_sagas.get(reg, {}).values(), key=lambda s: s.name)


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

        now = iso_utc(utc_now())
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
        engine = SagaEngine(self, client_or_default(client))
        data = payload.model_dump(mode="json") if isinstance(payload, BaseModel) else dict(payload)
        first = self.steps[0]
        if isinstance(first, Step):
            try:
                first.payload(data)
            except ValidationError as exc:
                raise PayloadValidationError(
                    f"saga {self.name}: the payload does not fit its first step {first.name} "
                    f"({first.job.payload_model.__name__}): {validation_problems(exc)}",
                    validation_fields(exc),
                ) from exc
        sid = saga_id or new_job_id()
        record = self.new_record(data, sid)
        enter_step(self, record, 0, utc_now())
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
            PayloadValidationError: with ``data``, the payload of the step after the wait would not
                validate (nothing is changed: fix the data and signal again).
            SagaNotFoundError: no saga with that id.
        """
        index = self._index.get(name)
        if index is None or not isinstance(self.steps[index], Wait):
            waits = ", ".join(s.name for s in self.steps if isinstance(s, Wait)) or "none"
            raise ConfigurationError(f"saga {self.name} has no wait named {name!r} (waits: {waits})")
        engine = SagaEngine(self, client_or_default(client))
        accepted = False

        def transition(record: SagaRecord, now: datetime) -> bool:
            nonlocal accepted
            accepted = False
            if record.status.terminal or record.cancel_requested_at is not None:
                return False
            current = record.steps[index]
            if name in record.signals:
                accepted = current.state is not StepState.TIMED_OUT
                return False
            if current.state is StepState.WAITING:
                if current.deadline and now > datetime.fromisoformat(current.deadline):
                    return False  # too late: the deadline check compensates
                self._check_next_step(record, index, name, data)  # before anything changes
                record.signals[name] = data
                current.state = StepState.SIGNALLED
                current.output = data
                current.finished_at = iso_utc(now)
                enter_step(self, record, index + 1, now)
                accepted = True
                return True
            if current.state is StepState.PENDING and record.status is SagaStatus.RUNNING:
                record.signals[name] = data  # the saga finds it when it reaches the wait
                accepted = True
                return True
            return False

        engine.apply(saga_id, transition)
        return accepted

    def cancel(self, saga_id: str, reason: str | None = None, *, client: JobClient | None = None) -> bool:
        """Cancel a running saga: it rolls back, compensating its completed steps in reverse order.

        At a wait, at once; while a step's job is queued or running, once that job ends (what it does
        cannot be stopped halfway; if it succeeds, it is compensated too). Steps not reached never run.
        The saga ends ``compensated`` (``failed`` if a compensation is dead-lettered) with reason
        ``cancelled: <reason>``.

        Returns ``True`` when the cancel was taken; ``False`` when the saga has ended, already
        compensates, or was cancelled before.

        Raises:
            SagaNotFoundError: no saga with that id.
        """
        engine = SagaEngine(self, client_or_default(client))
        taken = False

        def transition(record: SagaRecord, now: datetime) -> bool:
            nonlocal taken
            taken = cancel(self, record, reason, now)
            return taken

        engine.apply(saga_id, transition)
        return taken

    def _check_next_step(self, record: SagaRecord, index: int, name: str, data: Any) -> None:
        """Refuse signal data that the step after the wait at ``index`` could not take (a typo would
        otherwise fail that step and roll the saga back)."""
        following = self.steps[index + 1] if index + 1 < len(self.steps) else None
        if not isinstance(following, Step):
            return
        merged = record.data()
        if isinstance(data, dict):
            merged.update(data)
        elif data is not None:
            merged[name] = data
        try:
            following.payload(merged)
        except ValidationError as exc:
            raise PayloadValidationError(
                f"saga {self.name}: with the data of signal {name!r}, the payload of its next step "
                f"{following.name} ({following.job.payload_model.__name__}) does not validate: "
                f"{validation_problems(exc)}; nothing was changed",
                validation_fields(exc),
            ) from exc

    def status(self, saga_id: str, *, client: JobClient | None = None) -> SagaRecord | None:
        """The saga's record, ``None`` if unknown."""
        return client_or_default(client).saga_status(saga_id)


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
        # (a job, or a plain function: step() says to decorate it, as step(plain) does)
        entry = step(given_entry) if isinstance(given_entry, Job) or callable(given_entry) else given_entry
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
        raise ConfigurationError(
            f"a saga named {name!r} is already defined on this registry: give this one another name, or "
            "define it once, in one module that the others import"
        )
    if any(isinstance(s, Wait) for s in items):
        deadline_job(reg)
    created = Saga(name, items, reg)
    defined[name] = created
    return created
