"""Preparing a message: what an enqueue sends, built and checked before anything is sent.

:class:`Preparer` validates the payload against the job's model, resolves the key, the dedup window,
the delay and the flow fields (deadline, debounce, tenant or ordered group), builds the envelope and
its attributes with the trace context, signs it when signing is on, and offloads a payload too large
for SQS to the payload bucket. :class:`~jobframework.client.JobClient` prepares with it and sends
with :class:`~jobframework.sender.Sender`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from jobframework import envelope as wire
from jobframework.config import RuntimeConfig
from jobframework.dead_letter import REASON_ATTRIBUTES_BYTES
from jobframework.envelope import Envelope
from jobframework.errors import (
    ConfigurationError,
    EnqueueOptionError,
    JobFrameworkError,
    PayloadTooLargeError,
    PayloadValidationError,
)
from jobframework.errortext import shown
from jobframework.flow.enqueue import FlowRequest, check_flow_request, flow_fields, tenant_of
from jobframework.flow.ordered import check_ordered_request, deduplication_id, is_ordered, message_group
from jobframework.jobs import Job, Priority, parse_priority
from jobframework.outgoing import (
    DEFAULT_DEDUP_WINDOW,
    MAX_DELAY_SECONDS,
    MAX_ENQUEUE_BYTES,
    EnqueueRequest,
    Prepared,
    dedup_window_seconds,
    delay_seconds,
)
from jobframework.payload_data import checked_payload
from jobframework.signing import ATTR_KID, ATTR_SIG
from jobframework.tracing import current as current_trace
from jobframework.tracing import to_xray_header

if TYPE_CHECKING:
    from jobframework.catalog import RoutedJob
    from jobframework.signing import KeySource
    from jobframework.state import StateStore

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class CheckedOptions:
    """An enqueue's options as :func:`checked_options` resolved them."""

    priority: Priority
    key: str | None
    delay: int
    group: str | None
    """The ``MessageGroupId``: an ordered job's group, else its tenant (``None``: none)."""
    flow: FlowRequest
    track: bool


def _own_key(job: Job[Any] | RoutedJob, request: EnqueueRequest, key: str | None) -> bool:
    """A key= that is not the job's idempotency key by design: a saga step's, a debounce's (it groups
    a job's payloads: the run's key is ``<key>#<window>``) or a scheduled run's (its slot's)."""
    from jobframework.scheduling import schedule_key

    return (
        request.saga is not None
        or request.debounce is not None
        or (key is not None and key.startswith(schedule_key(job.name, "")))
    )


def checked_options(
    job: Job[Any] | RoutedJob, request: EnqueueRequest, current: dict[str, Any], job_key: str | None
) -> CheckedOptions:
    """The options of an enqueue checked as the client checks them, before anything is sent or stored
    (what :class:`~jobframework.recorder.EnqueueRecorder` checks too): priority, key, dedup window,
    delay, ordering, tenant, expiry, debounce and ``track``. ``current`` is the payload's data at the
    job's version and ``job_key`` its ``key=`` function's key (:func:`checked_payload`).

    Raises:
        EnqueueOptionError, ConfigurationError: an option the job cannot be sent with.
    """
    try:
        priority = parse_priority(request.priority) if request.priority is not None else job.priority
    except ConfigurationError as exc:  # (the caller's priority=: a bad option like the others)
        raise EnqueueOptionError(str(exc)) from None
    key = request.key if request.key is not None else job_key
    if key is not None and (not isinstance(key, str) or not key or len(key) > 1024):
        # (the caller's key=, or what the job's key= function returned)
        error = EnqueueOptionError if request.key is not None else ConfigurationError
        raise error(f"key must be a non-empty str of at most 1024 characters, got {shown(key)}")
    if job_key is not None and key != job_key and not _own_key(job, request, key):
        # Two keys for one payload: each runs once, so the payload runs twice (a charge made twice).
        raise EnqueueOptionError(
            f"key={shown(key)} is not the key {job.name}'s key= function gives this payload "
            f"({job_key!r}): one payload under two keys runs twice; leave key= out (the function gives it)"
        )
    given = (
        dedup_window_seconds(request.dedup_window) if request.dedup_window is not None else job.dedup_window
    )
    if key is None and given:
        # (the caller's dedup_window: a bad argument; the job's: its missing key=)
        error = EnqueueOptionError if request.dedup_window is not None else ConfigurationError
        raise error(
            f"dedup of {job.name} needs a key: pass key= (jf enqueue --key) or give the job a key= function"
        )
    delay = delay_seconds(request.delay)
    check_ordered_request(job, request, delay)
    group = message_group(job, request, current) if is_ordered(job) else tenant_of(job, request, current)
    flow = check_flow_request(job, request, delay)
    track = request.track if request.track is not None else job.track
    if not isinstance(track, bool):
        raise EnqueueOptionError(f"track must be True or False, got {track!r}")
    return CheckedOptions(priority, key, delay, group, flow, track)


def of_entry(index: int, count: int, prepare: Callable[[EnqueueRequest], T], request: EnqueueRequest) -> T:
    """``prepare(request)`` for entry ``index`` of ``count`` of an ``enqueue_many``: an error of one of
    several names its entry (``entry 2 of 3 (index 1): ...``: of the requests or of a job's payloads),
    keeping what is wrong field by field (``PayloadValidationError.fields``)."""
    try:
        return prepare(request)
    except JobFrameworkError as exc:
        if count == 1:
            raise
        try:
            named = type(exc)(f"entry {index + 1} of {count} (index {index}): {exc}")
        except Exception:  # (an error class that takes more than its message: as it was)
            raise exc from None
        if isinstance(exc, PayloadValidationError) and isinstance(named, PayloadValidationError):
            named.fields = exc.fields
        raise named from exc


class Preparer:
    """Builds :class:`~jobframework.outgoing.Prepared` messages for one client.

    Args:
        config: where the queues, tables and bucket are (read at each prepare: the client's ``config``
            may be replaced).
        job: the job of a name (the client's registry, else the job catalog).
        state: the state table's store, or ``None`` (made when needed).
        s3: the S3 client (made when a payload is first offloaded).
        keys: the signing keys, when signing is on.
    """

    def __init__(
        self,
        config: Callable[[], RuntimeConfig],
        *,
        job: Callable[[Job[Any] | str], Job[Any] | RoutedJob],
        state: Callable[[], StateStore | None],
        s3: Callable[[], Any],
        keys: KeySource | None,
    ) -> None:
        self._config = config
        self._job = job
        self._state = state
        self._s3 = s3
        self.keys = keys
        self._warned_no_dedup = False

    @property
    def config(self) -> RuntimeConfig:
        return self._config()

    def prepare(self, request: EnqueueRequest) -> Prepared:
        """Validate, build the envelope and attributes, check the size; sends nothing."""
        job = self._job(request.job)
        version, data, current, job_key = checked_payload(job, request)
        options = checked_options(job, request, current, job_key)
        priority, key, delay, group = options.priority, options.key, options.delay, options.group
        window = self._dedup_window(job, request, key)
        ordered = is_ordered(job)
        env = Envelope.new(
            job.name,
            data,
            key=key,
            saga=request.saga,
            job_id=request.job_id,
            payload_version=version,
        )
        env, delay, window = flow_fields(self._state(), options.flow, env, delay=delay, window=window)
        if options.track:
            env = env.model_copy(update={"track": True})
        trace = current_trace()
        if delay > MAX_DELAY_SECONDS:  # EventBridge Scheduler sends it: no attributes, so in the body
            env = env.model_copy(update={"traceparent": trace.traceparent})
        unsigned = wire.send_attributes(env, trace.as_attributes())
        signed, attributes = self._sign(env, unsigned, delay)
        size = wire.message_size(signed.to_body(), attributes)
        if size > min(self.config.offload_threshold, MAX_ENQUEUE_BYTES):
            env = self._offload(env, size, job, delay)
            signed, attributes = self._sign(env, unsigned, delay)
        env = signed
        lane = job.lane_for(priority)
        return Prepared(
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
            dedup_id=deduplication_id(env.id) if ordered else None,
        )

    def _dedup_window(
        self, job: Job[Any] | RoutedJob, request: EnqueueRequest, key: str | None
    ) -> float | None:
        """Seconds this enqueue dedups by key, or ``None``: the request's ``dedup_window``, else the job's,
        else :data:`DEFAULT_DEDUP_WINDOW` when the caller gave a key (not for saga steps, whose outbox
        sends each step once under its own id); ``0`` is off."""
        if request.dedup_window is not None:
            window: float | None = dedup_window_seconds(request.dedup_window)
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
        if not window or key is None:  # (none without a key: checked_options refused one given)
            return None
        if self.config.state_table is None:
            raise ConfigurationError("enqueue dedup needs the state table: set JF_STATE_TABLE")
        return window

    def _sign(self, env: Envelope, attributes: dict[str, Any], delay: int) -> tuple[Envelope, dict[str, Any]]:
        """The envelope and attributes as sent: signed when signing is on (in the body for a delay that
        EventBridge Scheduler sends, since it cannot set attributes)."""
        attributes = dict(attributes)
        if self.keys is None:
            return env, attributes
        kid, mac = self.keys.ring().sign(env)
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
        ref = PayloadStore(self.config.payload_bucket, self._s3()).put(
            env.type, env.id, env.payload, keep_days=retention_days(delay, horizon)
        )
        return env.model_copy(update={"payload": {}, "payload_ref": ref})
