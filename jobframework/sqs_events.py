"""Lambda SQS events and records of the exact AWS shape, for a handler called without a queue (the
testing helpers :func:`sqs_event` and :func:`sqs_record`, which :mod:`jobframework.testing` exports).
A FIFO lane's records carry what SQS gives them: a message group, a growing sequence number."""

from __future__ import annotations

import hashlib
import itertools
import time
import uuid
from typing import TYPE_CHECKING, Any

from jobframework.envelope import Envelope, lambda_record, string_attribute

if TYPE_CHECKING:
    from jobframework.jobs import Job, JobRegistry
    from jobframework.topology import RuntimeConfig

DEFAULT_QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:jf-dev-default"


def sqs_record(
    body: Envelope | str,
    *,
    queue_arn: str | None = None,
    config: RuntimeConfig | None = None,
    lane: str | None = None,
    receive_count: int = 1,
    message_attributes: dict[str, str] | None = None,
    aws_trace_header: str | None = None,
    message_id: str | None = None,
    receipt_handle: str | None = None,
    registry: JobRegistry | None = None,
    message_group: str | None = None,
) -> dict[str, Any]:
    """One Lambda SQS record of the exact AWS shape (for a handler called without a queue), from
    ``queue_arn``, else from the queue of ``config`` (e.g. ``jf_config``) that :func:`sqs_event` would
    pick, else a queue named ``jf-dev-default``; ``receive_count`` 4 is a fourth delivery.

    A record of a FIFO queue (an ordered job's lane) carries what SQS gives one: its ``MessageGroupId``
    (``message_group``, else what the job's ``ordered_by`` gives its payload), a ``SequenceNumber``
    that grows from record to record, and a ``MessageDeduplicationId``. ``registry``: where the
    envelope's job is found (default: jobframework's default registry)."""
    if queue_arn is None:
        queue_arn = _queue_arn(config, lane, body, registry) if config is not None else DEFAULT_QUEUE_ARN
    text = body.to_body() if isinstance(body, Envelope) else body
    now_ms = str(int(time.time() * 1000))
    attributes = {
        "ApproximateReceiveCount": str(receive_count),
        "SentTimestamp": now_ms,
        "SenderId": "AIDAIENQZJOLO23YVJ4VO",
        "ApproximateFirstReceiveTimestamp": now_ms,
    }
    if queue_arn.endswith(".fifo"):
        attributes.update(_fifo_attributes(body, text, message_group, registry))
    if aws_trace_header:
        attributes["AWSTraceHeader"] = aws_trace_header
    attrs = message_attributes or {}
    if isinstance(body, Envelope):
        attrs = {"jf-type": body.type, **attrs}
    message = {
        "MessageId": message_id or str(uuid.uuid4()),
        "ReceiptHandle": receipt_handle or f"local-{uuid.uuid4()}",
        "Body": text,
        "MD5OfBody": hashlib.md5(text.encode("utf-8", "surrogatepass")).hexdigest(),
        "Attributes": attributes,
        "MessageAttributes": {k: string_attribute(v) for k, v in attrs.items()},
    }
    return lambda_record(message, queue_arn=queue_arn)


def sqs_event(
    *records: dict[str, Any] | Envelope | str,
    queue_arn: str | None = None,
    config: RuntimeConfig | None = None,
    lane: str | None = None,
    registry: JobRegistry | None = None,
) -> dict[str, Any]:
    """A Lambda SQS event from records, envelopes or raw bodies.

    The records come from ``queue_arn``; with ``config`` (e.g. ``jf_config``) from that topology's
    queue of ``lane``: by default the lane of the envelope's job when it is registered (in
    ``registry``, default jobframework's), else ``default``. A handler's retries and dead letters go
    to that queue and its DLQ, so a test of a failing job passes ``config``. Without either, a queue
    named ``jf-dev-default``. Records of a FIFO queue (an ordered job's) carry their message group and
    sequence numbers in the order given, so a failure holds back the rest of its group as in AWS.
    """
    out = []
    for r in records:
        if isinstance(r, dict):
            out.append(r)
            continue
        out.append(sqs_record(r, queue_arn=queue_arn, config=config, lane=lane, registry=registry))
    return {"Records": out}


def _found(body: Envelope | str, registry: JobRegistry | None) -> Job[Any] | None:
    from jobframework.jobs import registry as default_registry

    found_in = registry if registry is not None else default_registry  # (an empty registry is falsy)
    return found_in.find(body.type) if isinstance(body, Envelope) else None


def _queue_arn(
    config: RuntimeConfig, lane: str | None, body: Envelope | str, registry: JobRegistry | None
) -> str:
    from jobframework.local.pollers import queue_arn_from_url

    if lane is None:
        job = _found(body, registry)
        lane = job.lane if job is not None else "default"
    return queue_arn_from_url(config.endpoints(lane).url, config.region or "us-east-1")


_sequence = itertools.count(time.time_ns() // 1000)
"""FIFO sequence numbers: SQS's grow within a group; these grow across every record made here."""


def _fifo_attributes(
    body: Envelope | str, text: str, group: str | None, registry: JobRegistry | None
) -> dict[str, str]:
    """What SQS adds to a FIFO queue's record; the group of an ordered job's envelope is its
    ``ordered_by`` of the payload (``"default"`` when neither it nor ``group`` gives one)."""
    job = _found(body, registry)
    if group is None and job is not None and job.flow.ordered_by is not None and isinstance(body, Envelope):
        try:
            group = job.flow.ordered_by(job.validate(body.payload))
        except Exception:  # (a payload the job refuses: the consumer says so, as it would in AWS)
            group = None
    return {
        "MessageGroupId": group or "default",
        "SequenceNumber": str(next(_sequence)).zfill(20),
        "MessageDeduplicationId": body.id
        if isinstance(body, Envelope)
        else hashlib.sha256(text.encode()).hexdigest(),
    }
