"""A tracked, idempotent job's start: the claim of its idempotency key, read as ``running``.

A tracked job keyed by its own id (no ``key=``) that the consumer runs under its idempotency key
(idempotent, not batched, a consumer with an idempotency table) has two records of its start: the
cancel check's start claim in the state table and the idempotency record of ``(type, id)``, which
Powertools claims (``INPROGRESS``) before the run and completes (``COMPLETED``, with the result) after
it. For such a job the consumer writes no start claim (issue 13: one DynamoDB write less a job).
Instead:

* right after its key's claim, before the job's code, the run reads the job's cancel marker (one
  consistent read); a cancel sets that marker before it looks at the key. Each side writes, then reads
  what the other writes, so at least one sees the other whatever the race: the run that finds the
  marker does not start (its record completes as :data:`CANCELLED_FIELD` and it is acknowledged
  unrun), and a cancel that finds the key held (:func:`holder`) answers that the run was told
  (``signalled``). Every attempt and every copy of a delivery does this, so none starts after a cancel;
* a status read (:func:`read`, :func:`merged_with`) sees ``running`` while the record is in progress
  (the record is kept as long as a status, 7 days, so that its start time can be read back), and the
  completion, which holds the outcome (start, end, attempt, result): the consumer writes no outcome
  for such a run that succeeded (issue 13: another write less), so its status item says what it said
  before (``queued``, or ``retrying`` after a failed attempt). The read after the claim also says
  whether the job has a status item: one sent with ``"track": true`` by a producer that wrote none
  gets its outcome written, or nothing would say it by its id. The console's lists and counts and a
  bulk cancel, which find status items by a Scan, merge a page's records with :func:`merged_all`
  (one ``BatchGetItem`` per 100).

:func:`claims_key` is the one rule the cancel gate and the pipeline share. The attribute names and
the record id are Powertools' (``DynamoDBPersistenceLayer``'s defaults, key prefix ``jf``);
``tests/functional/test_key_status.py`` checks them against the records it writes.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from jobframework.status import STATUS_TTL_SECONDS, JobState, JobStatus, now_iso
from jobframework.stores.items import batch_get, from_item

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from jobframework.envelope import Envelope
    from jobframework.jobs import Job

KEY_PREFIX = "jf"
"""Powertools' ``key_prefix`` of the consumer's idempotent function."""
CANCELLED_FIELD = "cancelled"
"""The response field of a run that found its job cancelled and did not start."""
IN_PROGRESS, COMPLETED = "INPROGRESS", "COMPLETED"
BATCH_GET_ATTEMPTS = 5
"""Requests a chunk of records at most (its unprocessed keys asked again; then it raises)."""
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


def read_many(
    client: DynamoDBClient, table: str, jobs: Iterable[tuple[str, str]], *, consistent: bool = False
) -> dict[str, dict[str, Any]]:
    """The records of jobs keyed by their ids, ``(job_type, job_id)`` each, by job id (one
    ``BatchGetItem`` per 100; for lists, where an eventually consistent read will do)."""
    by_record = {record_id(job_type, job_id): job_id for job_type, job_id in jobs}
    keys = [{"id": {"S": rid}} for rid in by_record]
    records, left = batch_get(client, table, keys, consistent=consistent, attempts=BATCH_GET_ATTEMPTS)
    if left:
        raise RuntimeError(f"{left} idempotency records were not read")
    return {by_record[str(record["id"])]: record for record in records}


def merged_all(
    client: DynamoDBClient, table: str, statuses: Sequence[JobStatus], now: float
) -> list[JobStatus]:
    """``statuses`` (a list's, as a scan found them) each as its job's idempotency record moves it on:
    a succeeded run whose key's claim was its start leaves its status item as it was (issue 13)."""
    movable = [s for s in statuses if s.type and s.status in MOVABLE_STATES and keyed_by_id(s.id, s.key)]
    records = read_many(client, table, ((str(s.type), s.id) for s in movable))
    return [merged_with(s, records.get(s.id), now) for s in statuses]


def _response(record: dict[str, Any]) -> dict[str, Any]:
    """A completed record's saved response (``{}`` when it holds none, or not a JSON object)."""
    try:
        response = json.loads(record.get("data") or "{}")
    except ValueError:
        return {}
    return response if isinstance(response, dict) else {}


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
        # The expiry is whole seconds: never show a start before the job's last recorded change.
        started_at = max(started_at, status.updated_at or "", status.enqueued_at or "")
        running = {
            "status": JobState.RUNNING,
            "attempts": attempts,
            "started_at": started_at,
            "next_attempt_at": None,
        }
        return status.model_copy(update={**running, "updated_at": max(status.updated_at or "", started_at)})
    if record.get("status") != COMPLETED:
        return status
    response = _response(record)
    finished_at = response.get("finished_at") or status.updated_at
    if response.get(CANCELLED_FIELD):
        update: dict[str, Any] = {"status": JobState.CANCELLED, "reason": "cancelled"}
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
    update["next_attempt_at"] = None  # (the retry it waited for has run)
    update["progress"] = update["progress_note"] = None  # (what the run said of itself while it ran)
    return status.model_copy(update={**update, "finished_at": finished_at, "updated_at": finished_at})


class KeyHolder(StrEnum):
    """What holds a job's key, as a cancel finds it (:func:`holder`)."""

    RUN = "run"
    """A run in progress (its lease not lapsed): it goes on and sees ``ctx.cancelled``."""
    FINISHED = "finished"
    """A run completed it: too late."""
    CANCEL = "cancel"
    """A run found the job cancelled and did not start."""


def holder(client: DynamoDBClient, table: str, job_type: str, job_id: str) -> KeyHolder | None:
    """What holds the key of a job keyed by its id (a consistent read), ``None`` when nothing does."""
    record = read(client, table, job_type, job_id)
    now = time.time()
    if record is None or float(record.get("expiration", 0)) < now:
        return None
    if record.get("status") == IN_PROGRESS:
        return KeyHolder.RUN if float(record.get("in_progress_expiration", 0)) / 1000 > now else None
    return KeyHolder.CANCEL if _response(record).get(CANCELLED_FIELD) else KeyHolder.FINISHED


def claims_key(runner_table: str | None, key_table: str | None, env: Envelope, job: Job[Any]) -> bool:
    """Whether the run of ``env`` starts with its key's claim instead of the start claim: a tracked job
    keyed by its id, idempotent and not batched, on a consumer whose idempotency table
    (``runner_table``) is the one its status reads (``key_table``)."""
    return (
        runner_table is not None
        and runner_table == key_table
        and env.track is True
        and job.idempotent
        and job.batch is None
        and keyed_by_id(env.id, env.key)
    )
