"""The Lambda consumer: every record of an SQS batch ends succeeded, retried or dead-lettered.

``consumer()`` returns a Lambda handler for SQS events with partial batch
responses (Powertools' batch utility). Per record, independently of its
neighbours: parse the envelope; dead-letter an unknown type or a malformed body
(never executed); validate the payload; run the job in its trace context; on a
failure classify it, then either back off by ``ChangeMessageVisibility`` and
report the record in ``batchItemFailures``, or send it to the queue's DLQ with
the reason attributes and acknowledge it.

Use it directly::

    lambda_handler = consumer()

or as a decorator whose function runs first on each invocation (per-invocation setup)::

    @consumer()
    def lambda_handler(event, context):
        configure_something(context)
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from jobframework.admission import load_payload, verify_signature
from jobframework.attempts import deferrals, is_first_attempt, receive_count
from jobframework.budget import BatchBudget, RetryBudget
from jobframework.config import ENV_JOBS, RuntimeConfig
from jobframework.dead_letter import KEPT_ATTRIBUTES, _fit_dead_letter, dead_letter_message
from jobframework.delivery import (
    Listener,
    Outcome,
    RecordOutcome,
    RecordRetry,
    _Batch,
    _Delivery,
    _job_context,
    _queue_wait_ms,
    _remaining_seconds,
    _safe_text,
    _Unavailable,
    arn_queue_name,
    describe,
    identified_records,
    refusal_logged,
)
from jobframework.envelope import parse_body
from jobframework.errors import (
    MalformedMessageError,
    PayloadMissingError,
    PayloadVersionError,
    SignatureError,
)
from jobframework.flow.gates import flow_gates
from jobframework.flow.outcome import Drop, HandBack
from jobframework.handback import hand_back
from jobframework.heartbeat import heartbeat
from jobframework.idempotency import AlreadyInProgress, KeyHold
from jobframework.jobs import Job, JobRegistry, Priority, WhenBacklogged
from jobframework.jobs import registry as default_registry
from jobframework.modules import import_job_modules
from jobframework.queues import QueueDirectory, env_config
from jobframework.retry import MAX_RETRY_DELAY_SECONDS, Action, Reason, classify
from jobframework.running import JobAborted, call
from jobframework.scheduling import SCHEDULE_KEY_PREFIX
from jobframework.state import JobState, StateStore, summarize
from jobframework.telemetry import BatchMetrics, job_logger
from jobframework.tracing import extract, job_span

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

    from jobframework.idempotency import IdempotentRunner
    from jobframework.signing import KeySource

log = logging.getLogger(__name__)

RELEASE_MARGIN_SECONDS = 1.0
DEFER_SECONDS = 60
"""How long a deferred scheduled run waits before the backlog is checked again."""


class Consumer:
    """A Lambda handler over SQS batches. Made by :func:`consumer`."""

    def __init__(
        self,
        registry: JobRegistry | None = None,
        *,
        config: RuntimeConfig | None = None,
        sqs_client: SQSClient | None = None,
        job_modules: Iterable[str] | None = None,
        listeners: Iterable[Listener] = (),
        setup: Callable[[dict[str, Any], Any], Any] | None = None,
    ) -> None:
        self.registry = registry if registry is not None else default_registry
        self._config = config
        self._sqs = sqs_client
        self._job_modules = list(job_modules) if job_modules is not None else None
        self._modules_loaded = False
        self.listeners = list(listeners)
        self._setup = setup
        self.queues = QueueDirectory(
            lambda: self._config if self._config is not None else env_config(), lambda: self.sqs
        )
        self._clients: dict[str, Any] = {}
        self._features_ready = False
        self._setup_lock = threading.RLock()
        self._batched = False
        self._batched_count = -1
        self.state: StateStore | None = None
        self.idempotency: IdempotentRunner | None = None
        self.keys: KeySource | None = None
        self.retry_budget: RetryBudget | None = None

    # -- configuration, resolved on the first invocation ------------------------------------------------

    @property
    def config(self) -> RuntimeConfig:
        if self._config is None:
            self._config = RuntimeConfig.from_env()
        return self._config

    def _client(self, service: str) -> Any:
        client = self._clients.get(service)
        if client is None:
            with self._setup_lock:  # boto3's default session is not thread-safe
                client = self._clients.get(service)
                if client is None:
                    import boto3

                    config = self._config if self._config is not None else env_config()
                    client = boto3.client(  # type: ignore[call-overload]
                        service,
                        endpoint_url=(config.endpoint_url if config else None)
                        or os.environ.get("JF_ENDPOINT_URL"),
                        region_name=(config.region if config else None) or None,
                    )
                    self._clients[service] = client
        return client

    @property
    def sqs(self) -> SQSClient:
        if self._sqs is None:
            self._sqs = self._client("sqs")
        return self._sqs

    def _features(self) -> None:
        """Set up what the configuration turns on: state, idempotency, signing, the payload store."""
        if self._features_ready:
            return
        with self._setup_lock:
            if not self._features_ready:
                self._set_up_features()

    def _set_up_features(self) -> None:
        config = self._config if self._config is not None else env_config()
        if config is not None:
            if config.state_table:
                self.state = StateStore(config.state_table, self._client("dynamodb"))
            if config.idempotency_table:
                from jobframework.idempotency import IdempotentRunner

                self.idempotency = IdempotentRunner(config.idempotency_table, self._client("dynamodb"))
            if config.signing_keys:
                from jobframework.signing import KeySource

                self.keys = KeySource(config.signing_keys, endpoint_url=config.endpoint_url)
            if config.retry_budget is not None and self.state is not None:
                self.retry_budget = RetryBudget(fraction=config.retry_budget)
        self._features_ready = True

    def _load_modules(self) -> None:
        if self._modules_loaded:
            return
        modules = self._job_modules
        if modules is None:
            modules = os.environ.get(ENV_JOBS, "").split(",")
        import_job_modules(modules)
        self._modules_loaded = True

    # -- the handler ----------------------------------------------------------------------------------

    def __call__(self, event: Any, context: Any = None) -> Any:
        if callable(event) and context is None and not isinstance(event, Mapping):
            # @consumer() on a lambda_handler(event, context): it runs first as per-invocation setup.
            return Consumer(
                self.registry,
                config=self._config,
                sqs_client=self._sqs,
                job_modules=self._job_modules,
                listeners=self.listeners,
                setup=event,
            )
        return self.handle(event, context)

    def handle(self, event: Mapping[str, Any], context: Any = None) -> dict[str, list[dict[str, str]]]:
        """Process one SQS event; returns ``{"batchItemFailures": [{"itemIdentifier": id}, ...]}``."""
        from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response

        self._load_modules()
        if self._setup is not None:
            self._setup(dict(event), context)
        records = event.get("Records") if isinstance(event, Mapping) else None
        if not isinstance(records, list):
            raise ValueError("not an SQS event: it has no 'Records' list")
        records = identified_records(records)
        if not records:  # nothing that Lambda could be told about: no failures
            return {"batchItemFailures": []}
        event = {**event, "Records": records}
        self._features()
        if self.idempotency is not None:
            self.idempotency.register_context(context)
        batch = _Batch(
            BatchMetrics(),
            BatchBudget(self.retry_budget, self.state) if self.retry_budget and self.state else None,
        )
        processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
        self._mark_running(records, batch)
        settled = self._run_batched(records, context, batch) if self._has_batched_jobs() else {}

        def record_handler(record: Any) -> None:
            raw = record.raw_event
            if raw.get("messageId") in settled:  # ran in a batched call: report what it came to
                failure = settled[raw["messageId"]]
                if failure is not None:
                    raise failure
                return
            self._process(raw, context, batch)

        try:
            response = process_partial_response(dict(event), record_handler, processor, context)
        finally:
            self._flush_statuses(batch)
            batch.metrics.flush()
            if batch.budget is not None:
                batch.budget.flush()
        failures = [
            {"itemIdentifier": str(f["itemIdentifier"])} for f in response.get("batchItemFailures", [])
        ]
        return {"batchItemFailures": failures}

    # -- one record ------------------------------------------------------------------------------------

    def _process(self, record: dict[str, Any], context: Any, batch: _Batch) -> None:
        admitted = self._admit(record, context, batch)
        if admitted is not None:
            self._run(*admitted, context, batch)

    def _admit(
        self, record: dict[str, Any], context: Any, batch: _Batch
    ) -> tuple[_Delivery, Job[Any], Any] | None:
        """Everything before running: parse, look up, verify, fetch, upgrade and validate the payload.

        Returns what to run, or ``None`` when the record was dead-lettered instead; raises
        :class:`RecordRetry` when it was released for lack of time.
        """
        d = _Delivery.of(record)
        d.statuses = batch.statuses
        d.priority = self.queues.priority_of(d.source)
        body = record.get("body")
        try:
            if not isinstance(body, str):
                raise MalformedMessageError(f"the body is {type(body).__name__}, not text")
            d.envelope = parse_body(body)
        except MalformedMessageError as exc:
            self._refuse(d, Reason.MALFORMED, str(exc), batch)
            return None
        env = d.envelope
        job = self.registry.find(env.type)
        if job is None:
            self._refuse(d, Reason.UNKNOWN_TYPE, f"no job named {env.type!r} is registered here", batch)
            return None
        d.priority = d.priority or job.priority.value
        try:
            if self.keys is not None:
                verify_signature(d, self.keys, self.registry)
            payload = load_payload(d, job, lambda: self._client("s3"))
        except SignatureError as exc:
            self._refuse(d, Reason.SIGNATURE, str(exc), batch)
            return None
        except PayloadMissingError as exc:  # gone from S3: no retry can bring it back
            self._refuse(d, Reason.PAYLOAD_MISSING, str(exc), batch)
            return None
        except _Unavailable as exc:
            # The key ring or the payload store cannot be read: retried like a failed job, then exhausted.
            if d.attempt >= job.retry.max_attempts:
                self._refuse(d, Reason.EXHAUSTED, str(exc), batch)
                return None
            delay = min(MAX_RETRY_DELAY_SECONDS, math.ceil(job.retry.delay(d.attempt)))
            log.warning("job %s: %s; retrying in %ds", env.id, exc, delay)
            copied = self._retry_later(d, delay)
            self._status(d, JobState.RETRYING, attempts=d.attempt, error=_safe_text(str(exc)))
            self._emit(batch, d.outcome(Outcome.RETRIED, error=str(exc), delay=delay))
            if copied:
                return None
            raise RecordRetry(str(exc)) from exc
        except PayloadVersionError as exc:
            self._refuse(d, Reason.VERSION, str(exc), batch)
            return None
        except (ValidationError, ValueError) as exc:
            error = f"payload does not match {job.payload_model.__name__}: {describe(exc)}"
            self._refuse(d, Reason.INVALID_PAYLOAD, error, batch)
            return None

        if job.schedule is not None and env.key.startswith(SCHEDULE_KEY_PREFIX):
            if self._backlog_says_no(d, job, batch):
                return None
            batch.metrics.schedule_event(env.type, "Heartbeat")

        remaining = _remaining_seconds(context)
        if remaining < job.timeout + RELEASE_MARGIN_SECONDS:
            # Not enough time left to finish: hand it back now rather than be killed midway.
            log.warning(
                "job %s (%s) released unstarted: %.1fs left in the invocation, the job may take %gs",
                env.id,
                env.type,
                remaining,
                job.timeout,
            )
            self._status(d, JobState.QUEUED, attempts=d.attempt - 1)
            self._emit(batch, d.outcome(Outcome.RELEASED))
            if self._hand_back(d, 0):
                return None
            raise RecordRetry(f"job {env.id} released: {remaining:.1f}s left, job needs {job.timeout:g}s")

        # Flow control (jobframework.flow.gates: expiry, debounce, limits, cancel): the one call site.
        verdict = flow_gates(self).check(env, job, payload, d.attempt, time.time())
        if isinstance(verdict, Drop):  # acknowledged unrun, with a final status (cancelled, expired)
            now = datetime.now(UTC).isoformat(timespec="milliseconds")
            self._status(d, verdict.state, attempts=d.attempt - 1, reason=verdict.reason, finished_at=now)
            batch.metrics.schedule_event(env.type, verdict.metric)
            self._emit(batch, d.outcome(Outcome.SKIPPED, reason=verdict.reason))
            return None
        if isinstance(verdict, HandBack):  # back later, unrun and not an attempt (a limit is full)
            self._status(d, JobState.QUEUED, attempts=d.attempt - 1)
            self._emit(batch, d.outcome(Outcome.RELEASED, reason=verdict.reason, delay=verdict.delay))
            if self._hand_back(d, verdict.delay):
                return None
            raise RecordRetry(f"job {env.id} handed back: {verdict.reason}")

        if is_first_attempt(record) and batch.budget is not None:
            batch.budget.first_attempt(d.source)
        return d, job, payload

    def _backlog_says_no(self, d: _Delivery, job: Job[Any], batch: _Batch) -> bool:
        """For a scheduled run: skip it (``True``) or defer it (raises) when its queue is backlogged."""
        if job.when_backlogged is WhenBacklogged.RUN:
            return False
        try:
            depth = int(
                self.sqs.get_queue_attributes(
                    QueueUrl=self.queue_url(d.source), AttributeNames=["ApproximateNumberOfMessages"]
                )["Attributes"].get("ApproximateNumberOfMessages", 0)
            )
        except Exception:
            log.warning("reading the depth of %s failed; running the scheduled job", d.source, exc_info=True)
            return False
        waited = _queue_wait_ms(d.record, d.require_envelope()) / 1000
        backlogged = depth > job.backlog_depth or (job.backlog_age is not None and waited > job.backlog_age)
        if not backlogged:
            return False
        env = d.require_envelope()
        if job.when_backlogged is WhenBacklogged.SKIP:
            log.warning(
                "scheduled run %s of %s skipped: %s has %d waiting", env.key, env.type, d.source, depth
            )
            batch.metrics.schedule_event(env.type, "ScheduleSkipped")
            self._status(d, JobState.SUCCEEDED, attempts=d.attempt, result='"skipped: queue backlogged"')
            self._emit(batch, d.outcome(Outcome.SKIPPED, reason="backlogged"))
            return True
        deferred = deferrals(d.record) + (receive_count(d.record) or 1) - 1
        if deferred >= job.retry.max_attempts:
            log.warning(
                "scheduled run %s of %s deferred %d times; running it now", env.key, env.type, deferred
            )
            return False
        log.info(
            "scheduled run %s of %s deferred %ds: %s has %d waiting",
            env.key,
            env.type,
            DEFER_SECONDS,
            d.source,
            depth,
        )
        batch.metrics.schedule_event(env.type, "ScheduleDeferred")
        self._status(d, JobState.QUEUED, attempts=d.attempt - 1)
        self._emit(batch, d.outcome(Outcome.RETRIED, reason="backlogged", delay=DEFER_SECONDS))
        if self._hand_back(d, DEFER_SECONDS, deferred=deferred + 1):
            return True
        raise RecordRetry(f"scheduled run {env.key} deferred: queue backlogged")

    # -- batched jobs ----------------------------------------------------------------------------------

    def _has_batched_jobs(self) -> bool:
        if self._batched_count != len(self.registry):
            self._batched = any(j.batch is not None for j in self.registry)
            self._batched_count = len(self.registry)
        return self._batched

    def _run_batched(
        self, records: list[dict[str, Any]], context: Any, batch: _Batch
    ) -> dict[str, RecordRetry | None]:
        """Run the records of batched jobs, one call per job type (and per ``max_size``).

        Returns, per message id handled here, ``None`` when it is settled (succeeded or
        dead-lettered) or the :class:`RecordRetry` to report it as failed.
        """
        settled: dict[str, RecordRetry | None] = {}
        groups: dict[str, list[tuple[_Delivery, Any]]] = {}
        for record in records:
            try:
                job = self.registry.find(parse_body(record.get("body")).type)
            except Exception:
                continue  # the ordinary path dead-letters it
            if job is None or job.batch is None:
                continue
            message_id = str(record.get("messageId", ""))
            try:
                admitted = self._admit(record, context, batch)
            except RecordRetry as exc:
                settled[message_id] = exc
                continue
            except Exception as exc:  # one bad record never fails the batch: it comes back alone
                log.error("admitting record %s failed", message_id, exc_info=True)
                settled[message_id] = RecordRetry(describe(exc))
                continue
            settled[message_id] = None
            if admitted is not None:
                groups.setdefault(job.name, []).append((admitted[0], admitted[2]))
        for name, items in groups.items():
            job = self.registry.get(name)
            size = job.batch.max_size if job.batch else len(items)
            for start in range(0, len(items), size):
                chunk = items[start : start + size]
                done: dict[str, RecordRetry | None] = {}
                try:
                    self._run_batch(job, chunk, context, batch, done)
                except Exception as exc:  # the items not yet settled come back; a settled one stays settled
                    log.error(
                        "settling a batch of %s failed; its unsettled records come back", name, exc_info=True
                    )
                    done.update(
                        {
                            d.message_id: RecordRetry(describe(exc))
                            for d, _ in chunk
                            if d.message_id not in done
                        }
                    )
                settled.update(done)
        return settled

    def _run_batch(
        self,
        job: Job[Any],
        items: list[tuple[_Delivery, Any]],
        context: Any,
        batch: _Batch,
        settled: dict[str, RecordRetry | None],
    ) -> None:
        """One call of a batched job; then each item is settled, retried or dead-lettered on its own
        (into ``settled``, as each is)."""
        first = items[0][0]
        env = first.require_envelope()
        trace = extract(first.record)
        logger = job_logger()
        logger.thread_safe_append_keys(job_type=env.type, batch_size=len(items), trace_id=trace.trace_id)
        started = time.perf_counter()
        try:
            with job_span(trace, env.type, env.id, first.attempt) as own:
                ctx = _job_context(first, job, own=own, parent=trace, context=context, logger=logger)
                outcomes = call(job, [payload for _, payload in items], ctx)
            if outcomes is None:
                outcomes = [None] * len(items)
            if not isinstance(outcomes, list | tuple) or len(outcomes) != len(items):
                raise TypeError(
                    f"batched job {job.name} must return None or one outcome per payload "
                    f"({len(items)}), got {type(outcomes).__name__}"
                )
        except Exception as exc:
            outcomes = [exc] * len(items)
        finally:
            logger.thread_safe_remove_keys(["job_type", "batch_size", "trace_id"])
        per_item_ms = (time.perf_counter() - started) * 1000 / len(items)
        for (d, _), outcome in zip(items, outcomes, strict=True):
            try:
                if isinstance(outcome, BaseException):
                    failure = outcome if isinstance(outcome, Exception) else JobAborted(outcome)
                    self._failed(d, job, failure, per_item_ms, batch)
                else:
                    self._status(d, JobState.SUCCEEDED, attempts=d.attempt, result=summarize(outcome))
                    wait = _queue_wait_ms(d.record, d.require_envelope()) if d.attempt == 1 else None
                    self._emit(
                        batch, d.outcome(Outcome.SUCCEEDED, queue_wait_ms=wait, processing_ms=per_item_ms)
                    )
                settled[d.message_id] = None
            except RecordRetry as retry:
                settled[d.message_id] = retry

    def _run(self, d: _Delivery, job: Job[Any], payload: Any, context: Any, batch: _Batch) -> None:
        env = d.require_envelope()
        trace = extract(d.record)
        logger = job_logger()
        queue_wait_ms = _queue_wait_ms(d.record, env) if d.attempt == 1 else None
        logger.thread_safe_append_keys(
            job_id=env.id, job_type=env.type, job_key=env.key, attempt=d.attempt, trace_id=trace.trace_id
        )
        started = time.perf_counter()
        ran = True
        result: str | None = None
        try:
            with job_span(trace, env.type, env.id, d.attempt) as own, self._held(d, job, context) as key:
                ctx = _job_context(d, job, own=own, parent=trace, context=context, logger=logger)
                if self.idempotency is not None and key is not None:
                    self.idempotency.limit_attempt(context, job.timeout + RELEASE_MARGIN_SECONDS)
                    result, ran = self.idempotency.run(
                        env.type, env.key, lambda: call(job, payload, ctx), key
                    )
                else:
                    result = summarize(call(job, payload, ctx))
        except AlreadyInProgress as exc:
            # Back when the other delivery's in-progress record expires (or, if unknown, a job timeout).
            delay = min(
                MAX_RETRY_DELAY_SECONDS,
                math.ceil((exc.retry_after if exc.retry_after is not None else job.timeout) + 1),
            )
            log.info(
                "job %s (%s) is running in another delivery; checking again in %ds", env.id, env.type, delay
            )
            self._status(d, JobState.RETRYING, attempts=d.attempt - 1)
            self._emit(batch, d.outcome(Outcome.RETRIED, error=str(exc), delay=delay))
            if not self._hand_back(d, delay):
                raise RecordRetry(str(exc)) from exc
        except Exception as exc:  # a BaseException of the job arrives as JobAborted: the job's failure
            self._failed(d, job, exc, (time.perf_counter() - started) * 1000, batch)
        else:
            elapsed_ms = (time.perf_counter() - started) * 1000
            if not ran:
                log.info(
                    "job %s (%s) key %s already completed; duplicate delivery skipped",
                    env.id,
                    env.type,
                    env.key,
                )
            self._status(d, JobState.SUCCEEDED, attempts=d.attempt, result=result)
            if env.saga is not None:
                self._saga_hook(d, "completed", result=result)
            self._emit(
                batch,
                d.outcome(
                    Outcome.SUCCEEDED,
                    queue_wait_ms=queue_wait_ms,
                    processing_ms=elapsed_ms,
                    duplicate=not ran,
                ),
            )
        finally:
            logger.thread_safe_remove_keys(["job_id", "job_type", "job_key", "attempt", "trace_id"])
            if time.perf_counter() - started > job.timeout:
                batch.metrics.schedule_event(env.type, "Overrun")

    def _failed(self, d: _Delivery, job: Job[Any], exc: Exception, elapsed_ms: float, batch: _Batch) -> None:
        env = d.require_envelope()
        decision = classify(
            exc, attempt=d.attempt, policy=job.retry, permanent=job.permanent, transient=job.transient
        )
        error = describe(exc)
        max_attempts = job.retry.max_attempts
        if (
            decision.action is Action.RETRY
            and batch.budget is not None
            and not batch.budget.allow_retry(d.source)
        ):
            log.error(
                "job %s (%s) failed and the retry budget of %s is spent: %s",
                env.id,
                env.type,
                d.source,
                error,
            )
            self._give_up(d, Reason.BUDGET, error, batch, processing_ms=elapsed_ms)
            return
        if decision.action is Action.RETRY:
            delay = min(MAX_RETRY_DELAY_SECONDS, math.ceil(decision.delay))
            if decision.transient:
                log.warning(
                    "job %s (%s) attempt %d/%d failed, retry in %ds: %s",
                    env.id,
                    env.type,
                    d.attempt,
                    max_attempts,
                    delay,
                    error,
                )
            else:
                log.error(
                    "job %s (%s) attempt %d/%d failed, retry in %ds",
                    env.id,
                    env.type,
                    d.attempt,
                    max_attempts,
                    delay,
                    exc_info=exc,
                )
            copied = self._retry_later(d, delay)
            self._status(d, JobState.RETRYING, attempts=d.attempt, error=error)
            self._emit(batch, d.outcome(Outcome.RETRIED, error=error, delay=delay, processing_ms=elapsed_ms))
            if not copied:
                raise RecordRetry(f"job {env.id} retries in {delay}s") from exc
            return
        reason = decision.reason or Reason.EXHAUSTED
        log.error(
            "job %s (%s) dead-lettered (%s) after attempt %d: %s",
            env.id,
            env.type,
            reason.value,
            d.attempt,
            error,
        )
        self._give_up(d, reason, error, batch, processing_ms=elapsed_ms)

    @contextmanager
    def _held(self, d: _Delivery, job: Job[Any], context: Any) -> Iterator[KeyHold | None]:
        """Keep the job's key and message held while it runs (see :mod:`jobframework.heartbeat`)."""
        env, remaining = d.require_envelope(), _remaining_seconds(context)
        key = KeyHold(self.idempotency) if self.idempotency is not None and job.idempotent else None
        with heartbeat.hold(
            f"{env.id} ({env.type})",
            timeout=job.timeout,
            key_lapses_in=min(job.timeout + RELEASE_MARGIN_SECONDS, remaining),
            remaining=remaining,
            extend_key=key.extend if key is not None else None,
            extend_visibility=lambda seconds: self._change_visibility(d, seconds, strict=True),
        ):
            yield key

    def _hand_back(self, d: _Delivery, delay: int, *, deferred: int = 0) -> bool:
        """Hand the record back unrun as a fresh copy, not an attempt (:mod:`jobframework.attempts`).

        ``True``: the copy is sent and the original is to be acknowledged. ``False``: the copy failed and
        the record is handed back in place (this receive then counts as an attempt).
        """
        try:
            hand_back(
                self.sqs,
                self.queue_url(d.source),
                d.record,
                delay=delay,
                executions=d.attempt - 1,
                deferred=deferred,
            )
            return True
        except Exception:
            log.warning("handing %s back as a copy failed; handed back in place", d.message_id, exc_info=True)
            self._change_visibility(d, delay)
            return False

    def _retry_later(self, d: _Delivery, delay: int) -> bool:
        """Back off after an execution: in place, or (when the record has no receive count to grow) as a
        copy carrying this execution. ``True`` when a copy was sent (acknowledge the original)."""
        if receive_count(d.record) is None:
            try:
                hand_back(self.sqs, self.queue_url(d.source), d.record, delay=delay, executions=d.attempt)
                return True
            except Exception:
                log.warning("retrying %s as a copy failed; retried in place", d.message_id, exc_info=True)
        self._change_visibility(d, delay)
        return False

    def _refuse(self, d: _Delivery, reason: Reason, error: str, batch: _Batch) -> None:
        """Dead-letter a record before its job runs, logged as every dead letter is (same keys)."""
        with refusal_logged(d, reason, error, log):
            self._give_up(d, reason, error, batch)

    def _give_up(
        self,
        d: _Delivery,
        reason: Reason,
        error: str,
        batch: _Batch,
        processing_ms: float | None = None,
    ) -> None:
        """Dead-letter the record (then it is acknowledged) and report the outcome."""
        error = _safe_text(error)
        if d.envelope is not None and d.envelope.saga is not None:
            # Before the dead letter: if the saga cannot be told now, the record is retried, not doubled.
            self._saga_hook(d, "failed", reason=reason.value, error=error)
        self._dead_letter(d, reason, error)
        if d.envelope is not None:
            self._status(d, JobState.DEAD, attempts=d.attempt, error=error, reason=reason.value)
        self._emit(
            batch, d.outcome(Outcome.DEAD_LETTERED, reason=reason, error=error, processing_ms=processing_ms)
        )

    def _saga_hook(self, d: _Delivery, event: str, **details: Any) -> None:
        """Tell the saga its step completed (``result``: JSON summary) or failed for good.

        The job's effect is already done (and recorded by idempotency), so if the saga cannot be
        advanced now the record is retried: the job is then skipped as a duplicate and the saga
        advanced again, which its conditional writes make happen once.
        """
        from jobframework import saga

        env = d.require_envelope()
        try:
            saga.on_step_event(self, env, event, **details)
        except Exception as exc:
            log.error("advancing saga %s after step %s failed; retrying", env.saga, env.id, exc_info=True)
            self._change_visibility(d, 1)
            raise RecordRetry(f"saga {env.saga} not advanced: {exc}") from exc

    def _status(self, d: _Delivery, state: JobState, **fields: Any) -> None:
        """Note the job's status; the batch writes it when it ends (see :meth:`_flush_statuses`)."""
        if self.state is None or d.envelope is None or d.statuses is None:
            return
        env = d.envelope
        status = d.statuses.setdefault(
            env.id,
            {"id": env.id, "type": env.type, "key": env.key, "enqueued_at": env.enqueued_at.isoformat()},
        )
        status.update({k: v for k, v in fields.items() if v is not None}, status=state)
        if state in (JobState.SUCCEEDED, JobState.DEAD):
            status["finished_at"] = datetime.now(UTC).isoformat(timespec="milliseconds")
        if state is JobState.SUCCEEDED:
            status.pop("error", None)
            status.pop("reason", None)

    def _mark_running(self, records: list[dict[str, Any]], batch: _Batch) -> None:
        """Before the batch runs: one write marking every job in it ``running``."""
        if self.state is None:
            return
        now = datetime.now(UTC).isoformat(timespec="milliseconds")
        for record in records:
            try:
                env = parse_body(record.get("body"))
            except Exception:  # malformed: the record's own stage dead-letters it
                continue
            d = _Delivery.of(record)
            d.envelope, d.statuses = env, batch.statuses
            self._status(d, JobState.RUNNING, attempts=d.attempt, started_at=now)
        self._flush_statuses(batch)

    def _flush_statuses(self, batch: _Batch) -> None:
        """Write the batch's status records; a failure is logged, never fatal to the jobs."""
        if self.state is None or not batch.statuses:
            return
        try:
            self.state.put_statuses(list(batch.statuses.values()))
        except Exception:
            log.warning("recording the status of %d jobs failed", len(batch.statuses), exc_info=True)

    # -- SQS side effects ------------------------------------------------------------------------------

    def queue_url(self, queue_name: str) -> str:
        """The URL of a source queue named in a record's ARN (from the config, else GetQueueUrl)."""
        return self.queues.queue_url(queue_name)

    def dlq_url(self, queue_name: str) -> str:
        """The DLQ of a source queue: from the config, else from the queue's redrive policy."""
        return self.queues.dlq_url(queue_name)

    def _change_visibility(self, d: _Delivery, seconds: int, *, strict: bool = False) -> None:
        try:
            self.sqs.change_message_visibility(
                QueueUrl=self.queue_url(d.source),
                ReceiptHandle=str(d.record.get("receiptHandle", "")),
                VisibilityTimeout=int(seconds),
            )
        except Exception:
            if strict:
                raise
            # The record is still reported as failed: it returns when its current visibility runs out.
            log.warning("ChangeMessageVisibility of %s failed", d.message_id, exc_info=True)

    def _dead_letter(self, d: _Delivery, reason: Reason, error: str) -> None:
        """Send the record to its queue's DLQ, body byte for byte, with the reason attributes.

        If the send fails the record is reported as failed (it comes back; nothing is lost).
        """
        record, source = d.record, d.source
        message = dead_letter_message(record, reason, error, attempt=d.attempt, source=source)
        try:
            self.sqs.send_message(QueueUrl=self.dlq_url(source), **message)
        except Exception as exc:
            log.error(
                "dead-lettering %s (%s) failed; it will be retried",
                record.get("messageId"),
                reason.value,
                exc_info=True,
            )
            raise RecordRetry(f"dead-lettering failed: {exc}") from exc

    def _emit(self, batch: _Batch, outcome: RecordOutcome) -> None:
        metrics = batch.metrics
        job_type = outcome.job_type or "-"
        priority = outcome.priority or "-"
        if outcome.outcome == Outcome.SUCCEEDED:
            metrics.succeeded(job_type, priority, outcome.queue_wait_ms, outcome.processing_ms or 0.0)
        elif outcome.outcome == Outcome.RETRIED:
            metrics.retried(job_type, priority, outcome.processing_ms)
        elif outcome.outcome == Outcome.DEAD_LETTERED:
            metrics.dead_lettered(job_type, priority, str(outcome.reason))
        for listener in self.listeners:
            try:
                listener(outcome)
            except Exception:
                log.warning("consumer listener failed", exc_info=True)


def consumer(
    registry: JobRegistry | None = None,
    *,
    config: RuntimeConfig | None = None,
    sqs_client: SQSClient | None = None,
    job_modules: Iterable[str] | None = None,
    listeners: Iterable[Listener] = (),
) -> Consumer:
    """A Lambda handler for SQS events that runs registered jobs.

    Args:
        registry: the jobs it may run (the default registry when ``None``).
        config: queue URLs and tables (``RuntimeConfig.from_env()`` on first use when ``None``).
        sqs_client: a boto3 SQS client (one is made from the config when ``None``).
        job_modules: modules that register jobs, imported on the first invocation (``JF_JOBS``
            when ``None``).
        listeners: callables told each record's :class:`RecordOutcome`.

    Returns:
        A :class:`Consumer`: call it as ``handler(event, context)``, or apply it as a decorator to a
        ``lambda_handler(event, context)`` that then runs first on each invocation.
    """
    return Consumer(
        registry, config=config, sqs_client=sqs_client, job_modules=job_modules, listeners=listeners
    )


__all__ = [
    "KEPT_ATTRIBUTES",  # from jobframework.dead_letter, re-exported for older imports
    "Consumer",
    "Outcome",
    "Priority",
    "RecordOutcome",
    "RecordRetry",
    "_fit_dead_letter",  # from jobframework.dead_letter, re-exported for older imports
    "arn_queue_name",  # from jobframework.delivery, re-exported for older imports
    "consumer",
]
