"""Polling a queue in a test as Lambda's event source mapping would: :func:`receive_all`,
:func:`consume_once` (one poll) and :func:`drain` (until the queue is dry, retries fast-forwarded).

Each takes the SQS client to poll with (``jf_aws.client("sqs")`` for the embedded AWS) and never
makes one. Re-exported by :mod:`jobframework.testing`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from jobframework.envelope import lambda_record
from jobframework.local.context import LocalLambdaContext


class FakeLambdaContext(LocalLambdaContext):
    """A Lambda context whose remaining time counts down from ``timeout`` seconds (default 900, Lambda's
    longest: the consumer releases unstarted a record whose job's ``timeout`` plus a few seconds is more
    than the time left, so give a shorter one to test that)."""

    def __init__(self, timeout: float = 900.0, function_name: str = "jf-local-consumer") -> None:
        super().__init__(timeout, function_name)


def receive_all(sqs: Any, queue_url: str, *, attempts: int = 3) -> Sequence[dict[str, Any]]:
    """Every visible message of a (shallow) queue, with all attributes, without waiting."""
    messages: list[dict[str, Any]] = []
    empty = 0
    while empty < attempts:
        got = sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=10,
            WaitTimeSeconds=0,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
            MessageSystemAttributeNames=["All"],
        ).get("Messages", [])
        if not got:
            empty += 1
        messages.extend(got)
    return messages


def consume_once(
    handler: Any,
    sqs: Any,
    queue_url: str,
    *,
    max_messages: int = 10,
    context: Any = None,
    wait_seconds: int = 0,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One event-source-mapping poll: receive a batch, call ``handler``, delete what it did not report.

    Args:
        handler: the Lambda handler (``consumer(...)``).
        sqs: the SQS client to poll and delete with: pass your own (e.g. ``jf_aws.client("sqs")`` for
            the embedded AWS); ``consume_once`` never makes one. The handler uses its own client
            (``consumer(sqs_client=...)``, else one from ``JF_*``) for retries and dead letters.
        queue_url: the queue to poll.
        max_messages: at most this many records (1-10).
        context: the Lambda context (a :class:`FakeLambdaContext` of 900 s when ``None``).
        wait_seconds: ``WaitTimeSeconds`` of the receive (0: return at once).

    Returns the records passed to the handler and its response (empty when no message was visible).
    """
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    messages = sqs.receive_message(
        QueueUrl=queue_url,
        MaxNumberOfMessages=max_messages,
        WaitTimeSeconds=wait_seconds,
        AttributeNames=["All"],
        MessageAttributeNames=["All"],
        MessageSystemAttributeNames=["All"],
    ).get("Messages", [])
    if not messages:
        return [], {"batchItemFailures": []}
    records = [lambda_record(m, queue_arn=queue_arn) for m in messages]
    response = handler({"Records": records}, context or FakeLambdaContext())
    failed = {f["itemIdentifier"] for f in response.get("batchItemFailures", [])}
    done = [r for r in records if r["messageId"] not in failed]
    if done:
        sqs.delete_message_batch(
            QueueUrl=queue_url,
            Entries=[{"Id": str(n), "ReceiptHandle": r["receiptHandle"]} for n, r in enumerate(done)],
        )
    return records, response


def drain(
    handler: Any,
    sqs: Any,
    queue_url: str,
    *,
    fast_forward: bool = True,
    max_polls: int = 100,
    timeout: float = 60.0,
    context: Any = None,
) -> list[dict[str, Any]]:
    """Poll ``queue_url`` with :func:`consume_once` until nothing in it is visible or in flight: a
    job retried twice and then succeeding is run three times, and dead-lettered jobs are in the DLQ
    when it returns (Sidekiq's ``drain``, Celery's eager retries, with the real consumer and queue).

    Args:
        handler: the Lambda handler (``consumer(...)``).
        sqs: the SQS client to poll, delete and fast-forward with.
        queue_url: the queue to run dry.
        fast_forward: make a record the handler retried visible again at once instead of waiting out
            its backoff: the attempts, the classification and the retry policy's last attempt are
            real, the waits are not. ``False``: wait for them (up to ``timeout``). A record released
            over a concurrency or rate limit, or throttled (``Throttled``), comes back as a copy sent
            with a delay, which SQS cannot shorten: ``drain`` waits for it either way.
        max_polls: at most this many polls that handle records, then :class:`RuntimeError` (a job
            handed back for ever).
        timeout: seconds to wait for records in flight or released to come back.
        context: the Lambda context of each call (a fresh :class:`FakeLambdaContext` when ``None``).

    Messages delayed when it began (``enqueue(delay=...)``) and not yet visible are left in the queue.

    Returns every record passed to the handler, in order (a retried job's once per attempt).
    """
    handled: list[dict[str, Any]] = []
    _, _, delayed_before = _counts(sqs, queue_url)  # (the caller's own delayed messages are left)
    deadline = time.monotonic() + timeout
    polls = 0  # (the polls that handled records: waiting for a record to come back is not one)
    while True:
        if polls == max_polls:
            if _waiting(sqs, queue_url, delayed_before) == 0:
                return handled
            raise RuntimeError(
                f"drain: {queue_url} was not dry after {max_polls} polls ({len(handled)} records handled): "
                "a job is handed back each time (waiting for its key, a limit, a backlog gate) or "
                "re-enqueues itself; raise max_polls= if that many are expected"
            )
        records, response = consume_once(handler, sqs, queue_url, context=context)
        if records:
            polls += 1
            handled.extend(records)
            if fast_forward:
                _fast_forward(sqs, queue_url, records, response)
            continue
        waiting = _waiting(sqs, queue_url, delayed_before)
        if waiting == 0:
            return handled
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"drain: {waiting} message(s) of {queue_url} still in flight or delayed after {timeout:g} s "
                "(a retry's backoff longer than that: drain(fast_forward=True) skips it; a throttle's "
                "Retry-After or a hand-back over a limit is a copy sent with its delay, which SQS cannot "
                "shorten: raise timeout=, or give the throttle a shorter delay in the test; a payload of "
                "a newer version than the job's is handed back a minute at a time for an hour, until a "
                "consumer that knows it is deployed)"
            )
        time.sleep(0.2)


def _counts(sqs: Any, queue_url: str) -> tuple[int, int, int]:
    """Messages visible, in flight and delayed (SQS's approximate counts)."""
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    counts = sqs.get_queue_attributes(
        QueueUrl=queue_url, AttributeNames=[*names, "ApproximateNumberOfMessagesDelayed"]
    )["Attributes"]
    visible, in_flight = (int(counts.get(name, 0)) for name in names)
    return visible, in_flight, int(counts.get("ApproximateNumberOfMessagesDelayed", 0))


def _waiting(sqs: Any, queue_url: str, delayed_before: int) -> int:
    """What may still come back: messages visible or in flight, and those delayed since the drain
    began (a record released over a limit comes back as a copy sent with a delay of a few seconds)."""
    visible, in_flight, delayed = _counts(sqs, queue_url)
    return visible + in_flight + max(0, delayed - delayed_before)


def _fast_forward(sqs: Any, queue_url: str, records: list[dict[str, Any]], response: dict[str, Any]) -> None:
    """Make the records the handler reported as failures (handed back: retried, released) visible now."""
    back = {f["itemIdentifier"] for f in response.get("batchItemFailures", [])}
    entries = [
        {"Id": str(n), "ReceiptHandle": r["receiptHandle"], "VisibilityTimeout": 0}
        for n, r in enumerate(records)
        if r["messageId"] in back
    ]
    if entries:
        sqs.change_message_visibility_batch(QueueUrl=queue_url, Entries=entries)
