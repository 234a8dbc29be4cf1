"""Handing a record back unrun by sending a fresh copy, so that the hand-back is not an attempt.

See :mod:`jobframework.attempts`. The copy keeps the body byte for byte and the message attributes
(trace, type, signature), and carries ``jf-executions``/``jf-deferrals``; the X-Ray header travels
again as a system attribute, and a standard queue's ``MessageGroupId`` (the job's tenant) with it.
A delay over SQS's 15 minutes is sent as 15 minutes: the record is looked at again then and handed
back again if it must still wait.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from jobframework import envelope as wire
from jobframework.attempts import ATTR_DEFERRALS, ATTR_EXECUTIONS, ATTR_NEWER
from jobframework.core import SQS_MAX_DELAY_SECONDS

MAX_DELAY_SECONDS = SQS_MAX_DELAY_SECONDS
"""SQS's longest ``DelaySeconds``."""
_DROPPED = frozenset(
    {
        ATTR_EXECUTIONS,
        ATTR_DEFERRALS,
        ATTR_NEWER,  # (set again where it applies: jobframework.newer_payload)
        wire.ATTR_REASON,
        wire.ATTR_ERROR,
        wire.ATTR_ATTEMPTS,
        wire.ATTR_SOURCE,
        wire.ATTR_DEAD_AT,
        wire.ATTR_MESSAGE_ID,
    }
)
"""Attributes a copy does not take over: the counters (set afresh), a newer payload's time handed
back (a later copy's own old consumer would count from it), and a natively redriven letter's reason
attributes (which would crowd SQS's ten)."""


def copy_message(
    record: Mapping[str, Any],
    *,
    delay: int,
    executions: int,
    deferred: int = 0,
    attributes: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The ``SendMessage`` arguments, all but ``QueueUrl``, of the hand-back copy of ``record``
    (``attributes``: string attributes to set on the copy besides the original's; an empty value
    leaves the original's out)."""
    copied: dict[str, Any] = {}
    original = record.get("messageAttributes")
    for name, attr in original.items() if isinstance(original, Mapping) else ():
        if name in _DROPPED or not isinstance(attr, Mapping):
            continue
        data_type = str(attr.get("dataType") or "String")
        if isinstance(attr.get("stringValue"), str):
            copied[name] = {"DataType": data_type, "StringValue": attr["stringValue"]}
        elif isinstance(attr.get("binaryValue"), str):
            copied[name] = {"DataType": data_type, "BinaryValue": base64.b64decode(attr["binaryValue"])}
    copied[ATTR_EXECUTIONS] = wire.string_attribute(str(max(0, executions)))
    if deferred:
        copied[ATTR_DEFERRALS] = wire.string_attribute(str(deferred))
    for name, value in (attributes or {}).items():
        if value:
            copied[name] = wire.string_attribute(value)
        else:  # (an empty value, which SQS takes for no attribute: the copy does not carry it)
            copied.pop(name, None)
    message: dict[str, Any] = {
        "MessageBody": record.get("body"),
        "MessageAttributes": copied,
        "DelaySeconds": max(0, min(MAX_DELAY_SECONDS, int(delay))),
    }
    system = record.get("attributes")
    xray = system.get("AWSTraceHeader") if isinstance(system, Mapping) else None
    if isinstance(xray, str) and 0 < len(xray) <= wire.MAX_TRACE_ATTRIBUTE_CHARS:
        message["MessageSystemAttributes"] = {"AWSTraceHeader": wire.string_attribute(xray)}
    group = system.get("MessageGroupId") if isinstance(system, Mapping) else None
    if isinstance(group, str) and group and not str(record.get("eventSourceARN", "")).endswith(".fifo"):
        message["MessageGroupId"] = group  # its tenant (a fair queue's): the copy counts as that tenant's
    return message
