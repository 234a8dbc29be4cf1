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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from jobframework import envelope as wire
from jobframework.config import RuntimeConfig
from jobframework.dead_letter import REASON_ATTRIBUTES_BYTES
from jobframework.envelope import Envelope, SagaRef
from jobframework.errors import (
    ConfigurationError,
    EnqueueError,
    PayloadTooLargeError,
    PayloadValidationError,
)
from jobframework.flow.enqueue import flow_fields, tenant_of
from jobframework.flow.ordered import check_ordered_request, deduplication_id, is_ordered, message_group
from jobframework.idempotency import DEFAULT_EXPIRY_SECONDS
from jobframework.jobs import Job, JobRegistry, Priority, lane_name, parse_priority
from jobframework.jobs import registry as default_registry
from jobframework.retry import compute_backoff
from jobframework.signing import ATTR_KID, ATTR_SIG
from jobframework.state import JobState, JobStatus, StateStore
from jobframework.tracing import current as current_trace
from jobframework.tracing import to_xray_header
from jobframework.validation import validation_problems

if TYPE_CHECKING:
    import boto3
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import SendMessageBatchRequestEntryTypeDef

    from jobframework.catalog import JobCatalog, RoutedJob
    from jobframework.flow.cancel import CancelResult
    from jobframework.saga import SagaRecord
    from jobframework.signing import KeySource

log = logging.getLogger(__name__)

MAX_DELAY_SECONDS = 900
"""SQS DelaySeconds limit (15 minutes); longer delays go through EventBridge Scheduler."""
MAX_SCHEDULED_DELAY_SECONDS = 365 * 24 * 3600
"""The longest delay a job can be given (one year)."""
BATCH_ENTRIES = 10
DEFAULT_DEDUP_WINDOW = float(DEFAULT_EXPIRY_SECONDS)
"""Seconds an enqueue given an explicit ``key=`` dedups for by default: as long as the consumer's
idempotency record of a completed job lasts (24 hours)."""
MAX_DEDUP_WINDOW = 7 * 24 * 3600
MAX_ENQUEUE_BYTES = wire.SQS_MAX_MESSAGE_BYTES - REASON_ATTRIBUTES_BYTES
"""The largest message the client sends (body and attributes, signature included): SQS's 1 MiB less
the room its dead letter needs for the reason attributes, so that a dead letter keeps everything it
must (signature, trace, type) and is never cut to fit."""


def delay_seconds(delay: float | timedelta | None) -> int:
    """A delay as whole seconds (up to 900 via SQS ``DelaySeconds``, up to a year via Scheduler).

    Raises:
        ConfigurationError: negative, not a number, or longer than a year.
    """
    if delay is None:
        return 0
    seconds = delay.total_seconds() if isinstance(delay, timedelta) else delay
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or math.isnan(seconds):
        raise ConfigurationError(f"delay must be seconds (a number) or a timedelta, got {delay!r}")
    if seconds < 0:
        raise ConfigurationError(f"delay must be >= 0 seconds, got {seconds:g}")
    if seconds > MAX_SCHEDULED_DELAY_SECONDS:
        raise ConfigurationError(
            f"delay {seconds:g}s is over the one-year limit ({MAX_SCHEDULED_DELAY_SECONDS}s); "
            "use a recurring schedule or enqueue it later"
        )
    return round(seconds)


def _window(value: float | timedelta) -> float:
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or math.isnan(seconds):
        raise ConfigurationError(f"dedup_window must be seconds (a number) or a timedelta, got {value!r}")
    if not 0 <= seconds <= MAX_DEDUP_WINDOW:
        raise ConfigurationError(
            f"dedup_window must be 0 (off) to 7 days ({MAX_DEDUP_WINDOW:,} s), got {seconds:g}"
        )
    return float(seconds)


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
    dedup_window: float | timedelta | None = None
    expires_in: float | timedelta | None = None
    debounce: float | timedelta | None = None
    tenant: str | None = None
    track: bool | None = None
    group: str | None = None


@dataclass(slots=True)
class _Prepared:
    envelope: Envelope
    priority: Priority
    queue_url: str
    body: str
    attributes: dict[str, Any]
    delay: int
    xray: str | None
    trace_id: str | None = None
    dedup_window: float | None = None
    group: str | None = None
    """``MessageGroupId``: the tenant on a standard queue (SQS fair queues), the ordered group on a
    FIFO lane."""
    dedup_id: str | None = None
    """``MessageDeduplicationId`` on a FIFO lane (:func:`jobframework.flow.ordered.deduplication_id`)."""

    @property
    def scheduled(self) -> bool:
        """Delayed beyond SQS's 15 minutes: sent by an EventBridge Scheduler one-time schedule."""
        return self.delay > MAX_DELAY_SECONDS

    @property
    def batchable(self) -> bool:
        """Sent by ``SendMessageBatch`` in ``enqueue_many`` (a dedup key is claimed first)."""
        return not self.scheduled and self.envelope.debounce is None

    @property
    def deduplicated(self) -> bool:
        return self.dedup_window is not None

    def result(
        self, message_id: str | None = None, error: str | None = None, duplicate_of: str | None = None
    ) -> EnqueueResult:
        env = self.envelope
        if duplicate_of is not None:
            return EnqueueResult(duplicate_of, env.key, env.type, self.priority, None, duplicate=True)
        return EnqueueResult(env.id, env.key, env.type, self.priority, message_id, error=error)


def _payload(
    job: Job[Any] | RoutedJob, payload: BaseModel | dict[str, Any]
) -> tuple[dict[str, Any], str | None]:
    """The payload as JSON data and the key the job's ``key=`` function gives (validated first).

    Raises:
        PayloadValidationError: it does not match the job's model (or its catalog schema).
    """
    if not isinstance(job, Job):
        return job.validate(payload), None
    try:
        model = job.validate(payload)
    except ValidationError as exc:
        raise PayloadValidationError(
            f"payload for {job.name} does not match {job.payload_model.__name__}: {validation_problems(exc)}"
        ) from exc
    return model.model_dump(mode="json"), job.key_for(model)


class JobClient:
    """Sends jobs to their queues.

    Args:
        config: where the queues are (``RuntimeConfig.from_env()`` when ``None``).
        registry: the jobs that can be named by string (the default registry when ``None``).
        session: a boto3 session to make the SQS client from.
        sqs_client: an SQS client to use as is (tests, custom retry config).
        clients: other boto3 clients to use as is, by service name (``dynamodb``, ``s3``,
            ``scheduler``); the others are made from ``session`` when first needed.
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
        clients: Mapping[str, Any] | None = None,
        batch_retries: int = 3,
    ) -> None:
        self.config = config if config is not None else RuntimeConfig.from_env()
        self.registry = registry if registry is not None else default_registry
        self._session = session
        self._sqs = sqs_client
        self._clients: dict[str, Any] = dict(clients or {})
        self.batch_retries = batch_retries
        self._catalog: JobCatalog | None = None
        self._warned_no_dedup = False
        self._keys: KeySource | None = None
        if self.config.signing_keys:
            from jobframework.signing import KeySource

            self._keys = KeySource(
                self.config.signing_keys, session=session, endpoint_url=self.config.endpoint_url
            )

    @property
    def sqs(self) -> SQSClient:
        if self._sqs is None:
            import boto3

            session = self._session or boto3.Session()
            self._sqs = session.client(
                "sqs", endpoint_url=self.config.endpoint_url, region_name=self.config.region
            )
        return self._sqs

    def _client(self, service: str) -> Any:
        client = self._clients.get(service)
        if client is None:
            import boto3

            session = self._session or boto3.Session()
            client = session.client(  # type: ignore[call-overload]
                service, endpoint_url=self.config.endpoint_url, region_name=self.config.region
            )
            self._clients[service] = client
        return client

    @property
    def state(self) -> StateStore | None:
        """The state table (job status, dedup markers), when one is configured."""
        if not self.config.state_table:
            return None
        return StateStore(self.config.state_table, self._client("dynamodb"))

    def status(self, job_id: str) -> JobStatus | None:
        """What is known of a job: queued, scheduled, running, retrying, succeeded or dead.

        Returns ``None`` for an id the state table does not know (or that expired).

        Raises:
            ConfigurationError: no state table is configured.
        """
        state = self.state
        if state is None:
            raise ConfigurationError("job status needs the state table: set JF_STATE_TABLE")
        if not isinstance(job_id, str) or not 0 < len(job_id) <= 128:
            raise ConfigurationError(f"a job id is a string of 1 to 128 characters, got {job_id!r}")
        return state.get_status(job_id)

    def cancel(self, job_id: str) -> CancelResult:
        """Cancel a job: if it has not started it never will (status ``cancelled``); if it is running,
        its ``ctx.cancelled`` turns true so that it may stop, and no further attempt starts.

        Race-safe with a start (one conditional write decides) and idempotent; see
        :mod:`jobframework.flow.cancel`. The result's ``outcome`` says which of ``cancelled``,
        ``signalled`` or ``finished`` (too late: nothing changed) it came to.

        Raises:
            ConfigurationError: no state table is configured, or a bad id.
        """
        from jobframework.flow.cancel import cancel

        state = self.state
        if state is None:
            raise ConfigurationError("cancel needs the state table: set JF_STATE_TABLE")
        if not isinstance(job_id, str) or not 0 < len(job_id) <= 128:
            raise ConfigurationError(f"a job id is a string of 1 to 128 characters, got {job_id!r}")
        return cancel(state, job_id)

    def saga_status(self, saga_id: str) -> SagaRecord | None:
        """A saga's record: status, steps (state, output, attempts, error, timings), signals, trace.

        Returns ``None`` for an id the state table does not know (or that expired).

        Raises:
            ConfigurationError: no state table is configured.
        """
        from jobframework.saga import load_saga

        state = self.state
        if state is None:
            raise ConfigurationError("saga status needs the state table: set JF_STATE_TABLE")
        return load_saga(state, saga_id)

    def job(self, job: Job[Any] | str) -> Job[Any] | RoutedJob:
        """The job of a name: this process's registry, else the topology's job catalog (no import).

        Raises:
            UnknownJobError: in neither; the message says where the client looked and what to set.
        """
        if isinstance(job, Job):
            return job
        found = self.registry.find(job)
        if found is not None:
            return found
        if self._catalog is None:
            from jobframework.catalog import JobCatalog

            self._catalog = JobCatalog(self.config, lambda: self._client("ssm"))
        return self._catalog.get(job, known=[j.name for j in self.registry])

    # -- preparing a message --------------------------------------------------------------------------

    def prepare(self, request: EnqueueRequest) -> _Prepared:
        """Validate, build the envelope and attributes, check the size; sends nothing."""
        job = self.job(request.job)
        data, job_key = _payload(job, request.payload)
        priority = parse_priority(request.priority) if request.priority is not None else job.priority
        key = request.key if request.key is not None else job_key
        if key is not None and (not isinstance(key, str) or not key or len(key) > 1024):
            raise ConfigurationError(f"key must be a non-empty str of at most 1024 characters, got {key!r}")
        window = self._dedup_window(job, request, key)
        delay = delay_seconds(request.delay)
        check_ordered_request(job, request, delay)
        ordered = is_ordered(job)
        group = message_group(job, request, data) if ordered else tenant_of(job, request, data)
        env = Envelope.new(
            job.name,
            data,
            key=key,
            saga=request.saga,
            job_id=request.job_id,
            payload_version=job.version,
        )
        env, delay, window = flow_fields(self.state, job, request, env, delay=delay, window=window)
        track = request.track if request.track is not None else job.track
        if not isinstance(track, bool):
            raise ConfigurationError(f"track must be True or False, got {track!r}")
        if track:
            env = env.model_copy(update={"track": True})
        trace = current_trace()
        unsigned = wire.send_attributes(env, trace.as_attributes())
        signed, attributes = self._sign(env, unsigned, delay)
        size = wire.message_size(signed.to_body(), attributes)
        if size > min(self.config.offload_threshold, MAX_ENQUEUE_BYTES):
            env = self._offload(env, size, job, delay)
            signed, attributes = self._sign(env, unsigned, delay)
        env = signed
        lane = lane_name(priority, job.profile, ordered) if isinstance(job, Job) else job.lane_for(priority)
        return _Prepared(
            envelope=env,
            priority=priority,
            queue_url=self.config.endpoints(lane).url,
            body=env.to_body(),
            attributes=attributes,
            delay=delay,
            xray=to_xray_header(trace) if trace.xray_header else None,
            trace_id=trace.trace_id,
            dedup_window=window,
            group=group,
            dedup_id=deduplication_id(env.key) if ordered else None,
        )

    def _dedup_window(
        self, job: Job[Any] | RoutedJob, request: EnqueueRequest, key: str | None
    ) -> float | None:
        """Seconds this enqueue dedups by key, or ``None``: the request's ``dedup_window``, else the job's,
        else :data:`DEFAULT_DEDUP_WINDOW` when the caller gave a key (not for saga steps, whose outbox
        sends each step once under its own id); ``0`` is off."""
        if request.dedup_window is not None:
            window: float | None = _window(request.dedup_window)
        elif job.dedup_window is not None:
            window = job.dedup_window
        elif request.key is not None and request.saga is None:
            if self.config.state_table is None:
                if not self._warned_no_dedup:
                    self._warned_no_dedup = True
                    log.warning(
                        "no state table (JF_STATE_TABLE): enqueues with a key are not deduplicated; "
                        "only the consumer's idempotency keeps a duplicate from running twice"
                    )
                return None
            return DEFAULT_DEDUP_WINDOW
        else:
            return None
        if not window:
            return None
        if key is None:
            raise ConfigurationError(
                f"dedup of {job.name} needs a key: pass key= or give the job a key= function"
            )
        if self.config.state_table is None:
            raise ConfigurationError("enqueue dedup needs the state table: set JF_STATE_TABLE")
        return window

    def _sign(self, env: Envelope, attributes: dict[str, Any], delay: int) -> tuple[Envelope, dict[str, Any]]:
        """The envelope and attributes as sent: signed when signing is on (in the body for a delay that
        EventBridge Scheduler sends, since it cannot set attributes)."""
        attributes = dict(attributes)
        if self._keys is None:
            return env, attributes
        kid, mac = self._keys.ring().sign(env)
        if delay > MAX_DELAY_SECONDS:
            return env.model_copy(update={"sig": f"{kid}:{mac}"}), attributes
        attributes[ATTR_SIG] = wire.string_attribute(mac)
        attributes[ATTR_KID] = wire.string_attribute(kid)
        return env, attributes

    def _offload(self, env: Envelope, size: int, job: Job[Any] | RoutedJob, delay: int) -> Envelope:
        """Store the payload in S3 and point to it; refuse when it cannot be sent either way.

        The object's retention class covers the delay, the job's retries, a DLQ stay and a redrive
        (:func:`jobframework.payloads.retention_days`).
        """
        if not self.config.payload_bucket:
            if size <= MAX_ENQUEUE_BYTES:
                return env
            raise PayloadTooLargeError(
                f"{env.type} message is {size:,} bytes: with the {REASON_ATTRIBUTES_BYTES} bytes its dead "
                f"letter keeps for the reason attributes it is over the SQS limit of "
                f"{wire.SQS_MAX_MESSAGE_BYTES:,}; configure a payload bucket (JF_PAYLOAD_BUCKET) to offload "
                "it, or enqueue a reference"
            )
        from jobframework.payloads import PayloadStore, retention_days

        horizon = job.retry if isinstance(job, Job) else job.route.retry_horizon
        ref = PayloadStore(self.config.payload_bucket, self._client("s3")).put(
            env.type, env.id, env.payload, keep_days=retention_days(delay, horizon)
        )
        return env.model_copy(update={"payload": {}, "payload_ref": ref})

    # -- sending --------------------------------------------------------------------------------------

    def enqueue(
        self,
        job: Job[Any] | str,
        payload: BaseModel | dict[str, Any],
        *,
        key: str | None = None,
        delay: float | timedelta | None = None,
        priority: Priority | str | None = None,
        dedup_window: float | timedelta | None = None,
        expires_in: float | timedelta | None = None,
        debounce: float | timedelta | None = None,
        tenant: str | None = None,
        track: bool | None = None,
        group: str | None = None,
    ) -> EnqueueResult:
        """Send one job.

        Args:
            job: the job or its registered name.
            payload: the job's model, or a dict validated against it.
            key: the idempotency/dedup key (the job's ``key=`` function, else the job id, when ``None``).
                An explicit key dedups the enqueue for :data:`DEFAULT_DEDUP_WINDOW` (24 hours) unless
                ``dedup_window`` says otherwise: a second enqueue with the key sends nothing and returns
                the first job's id with ``duplicate=True``.
            delay: seconds (or ``timedelta``) before the job becomes visible: up to 900 via SQS
                ``DelaySeconds``, up to a year via an EventBridge Scheduler one-time schedule.
            priority: send to another priority's queue than the job's own.
            dedup_window: seconds in which another enqueue with the same key sends nothing and
                returns this job's id (``duplicate=True``), up to 7 days; ``0`` turns dedup off; the
                job's own ``dedup_window`` when ``None``, else 24 hours for an explicit ``key``.
            expires_in: seconds (or ``timedelta``, up to 14 days) by which the job must have started,
                else it is dropped with status ``expired``; the job's ``expires_after`` when ``None``.
            debounce: seconds (up to 900): of the enqueues with this ``key`` in a window that opens
                with the first, only the last runs, once, when the window closes (the others end
                ``cancelled``, reason ``debounced``); needs ``key`` and the state table.
            tenant: the ``MessageGroupId`` (SQS fair queues): one tenant's flood does not hold up
                another's jobs; the job's ``tenant=`` function of the payload when ``None``.
            track: keep this job's status readable by id (``status``, ``cancel``); the job's
                ``track=`` when ``None``. An untracked job costs no status write.
            group: the message group of an ordered job (``@job(ordered_by=...)``, a FIFO lane): its
                ``ordered_by`` value when ``None``; a job known only from the catalog needs it. Jobs
                of one group run one after another in send order; ``MessageDeduplicationId`` is the
                SHA-256 of the key (SQS drops a second send of one key within 5 minutes). An ordered
                job takes no ``delay`` or ``debounce`` (a FIFO queue cannot delay one message).

        Raises:
            PayloadValidationError: the payload does not match (nothing sent).
            PayloadTooLargeError: the message is over 1 MiB (nothing sent).
            ConfigurationError: a bad delay, key or priority.
            UnknownJobError: no job of that name in the registry or the topology's job catalog.
            EnqueueError: SQS failed to take it.
        """
        return self._send_one(
            self.prepare(
                EnqueueRequest(
                    job,
                    payload,
                    key=key,
                    delay=delay,
                    priority=priority,
                    dedup_window=dedup_window,
                    expires_in=expires_in,
                    debounce=debounce,
                    tenant=tenant,
                    track=track,
                    group=group,
                )
            )
        )

    def _send_one(self, prepared: _Prepared) -> EnqueueResult:
        env = prepared.envelope
        state = self.state
        holder = self._claim(prepared)
        if holder is not None:
            return prepared.result(duplicate_of=holder)
        try:
            message_id = self._schedule(prepared) if prepared.scheduled else self._send_message(prepared)
        except BaseException:
            self._unclaim(prepared)
            raise
        self._confirm(prepared)
        if env.debounce is not None and state is not None:
            from jobframework.flow.debounce import confirm

            confirm(state, env.debounce.key, env.debounce.window, env.id, time.time())
        self._record_status(prepared)
        log.debug("enqueued %s job %s", env.type, env.id)
        return prepared.result(message_id)

    def _claim(self, prepared: _Prepared) -> str | None:
        """Claim the enqueue's dedup key: ``None`` when it is ours to send (or not deduplicated), else
        the id of the job already enqueued with it."""
        env, state = prepared.envelope, self.state
        if not prepared.deduplicated or state is None:
            return None
        holder = state.claim_key(env.key, env.id, prepared.dedup_window or 0.0, tracked=bool(env.track))
        if holder is not None:
            log.info("%s job with key %s already enqueued as %s; not sent again", env.type, env.key, holder)
        return holder

    def _unclaim(self, prepared: _Prepared) -> None:
        """The send failed: drop the claim so that a retry of this enqueue is not blocked."""
        if prepared.deduplicated and self.state is not None:
            self.state.release_key(prepared.envelope.key, prepared.envelope.id)

    def _confirm(self, prepared: _Prepared) -> None:
        """Sent: mark the claim as sent. A tracked job's status record (written next) is the
        confirmation itself, so its marker costs no second write."""
        env, state = prepared.envelope, self.state
        if not prepared.deduplicated or state is None or env.track:
            return
        try:
            state.confirm_key(env.key, env.id)
        except Exception:
            # Sent: raising now would make the caller enqueue it again. The pending marker still
            # dedups until its lease ends.
            log.warning("confirming the dedup marker of job %s failed", env.id, exc_info=True)

    def _record_status(self, prepared: _Prepared) -> None:
        state = self.state
        if state is None or not prepared.envelope.track:
            return
        env = prepared.envelope
        try:
            state.set_status(
                env.id,
                JobState.SCHEDULED if prepared.scheduled else JobState.QUEUED,
                job_type=env.type,
                key=env.key,
                attempts=0,
                enqueued_at=env.enqueued_at.isoformat(),
                trace_id=prepared.trace_id,
            )
        except Exception:
            log.warning("recording the queued status of job %s failed", env.id, exc_info=True)

    def _schedule(self, prepared: _Prepared) -> str:
        from jobframework.delays import create_one_time_schedule

        return create_one_time_schedule(
            self._client("scheduler"), self.config, prepared.envelope, prepared.delay, prepared.queue_url
        )

    def _send_message(self, prepared: _Prepared) -> str:
        kwargs: dict[str, Any] = {
            "QueueUrl": prepared.queue_url,
            "MessageBody": prepared.body,
            "MessageAttributes": prepared.attributes,
        }
        if prepared.delay:
            kwargs["DelaySeconds"] = prepared.delay
        if prepared.xray:
            kwargs["MessageSystemAttributes"] = {"AWSTraceHeader": wire.string_attribute(prepared.xray)}
        if prepared.group:
            kwargs["MessageGroupId"] = prepared.group
        if prepared.dedup_id:
            kwargs["MessageDeduplicationId"] = prepared.dedup_id
        try:
            response = self.sqs.send_message(**kwargs)
        except Exception as exc:
            raise EnqueueError(
                f"sending {prepared.envelope.type} job {prepared.envelope.id} failed: {exc}"
            ) from exc
        return str(response.get("MessageId", ""))

    def enqueue_many(self, requests: Iterable[EnqueueRequest]) -> list[EnqueueResult]:
        """Send many jobs, ten per ``SendMessageBatch``, in the order given.

        Ordered jobs keep the order of their group when SQS takes every entry; an entry it refuses and
        a retry then sends goes after the group's entries that were taken.

        Every payload is validated before anything is sent. Entries a batch reports as failed are
        resent up to ``batch_retries`` times with backoff (unless SQS says the entry itself is at fault);
        what still fails comes back as a result with ``error`` set.
        """
        prepared = [self.prepare(r) for r in requests]
        results: list[EnqueueResult | None] = [None] * len(prepared)
        pending: list[int] = []
        claimed: dict[str, int] = {}  # key -> the entry of this call that claimed it
        repeats: dict[int, int] = {}  # an entry repeating a key claimed in this call -> that entry
        for i, p in enumerate(prepared):
            key = p.envelope.key
            if p.batchable and p.deduplicated and key in claimed:
                repeats[i] = claimed[key]
                continue
            try:
                if not p.batchable:  # long delays and debounce take the one-by-one path
                    results[i] = self._send_one(p)
                    continue
                holder = self._claim(p)  # a dedup key is claimed before its batch is sent
            except Exception as exc:
                results[i] = p.result(error=str(exc))
                continue
            if holder is not None:
                results[i] = p.result(duplicate_of=holder)
            else:
                pending.append(i)
                if p.deduplicated:
                    claimed[key] = i
        for round_ in range(self.batch_retries + 1):
            if not pending:
                break
            if round_:
                time.sleep(compute_backoff(round_, base_delay=0.05, max_delay=1.0))
            failed: list[int] = []
            for batch in self._batches(prepared, pending):
                failed.extend(self._send_batch(prepared, batch, results, final=round_ == self.batch_retries))
            pending = failed
        for i, first in repeats.items():
            sent = results[first]
            results[i] = (
                prepared[i].result(duplicate_of=sent.id)
                if sent is not None and sent.ok
                else prepared[i].result(error="not sent: the entry with the same key was not sent")
            )
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
            if p.group:
                entry["MessageGroupId"] = p.group
            if p.dedup_id:
                entry["MessageDeduplicationId"] = p.dedup_id
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
                    self._unclaim(prepared[i])
                return []
            log.warning("SendMessageBatch of %d entries failed, retrying: %s", len(batch), exc)
            return batch
        for ok in response.get("Successful", []):
            i = batch[int(ok["Id"])]
            results[i] = prepared[i].result(ok["MessageId"])
            self._confirm(prepared[i])
            self._record_status(prepared[i])
        retry: list[int] = []
        for bad in response.get("Failed", []):
            i = batch[int(bad["Id"])]
            error = f"{bad.get('Code')}: {bad.get('Message', '')}"
            if bad.get("SenderFault") or final:
                results[i] = prepared[i].result(error=error)
                self._unclaim(prepared[i])
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
