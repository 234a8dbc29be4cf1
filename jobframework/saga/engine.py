"""Running a transition: read the record, write it conditionally on its version, send its outbox."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from jobframework.envelope import SagaRef
from jobframework.errors import ConfigurationError, EnqueueError
from jobframework.saga.record import (
    OutboxItem,
    SagaError,
    SagaNotFoundError,
    SagaRecord,
    SagaStatus,
    iso_utc,
    load_saga,
    utc_now,
)

if TYPE_CHECKING:
    from jobframework.client import JobClient
    from jobframework.saga.definition import Saga
    from jobframework.state import StateStore

log = logging.getLogger("jobframework.saga")  # the package's one logger, named as before the split

MAX_WRITE_ATTEMPTS = 20


def emit_metric(metric: str, saga_name: str) -> None:
    """One EMF line (``SagaSucceeded``, ``SagaCompensated`` or ``SagaFailed``, dimension ``Saga``)."""
    try:
        from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

        from jobframework.telemetry import SERVICE, metrics_disabled, metrics_namespace

        if metrics_disabled():  # JF_METRICS_DISABLED: the consumer's metrics, the sagas' too
            return
        metrics = EphemeralMetrics(namespace=metrics_namespace(), service=SERVICE)
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


def client_or_default(client: JobClient | None) -> JobClient:
    from jobframework.client import JobClient, default_client

    found = client if client is not None else default_client()
    if not isinstance(found, JobClient):  # (an EnqueueRecorder: run_inline(client=EnqueueRecorder()))
        raise ConfigurationError(
            f"a saga needs a JobClient (its record is kept in the state table), got {type(found).__name__}: "
            "run the job with run_inline(..., client=JobClient(jf_config))"
        )
    return found


class SagaEngine:
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
        return self.store.sagas.create(record)

    def _write(self, record: SagaRecord, expected: int) -> bool:
        return self.store.sagas.replace(record, expected)

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
            now = utc_now()
            if not transition(updated, now):
                self.flush(record)  # a duplicate: make sure what the transition decided went out
                return record
            updated.version = record.version + 1
            updated.updated_at = iso_utc(now)
            if self._write(updated, record.version):
                if updated.status is not before and updated.status in _TERMINAL_METRIC:
                    log.info(
                        "saga %s (%s) %s%s",
                        saga_id,
                        updated.name,
                        updated.status.value,
                        f": {updated.reason}" if updated.reason else "",
                    )
                    emit_metric(_TERMINAL_METRIC[updated.status], updated.name)
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
            delay = max(0.0, (datetime.fromisoformat(item.not_before) - utc_now()).total_seconds())
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
            self.client.send(prepared)
        except EnqueueError as exc:
            if delay is not None and delay > MAX_DELAY_SECONDS and "ConflictException" in str(exc.__cause__):
                return  # the deadline's Scheduler schedule exists already: sent before
            raise
