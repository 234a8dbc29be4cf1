"""How Lambda reads a handler's partial batch response (``batchItemFailures``) and deletes the records
it did not name: the emulator's rule."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

log = logging.getLogger(__name__)

DELETE_BATCH = 10
"""Entries per ``DeleteMessageBatch`` (SQS's limit)."""


def failed_ids(response: Any, ids: set[str]) -> set[str]:
    """The record ids a partial batch response reports as failed, as Lambda reads it.

    ``None`` or an empty list means all succeeded; a response naming an unknown or empty
    identifier, or of the wrong shape, fails the whole batch.

    Example:
        >>> sorted(failed_ids({"batchItemFailures": [{"itemIdentifier": "m-2"}]}, {"m-1", "m-2"}))
        ['m-2']
    """
    if response is None:
        return set()
    if not isinstance(response, Mapping):
        return set()
    failures = response.get("batchItemFailures")
    if failures is None:
        return set()
    if not isinstance(failures, list):
        log.error("batchItemFailures is not a list: the whole batch failed")
        return set(ids)
    failed: set[str] = set()
    for item in failures:
        ident = item.get("itemIdentifier") if isinstance(item, Mapping) else None
        if not isinstance(ident, str) or ident not in ids:
            log.error("batchItemFailures names %r, not a record of the batch: the whole batch failed", ident)
            return set(ids)
        failed.add(ident)
    return failed


def delete_settled(sqs: SQSClient, url: str, messages: list[dict[str, Any]]) -> list[str]:
    """Delete the records a batch settled (``DeleteMessageBatch``, ten a request, as the event source
    mapping does); the message ids deleted. A failure is logged: those records reappear."""
    deleted: list[str] = []
    for start in range(0, len(messages), DELETE_BATCH):
        chunk = messages[start : start + DELETE_BATCH]
        try:
            response = sqs.delete_message_batch(
                QueueUrl=url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(chunk)],
            )
        except Exception:
            log.warning("DeleteMessageBatch on %s failed; the records reappear", url, exc_info=True)
            continue
        for ok in response.get("Successful", []):
            deleted.append(chunk[int(ok["Id"])]["MessageId"])
        for bad in response.get("Failed", []):
            log.warning("deleting %s failed: %s", chunk[int(bad["Id"])]["MessageId"], bad.get("Message"))
    return deleted
