"""``JobClient``: enqueue jobs onto their priority queues.

Every enqueue validates the payload against the job's model before anything is
sent (a bad payload is a :class:`PayloadValidationError`, a ``ValueError``),
refuses messages over the SQS limit, injects the trace context, and routes by
priority. ``enqueue_many`` sends ten per ``SendMessageBatch`` call and retries the
entries a batch reports as failed.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from jobframework import envelope as wire
from jobframework.config import RuntimeConfig
from jobframework.envelope import Envelope, SagaRef
from jobframework.errors import (
    ConfigurationError,
    EnqueueError,
    PayloadTooLargeError,
    PayloadValidationError,
    UnknownJobError,
)
from jobframework.jobs import Job, JobRegistry, Priority, parse_priority
from jobframework.jobs import registry as default_registry
from jobframework.retry import compute_backoff
from jobframework.tracing import current as current_trace
from jobframework.tracing import to_xray_header

if TYPE_CHECKING:
    import boto3
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import SendMessageBatchRequestEntryTypeDef

log = logging.getLogger(__name__)

MAX_DELAY_SECONDS = 900
"""SQS DelaySeconds limit (15 minutes)."""
BATCH_ENTRIES = 10


def delay_seconds(delay: float | timedelta | None) -> int:
    """A delay as whole seconds for SQS ``DelaySeconds``.

    Raises:
        ConfigurationError: negative, not a number, or longer than 15 minutes.
    """
    if delay is None:
        return 0
    seconds = delay.total_seconds() if isinstance(delay, timedelta) else delay
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or math.isnan(seconds):
        raise ConfigurationError(f"delay must be seconds (a number) or a timedelta, got {delay!r}")
    if seconds < 0:
        raise ConfigurationError(f"delay must be >= 0 seconds, got {seconds:g}")
    if seconds > MAX_DELAY_SECONDS:
        raise ConfigurationError(
            f"delay {seconds:g}s is over SQS's 15-minute limit ({MAX_DELAY_SECONDS}s); "
            "enqueue it later or use a schedule"
        )
    return round(seconds)


@dataclass(frozen=True, slots=True)
class EnqueueResult:
    """What became of one enqueue. ``error`` is set (and ``ok`` false) when SQS refused it."""

    id: str
    key: str
    job_type: str
    priority: Priority
    message_id: str | None = None
    duplicate: bool = False
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(slots=True)
class EnqueueRequest:
    """One job to send with :meth:`JobClient.enqueue_many`."""

    job: Job[Any] | str
    payload: BaseModel | dict[str, Any]
    key: str | None = None
    delay: float | timedelta | None = None
    priority: Priority | str | None = None
    saga: SagaRef | None = None
    job_id: str | None = None


@dataclass(slots=True)
class _Prepared:
    envelope: Envelope
    priority: Priority
    queue_url: str
    body: str
    attributes: dict[str, Any]
    delay: int
    xray: str | None
    extra: dict[str, Any] = field(default_factory=dict)

    def result(self, message_id: str | None = None, error: str | None = None) -> EnqueueResult:
        return EnqueueResult(
            self.envelope.id, self.envelope.key, self.envelope.type, self.priority, message_id, error=error
        )


class JobClient:
    """Sends jobs to their queues.

    Args:
        config: where the queues are (``RuntimeConfig.from_env()`` when ``None``).
        registry: the jobs that can be named by string (the default registry when ``None``).
        session: a boto3 session to make the SQS client from.
        sqs_client: an SQS client to use as is (tests, custom retry config).
        batch_retries: how many times ``enqueue_many`` resends entries a batch reports as failed.

    Example:
        >>> client = JobClient(config)                         # doctest: +SKIP
        >>> client.enqueue("reports.generate", {"report_id": "r-1"}).id  # doctest: +SKIP
    """

    def __init__(
        self,
        config: RuntimeConfig | None = None,
        *,
        registry: JobRegistry | None = None,
        session: boto3.Session | None = None,
        sqs_client: SQSClient | None = None,
        batch_retries: int = 3,
    ) -> None:
        self.config = config if config is not None else RuntimeConfig.from_env()
        self.registry = registry if registry is not None else default_registry
        self._session = session
        self._sqs = sqs_client
        self.batch_retries = batch_retries

    @property
    def sqs(self) -> SQSClient:
        if self._sqs is None:
            import boto3

            session = self._session or boto3.Session()
            self._sqs = session.client(
                "sqs", endpoint_url=self.config.endpoint_url, region_name=self.config.region
            )
        return self._sqs

    def job(self, job: Job[Any] | str) -> Job[Any]:
        if isinstance(job, Job):
            return job
        try:
            return self.registry.get(job)
        except UnknownJobError:
            known = ", ".join(j.name for j in self.registry) or "none"
            raise UnknownJobError(f"no job named {job!r} is registered (known: {known})") from None

    # -- preparing a message --------------------------------------------------------------------------

    def prepare(self, request: EnqueueRequest) -> _Prepared:
        """Validate, build the envelope and attributes, check the size; sends nothing."""
        job = self.job(request.job)
        try:
            payload = job.validate(request.payload)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'payload'}: {e['msg']}" for e in exc.errors()[:10]
            )
            raise PayloadValidationError(
                f"payload for {job.name} does not match {job.payload_model.__name__}: {problems}"
            ) from exc
        priority = parse_priority(request.priority) if request.priority is not None else job.priority
        key = request.key if request.key is not None else job.key_for(payload)
        if key is not None and (not isinstance(key, str) or not key or len(key) > 1024):
            raise ConfigurationError(f"key must be a non-empty str of at most 1024 characters, got {key!r}")
        env = Envelope.new(
            job.name, payload.model_dump(mode="json"), key=key, saga=request.saga, job_id=request.job_id
        )
        trace = current_trace()
        body = env.to_body()
        attributes = wire.send_attributes(env, trace.as_attributes())
        size = wire.message_size(body, attributes)
        if size > wire.SQS_MAX_MESSAGE_BYTES:
            raise PayloadTooLargeError(
                f"{job.name} message is {size:,} bytes, over the SQS limit of "
                f"{wire.SQS_MAX_MESSAGE_BYTES:,}; "
                "store the data elsewhere (e.g. S3) and enqueue a reference to it"
            )
        return _Prepared(
            envelope=env,
            priority=priority,
            queue_url=self.config.endpoints(priority).url,
            body=body,
            attributes=attributes,
            delay=delay_seconds(request.delay),
            xray=to_xray_header(trace) if trace.xray_header else None,
        )

    # -- sending --------------------------------------------------------------------------------------

    def enqueue(
        self,
        job: Job[Any] | str,
        payload: BaseModel | dict[str, Any],
        *,
        key: str | None = None,
        delay: float | timedelta | None = None,
        priority: Priority | str | None = None,
    ) -> EnqueueResult:
        """Send one job.

        Args:
            job: the job or its registered name.
            payload: the job's model, or a dict validated against it.
            key: the idempotency/dedup key (the job's ``key=`` function, else the job id, when ``None``).
            delay: seconds (or ``timedelta``) before the job becomes visible, at most 900.
            priority: send to another priority's queue than the job's own.

        Raises:
            PayloadValidationError: the payload does not match (nothing sent).
            PayloadTooLargeError: the message is over 1 MiB (nothing sent).
            ConfigurationError: a bad delay, key or priority.
            UnknownJobError: no job of that name.
            EnqueueError: SQS failed to take it.
        """
        prepared = self.prepare(EnqueueRequest(job, payload, key=key, delay=delay, priority=priority))
        kwargs: dict[str, Any] = {
            "QueueUrl": prepared.queue_url,
            "MessageBody": prepared.body,
            "MessageAttributes": prepared.attributes,
        }
        if prepared.delay:
            kwargs["DelaySeconds"] = prepared.delay
        if prepared.xray:
            kwargs["MessageSystemAttributes"] = {"AWSTraceHeader": wire.string_attribute(prepared.xray)}
        try:
            response = self.sqs.send_message(**kwargs)
        except Exception as exc:
            raise EnqueueError(
                f"sending {prepared.envelope.type} job {prepared.envelope.id} failed: {exc}"
            ) from exc
        log.debug("enqueued %s job %s", prepared.envelope.type, prepared.envelope.id)
        return prepared.result(response.get("MessageId"))

    def enqueue_many(self, requests: Iterable[EnqueueRequest]) -> list[EnqueueResult]:
        """Send many jobs, ten per ``SendMessageBatch``, in the order given.

        Every payload is validated before anything is sent. Entries a batch reports as failed are
        resent up to ``batch_retries`` times with backoff (unless SQS says the entry itself is at fault);
        what still fails comes back as a result with ``error`` set.
        """
        prepared = [self.prepare(r) for r in requests]
        results: list[EnqueueResult | None] = [None] * len(prepared)
        pending = list(range(len(prepared)))
        for round_ in range(self.batch_retries + 1):
            if not pending:
                break
            if round_:
                time.sleep(compute_backoff(round_, base_delay=0.05, max_delay=1.0))
            failed: list[int] = []
            for batch in self._batches(prepared, pending):
                failed.extend(self._send_batch(prepared, batch, results, final=round_ == self.batch_retries))
            pending = failed
        return [r if r is not None else prepared[i].result(error="not sent") for i, r in enumerate(results)]

    def _batches(self, prepared: Sequence[_Prepared], indexes: list[int]) -> Iterable[list[int]]:
        """Groups of at most ten entries of one queue and at most 1 MiB together."""
        by_queue: dict[str, list[int]] = {}
        for i in indexes:
            by_queue.setdefault(prepared[i].queue_url, []).append(i)
        for group in by_queue.values():
            batch: list[int] = []
            size = 0
            for i in group:
                entry_size = wire.message_size(prepared[i].body, prepared[i].attributes)
                if batch and (len(batch) == BATCH_ENTRIES or size + entry_size > wire.SQS_MAX_MESSAGE_BYTES):
                    yield batch
                    batch, size = [], 0
                batch.append(i)
                size += entry_size
            if batch:
                yield batch

    def _send_batch(
        self,
        prepared: Sequence[_Prepared],
        batch: list[int],
        results: list[EnqueueResult | None],
        *,
        final: bool,
    ) -> list[int]:
        entries: list[SendMessageBatchRequestEntryTypeDef] = []
        for n, i in enumerate(batch):
            p = prepared[i]
            entry: SendMessageBatchRequestEntryTypeDef = {
                "Id": str(n),
                "MessageBody": p.body,
                "MessageAttributes": p.attributes,
            }
            if p.delay:
                entry["DelaySeconds"] = p.delay
            if p.xray:
                entry["MessageSystemAttributes"] = {
                    "AWSTraceHeader": {"DataType": "String", "StringValue": p.xray}
                }
            entries.append(entry)
        try:
            response = self.sqs.send_message_batch(QueueUrl=prepared[batch[0]].queue_url, Entries=entries)
        except Exception as exc:
            if final:
                for i in batch:
                    results[i] = prepared[i].result(error=f"SendMessageBatch failed: {exc}")
                return []
            log.warning("SendMessageBatch of %d entries failed, retrying: %s", len(batch), exc)
            return batch
        for ok in response.get("Successful", []):
            i = batch[int(ok["Id"])]
            results[i] = prepared[i].result(ok["MessageId"])
        retry: list[int] = []
        for bad in response.get("Failed", []):
            i = batch[int(bad["Id"])]
            error = f"{bad.get('Code')}: {bad.get('Message', '')}"
            if bad.get("SenderFault") or final:
                results[i] = prepared[i].result(error=error)
            else:
                log.info("batch entry for job %s failed (%s), retrying", prepared[i].envelope.id, error)
                retry.append(i)
        return retry


_default: JobClient | None = None


def default_client() -> JobClient:
    """The client ``my_job.enqueue(...)`` uses: configured from ``JF_*`` variables on first use."""
    global _default
    if _default is None:
        _default = JobClient()
    return _default


def set_default_client(client: JobClient | None) -> None:
    """Replace (or, with ``None``, forget) the client that ``my_job.enqueue`` uses."""
    global _default
    _default = client
