"""A tracked, idempotent job's run, kept in its idempotency record and read as its status.

A tracked job that is idempotent and keyed by its own id (no ``key=``) has two records that say the
same thing: its status in the state table and the idempotency record of ``(type, id)``, which
Powertools claims (``INPROGRESS``) when the run starts and completes (``COMPLETED``, with the result)
when it ends. For such a job the consumer writes neither the start claim nor the finished status (issue
13: a tracked, idempotent job costs its floor, three writes: the status at enqueue, the claim and the
completion). Instead:

* the record's response holds what the status needs (``result``, ``finished_at``, ``attempt``) and
  the record is kept as long as the status (7 days, not the idempotency default of 24 hours);
* a status read (:func:`read`, :func:`merged_with`) sees ``running`` while the record is in progress
  and ``succeeded`` once it completed; ``retrying``, ``dead`` and the rest are still the status item's
  (a failed run's record is deleted);
* a cancel (:func:`claim_for_cancel`) writes a completed record that says ``cancelled``, on the same
  condition as Powertools' claim, so that one of the two wins: the run's claim then finds the cancel
  (:data:`CANCELLED_FIELD`) and the job is acknowledged unrun, or the cancel finds the run.

The attribute names and the record id are Powertools' (``DynamoDBPersistenceLayer``'s defaults, key
prefix ``jf``); ``tests/functional/test_key_status.py`` checks them against the records it writes.
"""

from __future__ import annotations

import hashlib
import json
import time
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from jobframework.status import STATUS_TTL_SECONDS, JobState, JobStatus, now_iso
from jobframework.stores.items import from_item, to_item

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

KEY_PREFIX = "jf"
"""Powertools' ``key_prefix`` of the consumer's idempotent function."""
CANCELLED_FIELD = "cancelled"
"""The response field of a record a cancel wrote (the run that finds it does not start)."""
IN_PROGRESS, COMPLETED = "INPROGRESS", "COMPLETED"
MOVABLE_STATES = frozenset(
    {JobState.QUEUED, JobState.SCHEDULED, JobState.RETRYING, JobState.RUNNING, JobState.DEAD}
)
"""States the record can move on: ``running`` may come from a later attempt's start claim, and ``dead``
be redriven (a dead job's record was deleted, so a record is newer). Succeeded, cancelled and expired
are the status item's own."""


def record_id(job_type: str, key: str) -> str:
    """The idempotency record's id of ``(job_type, key)``, as Powertools hashes it.

    >>> record_id("reports.generate", "job-1")
    'jf#252ae050dc038577a8ca6ef835944143'
    """
    data = json.dumps(f"{job_type}:{key}", sort_keys=True).encode()
    return f"{KEY_PREFIX}#{hashlib.md5(data, usedforsecurity=False).hexdigest()}"


def keyed_by_id(job_id: str, key: str | None) -> bool:
    """Whether a job's idempotency key is its own id (the default: no ``key=``)."""
    return key is None or key == job_id


def response_fields(result: str | None, attempt: int, started_at: str) -> dict[str, Any]:
    """What a completed run's record holds for its status (beside Powertools' own ``result``)."""
    return {"result": result, "started_at": started_at, "finished_at": now_iso(), "attempt": attempt}


def read(client: DynamoDBClient, table: str, job_type: str, job_id: str) -> dict[str, Any] | None:
    """The record of a job keyed by its id, as plain values (a consistent read), or ``None``."""
    item = client.get_item(
        TableName=table,
        Key={"id": {"S": record_id(job_type, job_id)}},
        ConsistentRead=True,
    ).get("Item")
    return from_item(item) if item else None


def merged_with(status: JobStatus, record: dict[str, Any] | None, now: float) -> JobStatus:
    """``status`` as the job's idempotency record moves it on (see the module), at ``now``."""
    if record is None or status.status not in MOVABLE_STATES or float(record.get("expiration", 0)) < now:
        return status
    if record.get("status") == IN_PROGRESS:
        if status.status is JobState.RUNNING or float(record.get("in_progress_expiration", 0)) / 1000 <= now:
            return status  # a run that was cut off: its lease lapsed, the status item says what is next
        attempts = (status.attempts if status.status is JobState.RETRYING else 0) + 1
        # The in-progress record expires a status's lifetime after its run started (idempotency.py).
        started = float(record.get("expiration", 0)) - STATUS_TTL_SECONDS
        started_at = datetime.fromtimestamp(started, UTC).isoformat(timespec="milliseconds")
        running = {"status": JobState.RUNNING, "attempts": attempts, "started_at": started_at}
        return status.model_copy(update={**running, "updated_at": max(status.updated_at or "", started_at)})
    if record.get("status") != COMPLETED:
        return status
    try:
        response = json.loads(record.get("data") or "{}")
    except ValueError:
        response = {}
    if not isinstance(response, dict):
        response = {}
    finished_at = response.get("finished_at") or status.updated_at
    if response.get(CANCELLED_FIELD):
        update: dict[str, Any] = {"status": JobState.CANCELLED, "reason": "cancelled before it started"}
    else:
        result = response.get("result")
        update = {
            "status": JobState.SUCCEEDED,
            "attempts": int(response.get("attempt") or status.attempts + 1),
            "result": json.loads(result) if isinstance(result, str) else None,
            "error": None,
            "reason": None,
            "started_at": response.get("started_at") or status.started_at,
        }
    return status.model_copy(update={**update, "finished_at": finished_at, "updated_at": finished_at})


class KeyHolder(StrEnum):
    """What a cancel found in the job's idempotency record."""

    CANCEL = "cancel"
    """The cancel holds the key now (or held it already): no run will start."""
    RUN = "run"
    """A run holds it (in progress): it goes on and sees ``ctx.cancelled``."""
    FINISHED = "finished"
    """A run completed it: too late."""


def claim_for_cancel(
    client: DynamoDBClient, table: str, job_type: str, job_id: str, keep_seconds: int
) -> KeyHolder:
    """Write the cancel's completed record unless a live run holds the key (Powertools' own condition)."""
    now = time.time()
    response = json.dumps({CANCELLED_FIELD: True, "finished_at": now_iso()})
    try:
        client.put_item(
            TableName=table,
            Item=to_item(
                {
                    "id": record_id(job_type, job_id),
                    "status": COMPLETED,
                    "expiration": int(now) + keep_seconds,
                    "data": response,
                }
            ),
            ConditionExpression=(
                "attribute_not_exists(#id) OR #expiry < :now OR "
                "(#status = :inprogress AND attribute_exists(#lease) AND #lease < :now_ms)"
            ),
            ExpressionAttributeNames={
                "#id": "id",
                "#expiry": "expiration",
                "#status": "status",
                "#lease": "in_progress_expiration",
            },
            ExpressionAttributeValues=to_item(
                {":now": int(now), ":now_ms": int(now * 1000), ":inprogress": IN_PROGRESS}
            ),
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
    except client.exceptions.ConditionalCheckFailedException as exc:
        old: Any = exc.response.get("Item") or {}  # ReturnValuesOnConditionCheckFailure's old item
        held = from_item(old)
        if held.get("status") == IN_PROGRESS:
            return KeyHolder.RUN
        try:
            cancelled = bool(json.loads(held.get("data") or "{}").get(CANCELLED_FIELD))
        except (ValueError, AttributeError):
            cancelled = False
        return KeyHolder.CANCEL if cancelled else KeyHolder.FINISHED
    return KeyHolder.CANCEL
