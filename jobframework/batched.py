"""Batched jobs (``@job(batch=...)``): the batch's records of one such job run in one call.

Each record is admitted on its own (parse, verify, load, gates: :mod:`jobframework.pipeline`); the
admitted payloads of one job type are passed to the job together, ``max_size`` at a time; then each
item gets its own verdict from what the job returned for it (``None`` or a value: succeeded; an
exception: classified as any failure). A call that raises fails each of its items alike.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from jobframework.delivery import Batch, Delivery, describe, job_context_of, log_keys_of, queue_wait_ms_of
from jobframework.envelope import parse_body
from jobframework.failures import failure_verdict
from jobframework.running import JobAborted, call
from jobframework.state import summarize
from jobframework.telemetry import job_logger, put_log_keys, reset_log_keys
from jobframework.tracing import extract, job_span
from jobframework.verdict import Verdict, returned

if TYPE_CHECKING:
    from jobframework.gates import Admitted
    from jobframework.jobs import Job, JobRegistry
    from jobframework.pipeline import Pipeline

log = logging.getLogger("jobframework.consumer")


def has_batched_jobs(registry: JobRegistry) -> bool:
    return any(j.batch is not None for j in registry)


def run_batched(
    pipeline: Pipeline, records: list[dict[str, Any]], context: Any, batch: Batch
) -> dict[str, Verdict]:
    """The verdicts of the records of batched jobs, by message id (the other records are left out)."""
    registry = pipeline.consumer.registry
    verdicts: dict[str, Verdict] = {}
    groups: dict[str, list[Admitted]] = {}
    for record in records:
        try:
            job = registry.find(parse_body(record.get("body")).type)
        except Exception:
            continue  # the ordinary path dead-letters it
        if job is None or job.batch is None:
            continue
        d = Delivery.of(record)
        try:
            admitted = pipeline.admit(d, context, batch)
        except Exception as exc:  # one bad record never fails the batch: it comes back alone
            log.error("admitting record %s failed", d.message_id, exc_info=True)
            verdicts[d.message_id] = returned(d, describe(exc))
            continue
        if isinstance(admitted, Verdict):
            verdicts[d.message_id] = admitted
        else:  # admit() left the record's keys on the logger for execute(), which a batch does not use
            reset_log_keys(admitted.log_token, batch.log_keys)
            groups.setdefault(job.name, []).append(admitted)
    for name, items in groups.items():
        job = registry.get(name)
        size = job.batch.max_size if job.batch else len(items)
        for start in range(0, len(items), size):
            chunk = items[start : start + size]
            done: dict[str, Verdict] = {}
            try:
                _run_chunk(pipeline, job, chunk, context=context, batch=batch, verdicts=done)
            except Exception as exc:  # the items not yet settled come back; a settled one stays settled
                log.error(
                    "settling a batch of %s failed; its unsettled records come back", name, exc_info=True
                )
                for a in chunk:
                    done.setdefault(a.delivery.message_id, returned(a.delivery, describe(exc)))
            finally:
                for a in chunk:  # the call ended: its items' leases are free
                    pipeline.run_ended(a.delivery, job)
            verdicts.update(done)
    return verdicts


def checked_outcomes(job: Job[Any], outcomes: Any, n: int) -> list[Any]:
    """A batched job's outcomes for its ``n`` payloads: ``None`` (all succeeded) or one per payload.

    Raises:
        TypeError: anything else, saying what it got.
    """
    if outcomes is None:
        return [None] * n
    if not isinstance(outcomes, list | tuple) or len(outcomes) != n:
        got = f"{len(outcomes)} outcomes" if isinstance(outcomes, list | tuple) else type(outcomes).__name__
        raise TypeError(
            f"batched job {job.name} must return None or one outcome per payload ({n}), got {got}"
        )
    return list(outcomes)


def _run_chunk(
    pipeline: Pipeline,
    job: Job[Any],
    items: list[Admitted],
    *,
    context: Any,
    batch: Batch,
    verdicts: dict[str, Verdict],
) -> None:
    """One call of a batched job; then each item's verdict (into ``verdicts``, as each is decided)."""
    first = items[0].delivery
    env = first.require_envelope()
    trace = extract(first.record, env.traceparent)
    logger = job_logger()
    keys = {"job_type": env.type, "batch_size": len(items), "trace_id": trace.trace_id}
    token = put_log_keys(keys, batch.log_keys)
    for a in items:  # (each item's status and outcome start with the call)
        a.delivery.started_at = time.time()
    started = time.perf_counter()
    outcomes: Any
    try:
        with job_span(trace, env.type, env.id, first.attempt, otel=batch.otel, queue=first.source) as own:
            ctx = job_context_of(first, job, own=own, parent=trace, context=context, logger=logger)
            outcomes = call(job, [a.payload for a in items], ctx, timeout=job.timeout)
        outcomes = checked_outcomes(job, outcomes, len(items))
    except Exception as exc:
        outcomes = [exc] * len(items)
    finally:
        reset_log_keys(token, batch.log_keys)
    per_item_ms = (time.perf_counter() - started) * 1000 / len(items)
    for a, outcome in zip(items, outcomes, strict=True):
        d = a.delivery
        if isinstance(outcome, BaseException):
            failure = outcome if isinstance(outcome, Exception) else JobAborted(outcome)
            # The item's own keys on its failure's lines (the retry, the budget, the dead letter).
            item_token = put_log_keys(log_keys_of(d, (a.trace or trace).trace_id), batch.log_keys)
            try:
                verdicts[d.message_id] = failure_verdict(
                    pipeline.consumer, d, job, failure, per_item_ms, batch, payload=a.payload
                )
            finally:
                reset_log_keys(item_token, batch.log_keys)
        else:
            wait = queue_wait_ms_of(d.record, d.require_envelope()) if d.attempt == 1 else None
            verdicts[d.message_id] = pipeline.succeeded(
                d, summarize(outcome), queue_wait_ms=wait, processing_ms=per_item_ms
            )
