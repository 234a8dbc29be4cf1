"""A dead letter: the record's body byte for byte, with the reason attributes, within SQS's limits.

The consumer sends what :func:`dead_letter_message` builds to the source queue's DLQ; ``jf dlq``
reads the same attributes back (see :mod:`jobframework.dlq`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from jobframework import envelope as wire
from jobframework.delivery import safe_text

if TYPE_CHECKING:
    from jobframework.classification import Reason

KEPT_ATTRIBUTES = (wire.ATTR_TRACEPARENT, wire.ATTR_TRACESTATE, wire.ATTR_TYPE, "jf-sig", "jf-kid")
"""Message attributes a dead letter keeps from its original (SQS allows 10 in all)."""
MAX_MESSAGE_ID_CHARS = 100
"""SQS message ids are 36 characters; a longer one (not from SQS) is cut to this."""
FITTED_ERROR_CHARS = 100
"""``jf-error`` is cut to this many characters when the dead letter would be over 1 MiB."""
_LONGEST_VALUE_BYTES = {
    wire.ATTR_REASON: 32,  # the longest Reason is 15 characters
    wire.ATTR_ERROR: 4 * FITTED_ERROR_CHARS,  # UTF-8: up to 4 bytes a character
    wire.ATTR_ATTEMPTS: 10,
    wire.ATTR_SOURCE: 80,  # SQS queue names are at most 80 characters
    wire.ATTR_DEAD_AT: len("2026-01-01T00:00:00.000+00:00"),
}
REASON_ATTRIBUTES_BYTES = sum(
    len(name) + len("String") + value for name, value in _LONGEST_VALUE_BYTES.items()
)
"""The most the reason attributes of a fitted dead letter can take (bytes, as SQS counts them). The
client keeps this much room under SQS's 1 MiB at enqueue, so that a dead letter never has to drop a
kept attribute (signature, trace) to fit."""


def dead_letter_message(
    record: dict[str, Any], reason: Reason, error: str, *, attempt: int, source: str
) -> dict[str, Any]:
    """The ``SendMessage`` arguments, all but ``QueueUrl``, that dead-letter ``record``.

    The body is kept byte for byte; the attributes are the kept originals (:data:`KEPT_ATTRIBUTES`)
    and the reason attributes, and the X-Ray header travels as a system attribute.
    """
    attributes: dict[str, Any] = {}
    original = record.get("messageAttributes")
    if isinstance(original, dict):
        for name in KEPT_ATTRIBUTES:
            attr = original.get(name)
            if isinstance(attr, dict) and isinstance(attr.get("stringValue"), str):
                attributes[name] = wire.string_attribute(attr["stringValue"])
    attributes[wire.ATTR_REASON] = wire.string_attribute(reason.value)
    attributes[wire.ATTR_ERROR] = wire.string_attribute(safe_text(error))
    attributes[wire.ATTR_ATTEMPTS] = wire.string_attribute(str(attempt))
    attributes[wire.ATTR_SOURCE] = wire.string_attribute(source or "-")
    attributes[wire.ATTR_DEAD_AT] = wire.string_attribute(
        datetime.now(UTC).isoformat(timespec="milliseconds")
    )
    redrives = wire.record_attribute(record, wire.ATTR_REDRIVES)
    if redrives is not None and len(attributes) < wire.SQS_MAX_ATTRIBUTES:  # (history: after the rest)
        attributes[wire.ATTR_REDRIVES] = wire.string_attribute(redrives[:10])
    message_id = record.get("messageId")
    if isinstance(message_id, str) and message_id and len(attributes) < wire.SQS_MAX_ATTRIBUTES:
        # The id the consumer's log names (a malformed body has no job id): `jf dlq --id` takes it. Only
        # where SQS's ten attributes leave room (a signed job with a tracestate fills them).
        attributes[wire.ATTR_MESSAGE_ID] = wire.string_attribute(message_id[:MAX_MESSAGE_ID_CHARS])
    kwargs: dict[str, Any] = {}
    sys_attrs = record.get("attributes")
    xray = sys_attrs.get("AWSTraceHeader") if isinstance(sys_attrs, dict) else None
    if isinstance(xray, str) and 0 < len(xray) <= wire.MAX_TRACE_ATTRIBUTE_CHARS:
        kwargs["MessageSystemAttributes"] = {"AWSTraceHeader": wire.string_attribute(xray)}
    group = sys_attrs.get("MessageGroupId") if isinstance(sys_attrs, dict) else None
    if source.endswith(".fifo") and isinstance(group, str):  # a FIFO queue's DLQ is a FIFO queue
        kwargs["MessageGroupId"] = group
        kwargs["MessageDeduplicationId"] = str(record.get("messageId", ""))[:128] or "-"
    elif isinstance(group, str) and group:  # a standard queue's group is the job's tenant: kept for redrive
        kwargs["MessageGroupId"] = group
    body = record.get("body")
    body = body if isinstance(body, str) and body else "<empty body>"
    fit_dead_letter(body, attributes)
    return {"MessageBody": body, "MessageAttributes": attributes, **kwargs}


def fit_dead_letter(body: str, attributes: dict[str, Any]) -> None:
    """Keep a dead letter within SQS's 1 MiB: drop ``jf-message-id`` and ``jf-redrives``, shorten
    ``jf-error``, then (only for a message that did not come from
    :class:`~jobframework.client.JobClient`, which keeps :data:`REASON_ATTRIBUTES_BYTES` free) drop
    the trace and signature attributes (the body, kept byte
    for byte, always wins)."""
    if wire.message_size(body, attributes) <= wire.SQS_MAX_MESSAGE_BYTES:
        return
    attributes.pop(wire.ATTR_MESSAGE_ID, None)  # not in REASON_ATTRIBUTES_BYTES: the first to go
    attributes.pop(wire.ATTR_REDRIVES, None)  # (nor this: history, before any kept attribute)
    if wire.message_size(body, attributes) <= wire.SQS_MAX_MESSAGE_BYTES:
        return
    attributes[wire.ATTR_ERROR] = wire.string_attribute(
        attributes[wire.ATTR_ERROR]["StringValue"][:FITTED_ERROR_CHARS]
    )
    for name in KEPT_ATTRIBUTES:
        if wire.message_size(body, attributes) <= wire.SQS_MAX_MESSAGE_BYTES:
            return
        if name != wire.ATTR_TYPE:
            attributes.pop(name, None)
