"""The wire format: the envelope in a message body, and its message attributes.

The body is the JSON of :class:`Envelope` (never pickle). The attributes carry the
trace context (``traceparent``, ``tracestate``), the type (``jf-type``) and, on dead
letters, why it died (``jf-reason``, ``jf-error``, ``jf-attempts``, ``jf-source``,
``jf-dead-at``). A dead letter keeps its original body byte for byte.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from jobframework import core
from jobframework.errors import MalformedMessageError

ENVELOPE_VERSION = 1
SQS_MAX_MESSAGE_BYTES = core.SQS_MAX_MESSAGE_BYTES
"""SQS's limit on a message: body plus attributes (1 MiB)."""
MAX_TRACE_ATTRIBUTE_CHARS = 512
"""``traceparent`` and ``tracestate`` longer than this are dropped (W3C allows 512 for tracestate)."""

ATTR_TRACEPARENT = "traceparent"
ATTR_TRACESTATE = "tracestate"
ATTR_TYPE = "jf-type"
ATTR_REASON = "jf-reason"
ATTR_ERROR = "jf-error"
ATTR_ATTEMPTS = "jf-attempts"
ATTR_SOURCE = "jf-source"
ATTR_DEAD_AT = "jf-dead-at"
ATTR_MESSAGE_ID = "jf-message-id"
"""A dead letter's: the SQS message id of the record that died (what the consumer's log names)."""
ATTR_REDRIVES = "jf-redrives"
"""How many times the job's dead letter was redriven (set by the redrive, kept by its dead letters):
the status's ``redrives``, as each run's attempts start again at 1."""
SQS_MAX_ATTRIBUTES = 10
"""Message attributes SQS allows a message."""
ATTR_RATE_SLOT = "jf-rate-slot"
"""A hand-back copy's reserved rate token (:mod:`jobframework.flow.limits`): ``<slot epoch>:<attempt>``."""
MAX_ERROR_CHARS = 1000


def new_job_id() -> str:
    """A unique, time-sortable id: a UUIDv7 (RFC 9562) string.

    Example:
        >>> a, b = new_job_id(), new_job_id()
        >>> len(a), a != b
        (36, True)
    """
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (
        (ms & ((1 << 48) - 1)) << 80
        | 0x7 << 76
        | (rand >> 68 & 0xFFF) << 64
        | 0b10 << 62
        | rand & ((1 << 62) - 1)
    )
    return str(uuid.UUID(int=value))


class SagaRef(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    id: str
    step: str


class PayloadRef(BaseModel):
    """Where an offloaded payload is: the object, its size in bytes and its SHA-256."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    bucket: str = Field(min_length=3, max_length=63)
    key: str = Field(min_length=1, max_length=1024)
    size: int = Field(ge=0)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class DebounceRef(BaseModel):
    """The debounce key and window of an enqueue: only the window's last enqueue runs."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    key: str = Field(min_length=1, max_length=1024)
    window: str = Field(min_length=1, max_length=128)


class Envelope(BaseModel):
    """The message body. Unknown fields are kept (a newer producer may add some)."""

    model_config = ConfigDict(frozen=True, extra="allow")

    v: int = ENVELOPE_VERSION
    id: str = Field(min_length=1, max_length=128)
    type: str = Field(min_length=1, max_length=256)
    payload: dict[str, Any]
    payload_version: int = Field(default=1, ge=1)
    key: str = Field(min_length=1, max_length=1024)
    enqueued_at: datetime
    saga: SagaRef | None = None
    payload_ref: PayloadRef | None = None
    sig: str | None = Field(default=None, max_length=200)
    """``<kid>:<mac>`` for messages sent by EventBridge Scheduler (which cannot set attributes)."""
    deadline: datetime | None = None
    """Drop the job (status ``expired``) if it has not started by then (:mod:`jobframework.flow.expiry`)."""
    debounce: DebounceRef | None = None
    """The debounce window this enqueue joined (:mod:`jobframework.flow.debounce`)."""
    track: bool | None = None
    """``True`` when the job keeps a status record (``@job(track=True)`` or ``enqueue(track=True)``);
    absent otherwise, and then the consumer writes no status for it."""
    traceparent: str | None = Field(default=None, max_length=MAX_TRACE_ATTRIBUTE_CHARS)
    """The producer's W3C trace context, for messages sent by EventBridge Scheduler (which cannot set
    the ``traceparent`` attribute); the consumer continues it when the record carries none."""

    @classmethod
    def new(
        cls,
        job_type: str,
        payload: dict[str, Any] | BaseModel,
        *,
        key: str | None = None,
        payload_version: int | None = None,
        job_id: str | None = None,
        saga: SagaRef | None = None,
        track: bool = False,
    ) -> Envelope:
        """A fresh envelope of a job, as the client builds it before sending (nothing is validated
        against the job's model here: pass a payload that already matches it).

        Args:
            job_type: the registered job name, e.g. ``reports.generate``.
            payload: the payload as JSON data, or the job's model (sent as its JSON data).
            key: the idempotency/dedup key; the job id when ``None``.
            payload_version: the payload schema version; ``None``: the ``version=`` of the job of that
                name in the default registry (what the client sends now), else 1. Pass an older one
                to test a message that was queued before the job's payload changed.
            job_id: the job id; a new UUIDv7 (:func:`new_job_id`) when ``None``.
            saga: the saga step this job is, if any.
            track: the job keeps a status record (what ``enqueue(..., track=True)`` sends).

        ``enqueued_at`` is now, in UTC. Tests use it with :func:`jobframework.testing.sqs_event` to
        call a handler with a record of the exact Lambda shape.

        Example:
            >>> env = Envelope.new("reports.generate", {"report_id": "r-1"}, key="report:r-1")
            >>> env.type, env.key, env.payload_version, len(env.id)
            ('reports.generate', 'report:r-1', 1, 36)
            >>> Envelope.new("reports.generate", {}, job_id="job-1").key  # no key: the id
            'job-1'
        """
        jid = job_id or new_job_id()
        if isinstance(payload, BaseModel):
            payload = payload.model_dump(mode="json")
        if payload_version is None:
            from jobframework.jobs import registry  # the producer's path passes it: no cycle at import

            job = registry.find(job_type)
            payload_version = job.version if job is not None else 1
        return cls(
            id=jid,
            type=job_type,
            payload=payload,
            payload_version=payload_version,
            key=key or jid,
            enqueued_at=datetime.now(UTC),
            saga=saga,
            track=True if track else None,
        )

    def to_body(self) -> str:
        """Compact JSON for the message body."""
        return self.model_dump_json(exclude_none=True)


def parse_body(body: str | bytes | None) -> Envelope:
    """The envelope in a message body.

    Raises:
        MalformedMessageError: the body is not JSON, not an object, or not an envelope of a
            known version; the message says which.
    """
    if body is None or body == "":
        raise MalformedMessageError("empty body")
    try:  # the common case in one pass; the slow path below says what is wrong
        envelope = Envelope.model_validate_json(body)
        if envelope.v == ENVELOPE_VERSION:
            return envelope
    except (ValidationError, ValueError, RecursionError):
        pass
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise MalformedMessageError(f"body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise MalformedMessageError(f"body is JSON {type(data).__name__}, not an envelope object")
    version = data.get("v", ENVELOPE_VERSION)
    if version != ENVELOPE_VERSION:
        raise MalformedMessageError(f"envelope version {version!r} is not supported (this consumer reads v1)")
    try:
        return Envelope.model_validate(data)
    except ValidationError as exc:
        fields = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors()[:5])
        raise MalformedMessageError(f"not a valid envelope: {fields}") from None
    except RecursionError:
        raise MalformedMessageError("body is nested too deeply") from None


_typed: dict[type[BaseModel], type[Envelope]] = {}
"""The envelope of each payload model whose payload is that model (made once, at its first record)."""


def typed_envelope(payload_model: type[BaseModel]) -> type[Envelope]:
    """An :class:`Envelope` whose ``payload`` is ``payload_model`` (a subclass: the rest is the same)."""
    found = _typed.get(payload_model)
    if found is None:
        name = f"Envelope[{payload_model.__name__}]"
        found = _typed[payload_model] = create_model(name, __base__=Envelope, payload=(payload_model, ...))
    return found


def parse_typed(body: str, job_type: str, payload_model: type[BaseModel], version: int) -> Envelope | None:
    """The envelope of a job known before its body is read (the record's ``jf-type``), validated with its
    payload in one pass from the JSON: ``payload`` is then the job's model, validated as JSON (a strict
    model's datetime arrives as text). ``None`` for anything but a current envelope of ``job_type`` at
    payload ``version`` that carries its payload (an offloaded, older or invalid one, or another type):
    :func:`parse_body` and the job's own validation then say what it is, or what is wrong with it.
    """
    try:
        env = typed_envelope(payload_model).model_validate_json(body)
    except Exception:  # (a validator's own TypeError too: the general path meets it with the envelope read)
        return None
    if (
        env.v != ENVELOPE_VERSION
        or env.type != job_type
        or env.payload_version != version
        or env.payload_ref is not None
    ):
        return None
    return env


def string_attribute(value: str) -> dict[str, Any]:
    return {"DataType": "String", "StringValue": value}


def send_attributes(envelope: Envelope, trace: dict[str, str]) -> dict[str, Any]:
    """The SendMessage ``MessageAttributes`` of a fresh job: type and bounded trace context."""
    attrs = {ATTR_TYPE: string_attribute(envelope.type)}
    for name in (ATTR_TRACEPARENT, ATTR_TRACESTATE):
        value = trace.get(name)
        if value and len(value) <= MAX_TRACE_ATTRIBUTE_CHARS:
            attrs[name] = string_attribute(value)
    return attrs


def message_size(body: str, attributes: dict[str, Any]) -> int:
    """Bytes SQS counts against its limit: the body plus each attribute's name, type and value."""
    size = len(body.encode("utf-8"))
    for name, attr in attributes.items():
        size += (
            len(name.encode()) + len(attr["DataType"].encode()) + len(attr.get("StringValue", "").encode())
        )
    return size


def record_attribute(record: dict[str, Any], name: str) -> str | None:
    """A string message attribute of a Lambda SQS record (``messageAttributes``), if present."""
    attrs = record.get("messageAttributes")
    if not isinstance(attrs, dict):
        return None
    attr = attrs.get(name)
    if not isinstance(attr, dict):
        return None
    value = attr.get("stringValue")
    return value if isinstance(value, str) else None


def message_attribute(message: dict[str, Any], name: str) -> str | None:
    """A string message attribute of a ReceiveMessage result (``MessageAttributes``), if present."""
    attr = (message.get("MessageAttributes") or {}).get(name)
    if not isinstance(attr, dict):
        return None
    value = attr.get("StringValue")
    return value if isinstance(value, str) else None


def lambda_record(message: dict[str, Any], *, queue_arn: str, region: str = "us-east-1") -> dict[str, Any]:
    """A ReceiveMessage message as the Lambda SQS event record AWS would deliver.

    The shape follows the AWS Lambda documentation: ``messageId``, ``receiptHandle``, ``body``,
    ``attributes`` (system attributes as strings), ``messageAttributes`` (lower-camel keys),
    ``md5OfBody``, ``eventSource``, ``eventSourceARN``, ``awsRegion``.
    """
    attributes = {k: str(v) for k, v in (message.get("Attributes") or {}).items()}
    message_attributes = {}
    for name, attr in (message.get("MessageAttributes") or {}).items():
        converted: dict[str, Any] = {
            "stringListValues": [],
            "binaryListValues": [],
            "dataType": attr["DataType"],
        }
        if "StringValue" in attr:
            converted["stringValue"] = attr["StringValue"]
        if "BinaryValue" in attr:
            import base64

            raw = attr["BinaryValue"]
            converted["binaryValue"] = base64.b64encode(raw).decode() if isinstance(raw, bytes) else raw
        message_attributes[name] = converted
    record: dict[str, Any] = {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message.get("Body", ""),
        "attributes": attributes,
        "messageAttributes": message_attributes,
        "md5OfBody": message.get("MD5OfBody", ""),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": region,
    }
    if "MD5OfMessageAttributes" in message:
        record["md5OfMessageAttributes"] = message["MD5OfMessageAttributes"]
    return record
