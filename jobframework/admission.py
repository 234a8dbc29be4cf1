"""Admitting a record before its job runs: its envelope, its signature, and its payload fetched,
upgraded, validated.

The envelope is read first (:func:`read_envelope`: :class:`~jobframework.errors.MalformedMessageError`
when it cannot be). Then each step raises what the consumer turns into an outcome:
:class:`~jobframework.errors.SignatureError` (dead letter ``signature``), ``Unavailable`` (the key ring
or the payload store cannot be read now: retried), :class:`~jobframework.errors.PayloadVersionError`
(``version``), or a pydantic ``ValidationError`` (``invalid-payload``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from jobframework import envelope as wire
from jobframework.delivery import Delivery, Unavailable
from jobframework.errors import MalformedMessageError, SignatureError
from jobframework.scheduling import firing_id, slot_time, unsigned_firing_key

if TYPE_CHECKING:
    from jobframework.envelope import Envelope
    from jobframework.jobs import Job, JobRegistry
    from jobframework.signing import KeySource

log = logging.getLogger(__name__)


def read_envelope(record: dict[str, Any], body: str, registry: JobRegistry, *, signed: bool) -> Envelope:
    """The record's envelope; with its payload validated as the job's model in the same pass when the
    record's ``jf-type`` names a job of ``registry`` and no signature is to be checked (``signed``: the
    signature covers the payload as JSON data). Raises :class:`MalformedMessageError`."""
    job_type = None if signed else wire.record_attribute(record, wire.ATTR_TYPE)
    job = registry.find(job_type) if job_type is not None else None
    if job is not None:
        typed = wire.parse_typed(body, job.name, job.payload_model, job.version)
        if typed is not None:
            return typed
    return wire.parse_body(body)


def verify_signature(d: Delivery, keys: KeySource, registry: JobRegistry, *, keyed: bool = True) -> None:
    """Check the signature before anything runs; an unreadable key ring is retried, not fatal.
    ``keyed``: the consumer keeps idempotency keys (an unsigned schedule firing needs its slot's)."""
    from jobframework.signing import ATTR_KID, ATTR_SIG, RECHECK_SECONDS

    env = d.require_envelope()
    kid, mac = wire.record_attribute(d.record, ATTR_KID), wire.record_attribute(d.record, ATTR_SIG)
    if not (kid and mac) and env.sig:
        kid, _, mac = env.sig.partition(":")
    job = registry.find(env.type)
    if not (kid or mac) and job is not None and job.schedule is not None and is_recurring_firing(env, job):
        # A recurring schedule's Input is fixed in the stack and cannot be signed; such a message
        # can only run its job with the schedule's own payload, for a recent slot that its key dedups.
        if env.deadline is not None or env.debounce is not None:
            raise SignatureError("unsigned, and it carries what a schedule's firing never does (a deadline)")
        key = unsigned_firing_key(
            job.name,
            job.schedule.expression,
            job.schedule.timezone,
            env.key,
            idempotent=job.idempotent and keyed,
            now=datetime.now(UTC),
        )
        # Only the slot is taken from it: its id (Scheduler's execution id, which anyone sending could
        # set to another job's, whose status it would then write), its enqueue time and whether it is
        # tracked are the slot's and the job's, as the stack's schedule sends them.
        d.envelope = env = env.model_copy(
            update={
                "key": key,
                "id": firing_id(key),
                "enqueued_at": slot_time(job.name, key),
                "track": job.track or None,
                "traceparent": None,
            }
        )
        log.info("job %s (%s): unsigned firing of its recurring schedule accepted", env.id, env.type)
        return
    try:
        ring = keys.ring()
        if kid and kid not in ring.keys:  # (added since the ring was read: read it again, not too often)
            ring = keys.ring(older_than=RECHECK_SECONDS)
    except Exception as exc:
        log.error("reading the signing keys failed (job %s)", env.id, exc_info=True)
        raise Unavailable(f"signing keys unavailable: {exc}") from exc
    ring.verify(env, kid, mac)


def load_payload(d: Delivery, job: Job[Any], s3: Callable[[], Any], *, bucket: str | None = None) -> Any:
    """The validated payload: fetched from S3 (``s3()`` gives the client) if offloaded, upgraded to the
    job's version. A record sent without a key (its key is its id) takes the key the job's ``key=``
    function gives, so that idempotency holds for producers that enqueue by name.

    Raises:
        MalformedMessageError: the payload is offloaded to a bucket other than ``bucket`` (this
            topology's; ``None``: any), which its producers never write to.
    """
    env = d.require_envelope()
    data = env.payload
    if env.payload_version > job.version:  # (before an offloaded payload's fetch: it is not read)
        job.upgrade(data, env.payload_version)  # raises PayloadVersionError
    if env.payload_ref is not None:
        if bucket is not None and env.payload_ref.bucket != bucket:
            raise MalformedMessageError(
                f"its payload is offloaded to s3://{env.payload_ref.bucket}/{env.payload_ref.key}, not to "
                f"this topology's payload bucket {bucket} (JF_PAYLOAD_BUCKET): the consumer reads no other "
                "bucket"
            )
        from jobframework.errors import PayloadStoreError
        from jobframework.payloads import fetch

        try:
            data = fetch(env.payload_ref, s3())
        except PayloadStoreError as exc:
            raise Unavailable(str(exc)) from exc
    if env.payload_version != job.version:
        data = job.upgrade(data, env.payload_version)
    payload = job.validate(data)
    if env.key == env.id and job.key_fn is not None:
        # Sent without a key by a producer that knows the job only from the catalog (it cannot run
        # the job's key= function): the key function gives the idempotency key here instead. (Its
        # failure, a ConfigurationError naming the job, is the job's code failing: classified as one.)
        key = job.key_for(payload)
        if key is not None:
            d.envelope = env.model_copy(update={"key": key})
    return payload


def is_recurring_firing(env: Envelope, job: Job[Any] | None) -> bool:
    """The envelope is exactly what the job's recurring schedule sends (its fixed payload and key form)."""
    from jobframework.scheduling import schedule_key

    return (
        job is not None
        and job.schedule is not None
        and env.saga is None
        and env.payload_ref is None
        and env.payload_version == 1
        and env.key.startswith(schedule_key(job.name, ""))
        and env.payload == job.schedule.payload
    )
