"""The Lambda consumer: every record of an SQS batch ends succeeded, retried or dead-lettered.

``consumer()`` returns a Lambda handler for SQS events with partial batch responses. A batch goes
through two parts:

* the **pipeline** (:mod:`jobframework.pipeline`), per record and independently of its neighbours:
  parse, verify, load the payload, the **gates** (:mod:`jobframework.gates`: the interface other checks
  plug into), execute, classify; each stage may end the record with a verdict
  (:mod:`jobframework.verdict`: succeeded, retry after a delay, release, dead-letter with a reason).
  The records of a batch run concurrently, bounded per lane (:mod:`jobframework.concurrency`);
  batched jobs (:mod:`jobframework.batched`) run their records in one call;
* the **settler** (:mod:`jobframework.settler`), once per batch: ``SendMessageBatch`` to the DLQs,
  hand-back copies, ``ChangeMessageVisibilityBatch``, one status write, the metrics, the saga and
  listener hooks; the partial batch response names only what did not settle.

Use it directly::

    lambda_handler = consumer()

or as a decorator whose function runs first on each invocation (per-invocation setup)::

    @consumer()
    def lambda_handler(event, context):
        configure_something(context)
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from jobframework.aws_clients import AwsClients
from jobframework.batched import has_batched_jobs, run_batched
from jobframework.budget import BatchBudget, FirstAttempts, RetryBudget
from jobframework.concurrency import checked_concurrency, lane_limit, run_all
from jobframework.config import ENV_JOBS, RuntimeConfig
from jobframework.dead_letter import KEPT_ATTRIBUTES
from jobframework.delivery import (
    Batch,
    Delivery,
    Listener,
    Outcome,
    RecordOutcome,
    RecordRetry,
    arn_queue_name,
    identified_records,
    remaining_seconds_of,
)
from jobframework.early_status import EarlyStatuses
from jobframework.fifo import fifo_verdicts, is_fifo_batch
from jobframework.gates import DEFAULT_GATES, DEFER_SECONDS, RELEASE_MARGIN_SECONDS, Admitted, Gate
from jobframework.jobs import JobRegistry, Priority
from jobframework.jobs import registry as default_registry
from jobframework.modules import import_job_modules
from jobframework.pipeline import Pipeline
from jobframework.queues import QueueDirectory, env_config
from jobframework.settler import Settler
from jobframework.state import StateStore
from jobframework.telemetry import BatchMetrics, job_logger, log_keys_context
from jobframework.tracing import recording_api
from jobframework.verdict import Kind, Verdict, returned

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

    from jobframework.client import JobClient
    from jobframework.idempotency import IdempotentRunner
    from jobframework.signing import KeySource

log = logging.getLogger(__name__)

FIRST_ATTEMPTS_EVERY_SECONDS = 10.0
"""How long a process may hold first attempts before writing them to the retry budget's counter."""


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
        gates: Sequence[Gate] = DEFAULT_GATES,
        concurrency: Mapping[str, int] | int | None = None,
        state: StateStore | None = None,
    ) -> None:
        self.registry = registry if registry is not None else default_registry
        self._config = config
        self._sqs = sqs_client
        self._enqueuer: JobClient | None = None
        self._job_modules = list(job_modules) if job_modules is not None else None
        self._modules_loaded = False
        self.listeners = list(listeners)
        self._setup = setup
        self.gates = list(gates)
        self._concurrency = checked_concurrency(concurrency)  # (and JF_CONCURRENCY's, from the environment)
        self.queues = QueueDirectory(
            lambda: self._config if self._config is not None else env_config(), lambda: self.sqs
        )
        self.aws = AwsClients(
            clients={"sqs": sqs_client}, endpoint_url=self._endpoint_url, region=self._region
        )
        """Where the consumer's boto3 clients come from (made on first use, with the config then)."""
        self._features_ready = False
        self._setup_lock = threading.RLock()
        self._batched = False
        self._batched_count = -1
        self.state: StateStore | None = state
        self.idempotency: IdempotentRunner | None = None
        self.keys: KeySource | None = None
        self.payload_bucket: str | None = None  # (a payload offloaded elsewhere is refused: malformed)
        self.retry_budget: RetryBudget | None = None
        self.first_attempts = FirstAttempts(every=FIRST_ATTEMPTS_EVERY_SECONDS)
        """This process's first attempts for the retry budget, written every few seconds, not per batch."""
        self.pipeline = Pipeline(self, self.gates)
        self.settler = Settler(self)

    # -- configuration, resolved on the first invocation ------------------------------------------------

    @property
    def config(self) -> RuntimeConfig:
        if self._config is None:
            self._config = RuntimeConfig.from_env()
        return self._config

    def _endpoint_url(self) -> str | None:
        config = self._config if self._config is not None else env_config()
        return (config.endpoint_url if config else None) or os.environ.get("JF_ENDPOINT_URL")

    def _region(self) -> str | None:
        config = self._config if self._config is not None else env_config()
        return config.region if config else None

    def _client(self, service: str) -> Any:
        return self.aws.client(service)

    @property
    def sqs(self) -> SQSClient:
        return self.aws.client("sqs")  # type: ignore[no-any-return]

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
            self.payload_bucket = config.payload_bucket
            if config.state_table and self.state is None:
                self.state = StateStore.of(config, self.aws.lazy("dynamodb"))
            if config.idempotency_table:
                from jobframework.idempotency import IdempotentRunner

                self.idempotency = IdempotentRunner(config.idempotency_table, self.aws.lazy("dynamodb"))
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
                gates=self.gates,
                concurrency=self._concurrency,
            )
        return self.handle(event, context)

    def handle(self, event: Mapping[str, Any], context: Any = None) -> dict[str, list[dict[str, str]]]:
        """Process one SQS event; returns ``{"batchItemFailures": [{"itemIdentifier": id}, ...]}``."""
        with self._enqueues_here():  # (the setup hook's, the jobs' and the listeners' enqueues)
            return self._handle(event, context)

    def _handle(self, event: Mapping[str, Any], context: Any) -> dict[str, list[dict[str, str]]]:
        self._load_modules()
        if self._setup is not None:
            self._setup(dict(event), context)
        records = event.get("Records") if isinstance(event, Mapping) else None
        if not isinstance(records, list):
            raise ValueError("not an SQS event: it has no 'Records' list")
        records = identified_records(records)
        if not records:  # nothing that Lambda could be told about: no failures
            return {"batchItemFailures": []}
        self._features()
        job_logger()  # (routes the framework's records through its handler, with the job's keys)
        batch = Batch(
            BatchMetrics(),
            (
                BatchBudget(self.retry_budget, self.state, first_attempts=self.first_attempts)
                if self.retry_budget and self.state
                else None
            ),
            otel=recording_api(),
            log_keys=log_keys_context(),
            hard_end=time.monotonic() + remaining_seconds_of(context),
        )
        failures: list[str] = []
        try:
            verdicts = self._verdicts(records, context, batch)
            failures = self.settler.settle(verdicts, batch)
        finally:
            self._flush_statuses(batch)
            batch.metrics.flush()
            if batch.budget is not None:
                batch.budget.flush()
        return {"batchItemFailures": [{"itemIdentifier": m} for m in failures]}

    def _enqueues_here(self) -> contextlib.AbstractContextManager[None]:
        """Jobs that enqueue (``other_job.enqueue(...)``, also from the setup hook and listeners) send to
        this consumer's topology when it was given one (``config=``: ``jf dev``, ``jf worker``, a test's
        handler); in Lambda the ``JF_*`` variables say the same."""
        if self._config is None:
            return contextlib.nullcontext()
        from jobframework.default_client import enqueues_with

        return enqueues_with(self.jobs_client)

    def jobs_client(self) -> JobClient:
        """The client of this consumer's configuration and SQS client: what its jobs enqueue with
        (given ``config=``) and what advances its sagas; made at its first use."""
        if self._enqueuer is None:
            from jobframework.client import JobClient

            self._enqueuer = JobClient(self.config, registry=self.registry, sqs_client=self.sqs)
        return self._enqueuer

    def _verdicts(self, records: list[dict[str, Any]], context: Any, batch: Batch) -> list[Verdict]:
        """One verdict per record, in the records' order: batched jobs first, the rest concurrently."""
        # A tracked job's status is written soon after it ends, however long its batch runs.
        early = EarlyStatuses(self.state) if self.state is not None else None

        def process(record: dict[str, Any]) -> Verdict:
            # (an idempotent job's run registers its context with Powertools, on its own thread, first)
            verdict = self.pipeline.process(record, context, batch)
            if early is not None:
                early.offer(verdict)
            return verdict

        done: dict[str, Verdict] = {}
        try:
            if self._has_batched_jobs():
                done = run_batched(self.pipeline, records, context, batch)
                if early is not None:  # (a batched job's items ended before the rest of the batch runs)
                    for ended in done.values():
                        early.offer(ended)
            rest = [r for r in records if r["messageId"] not in done]
            lane = self._lane_of(rest)
            limit = lane_limit(lane, len(rest), self._concurrency)
            if is_fifo_batch(rest):  # groups in order, a failure holding back its own group
                done.update(fifo_verdicts(rest, process, limit, lane=lane, state=self.state))
                return [done[r["messageId"]] for r in records]
            if limit > 1:
                batch.together = rest
            for record, settled in zip(rest, run_all(rest, process, limit, lane=lane), strict=True):
                done[record["messageId"]] = settled or returned(Delivery.of(record), "not processed")
        finally:
            if early is not None:
                early.close()
        return [done[r["messageId"]] for r in records]

    def _lane_of(self, records: list[dict[str, Any]]) -> str | None:
        """The lane of a batch's records (a batch comes from one queue), from the configuration."""
        if not records:
            return None
        source = arn_queue_name(str(records[0].get("eventSourceARN", "")))
        return self.queues.source_of(source)[1] or source

    def _has_batched_jobs(self) -> bool:
        if self._batched_count != len(self.registry):
            self._batched = has_batched_jobs(self.registry)
            self._batched_count = len(self.registry)
        return self._batched

    # -- SQS side effects ------------------------------------------------------------------------------

    def queue_url(self, queue_name: str) -> str:
        """The URL of a source queue named in a record's ARN (from the config, else GetQueueUrl)."""
        return self.queues.queue_url(queue_name)

    def dlq_url(self, queue_name: str) -> str:
        """The DLQ of a source queue: from the config, else from the queue's redrive policy."""
        return self.queues.dlq_url(queue_name)

    def change_visibility(self, d: Delivery, seconds: int) -> None:
        """One record's visibility, now (the heartbeat's; raises on failure, which the beat logs)."""
        self.sqs.change_message_visibility(
            QueueUrl=self.queue_url(d.source),
            ReceiptHandle=str(d.record.get("receiptHandle", "")),
            VisibilityTimeout=int(seconds),
        )

    # -- job status ------------------------------------------------------------------------------------

    def _flush_statuses(self, batch: Batch) -> None:
        """Write the batch's status records (tracked jobs' outcomes) in one ``BatchWriteItem``; a
        failure is logged, never fatal to the jobs. Untracked jobs have none: a lean batch writes
        nothing to DynamoDB."""
        if self.state is None or not batch.statuses:
            return
        try:
            self.state.put_statuses(list(batch.statuses.values()))
        except Exception:
            log.warning("recording the status of %d jobs failed", len(batch.statuses), exc_info=True)


def consumer(
    registry: JobRegistry | None = None,
    *,
    config: RuntimeConfig | None = None,
    sqs_client: SQSClient | None = None,
    job_modules: Iterable[str] | None = None,
    listeners: Iterable[Listener] = (),
    gates: Sequence[Gate] = DEFAULT_GATES,
    concurrency: Mapping[str, int] | int | None = None,
    state: StateStore | None = None,
) -> Consumer:
    """A Lambda handler for SQS events that runs registered jobs.

    Args:
        registry: the jobs it may run (the default registry when ``None``).
        config: queue URLs and tables (``RuntimeConfig.from_env()`` on first use when ``None``).
        sqs_client: a boto3 SQS client (one is made from the config when ``None``).
        job_modules: modules that register jobs, imported on the first invocation (``JF_JOBS``
            when ``None``).
        listeners: callables told each record's :class:`RecordOutcome`.
        gates: the checks run after a record's payload is loaded and before its job runs, in order
            (:mod:`jobframework.gates`; :data:`~jobframework.gates.DEFAULT_GATES` unless given).
        concurrency: how many records of a batch run at once: a number for every lane, or one per
            lane name (``{"high": 4}``); by default an ``io`` lane runs a whole batch at once and a
            ``cpu`` lane one record at a time (:mod:`jobframework.concurrency`).
        state: the state table's store (one on ``config.state_table`` when ``None``); tests pass one
            whose job records are in memory (``StateStore(table, client, jobs=InMemoryJobRecords())``).

    Returns:
        A :class:`Consumer`: call it as ``handler(event, context)``, or apply it as a decorator to a
        ``lambda_handler(event, context)`` that then runs first on each invocation.
    """
    return Consumer(
        registry,
        config=config,
        sqs_client=sqs_client,
        job_modules=job_modules,
        listeners=listeners,
        gates=gates,
        concurrency=concurrency,
        state=state,
    )


__all__ = [
    "DEFAULT_GATES",
    "DEFER_SECONDS",  # from jobframework.gates, re-exported for older imports
    "KEPT_ATTRIBUTES",  # from jobframework.dead_letter, re-exported for older imports
    "RELEASE_MARGIN_SECONDS",  # from jobframework.gates, re-exported for older imports
    "Admitted",
    "Consumer",
    "Gate",
    "Kind",
    "Outcome",
    "Priority",
    "RecordOutcome",
    "RecordRetry",
    "Verdict",
    "arn_queue_name",  # from jobframework.delivery, re-exported for older imports
    "consumer",
]
