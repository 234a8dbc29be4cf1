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
  (the consumer's namespace, ``JobFramework/<app>-<stage>`` as deployed; dimension ``Saga``) for
  the stack to alarm on. Redriving that dead
  letter resumes the compensation where it stopped.
- **Waiting**: ``wait(name, timeout=...)`` parks the saga until ``signal(saga_id, name, data)``; the
  deadline is a delayed check job (SQS ``DelaySeconds`` up to 15 minutes, which works on the embedded
  AWS; EventBridge Scheduler beyond). A signal that arrives before the saga reaches its wait is kept.
- **Cancelling**: ``Saga.cancel(saga_id, reason)`` rolls a running saga back (its completed steps
  compensated in reverse): at a wait at once, else once its queued or running step's job ends (that
  step is compensated too if it succeeded). It ends ``compensated`` with reason ``cancelled: ...``.
- **Tracing**: the record keeps the root ``traceparent`` of :meth:`Saga.start`; every step is sent as
  a child of it, so a saga is one trace.

Statuses: ``running``, ``compensating``, ``succeeded``, ``compensated`` (rolled back, nothing left
over) and ``failed`` (a compensation could not run: an operator must look). Metrics ``SagaSucceeded``,
``SagaCompensated`` and ``SagaFailed`` are written once per saga by the transition that ends it.

Modules: ``steps`` (``step``, ``wait``), ``definition`` (``saga``, :class:`Saga`, the sagas of a
registry), ``record`` (the record and its item in the state table), ``transitions`` (the pure state
machine), ``engine`` (conditional writes, the outbox, metrics), ``deadline`` (the deadline check
job), ``hooks`` (the consumer's hook) and ``view`` (how ``jf saga`` shows a record).
"""

from __future__ import annotations

from jobframework.saga.definition import Saga, find_saga, saga, sagas_of
from jobframework.saga.hooks import is_forward_step, on_step_event
from jobframework.saga.record import (
    CompensationState,
    SagaError,
    SagaNotDue,
    SagaNotFoundError,
    SagaRecord,
    SagaStatus,
    StepRecord,
    StepState,
    UnknownSagaError,
    list_sagas,
    load_saga,
)
from jobframework.saga.steps import Step, Wait, step, wait
from jobframework.saga.transitions import StepEvent as StepEvent
from jobframework.saga.transitions import advance

__all__ = [
    "CompensationState",
    "Saga",
    "SagaError",
    "SagaNotDue",
    "SagaNotFoundError",
    "SagaRecord",
    "SagaStatus",
    "Step",
    "StepRecord",
    "StepState",
    "UnknownSagaError",
    "Wait",
    "advance",
    "find_saga",
    "is_forward_step",
    "list_sagas",
    "load_saga",
    "on_step_event",
    "saga",
    "sagas_of",
    "step",
    "wait",
]
