"""The framework's state table: job status, enqueue dedup markers, retry-budget counters.

One DynamoDB table (``pk``, ``sk``, TTL attribute ``expires_at``), reached with the
low-level client so that Lambda loads nothing heavy. Items:

| item | pk | sk |
|---|---|---|
| job status | ``job#<id>`` | ``status`` |
| dedup marker | ``dedup#<key>`` | ``marker`` |
| retry-budget counter | ``budget#<queue>`` | ``<minute bucket>`` |
| saga record | ``saga#<id>`` | ``saga`` |
| flow control (cancel, pause, debounce, limits) | see :mod:`jobframework.flow` | |
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from jobframework.errors import EnqueueError
from jobframework.status import (
    FINAL_STATES,
    MAX_RESULT_CHARS,
    STATUS_TTL_SECONDS,
    JobState,
    JobStatus,
    no_status,
    summarize,
)
from jobframework.stores.job_records import JobRecords
from jobframework.stores.job_records_dynamodb import DynamoJobRecords

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

CLAIM_ATTEMPTS = 5
PENDING_WAIT_SECONDS = 5.0
"""How long a duplicate enqueue waits for the first one's send to be confirmed."""


class StateStore:
    """Reads and writes the state table.

    Args:
        table: the table's name.
        client: a boto3 DynamoDB client.
    """

    def __init__(self, table: str, client: DynamoDBClient, *, jobs: JobRecords | None = None) -> None:
        self.table = table
        self.client = client
        self.jobs: JobRecords = jobs if jobs is not None else DynamoJobRecords(table, client)
        """A job's records: status, start claim, cancel marker (:mod:`jobframework.stores.job_records`)."""

    # -- job status ------------------------------------------------------------------------------------

    def put_statuses(self, statuses: list[dict[str, Any]], ttl: int = STATUS_TTL_SECONDS) -> None:
        """Write whole status records, 25 per ``BatchWriteItem`` (the consumer's per-batch write)."""
        self.jobs.put_statuses(statuses, ttl)

    def get_status(self, job_id: str) -> JobStatus | None:
        """A tracked job's status (``running`` while a claimed run has not ended), or ``None``."""
        return self.jobs.get_status(job_id)

    # -- enqueue dedup ----------------------------------------------------------------------------------

    def claim_key(
        self, key: str, job_id: str, window: float, lease: float = 30.0, *, tracked: bool = False
    ) -> str | None:
        """Claim ``key`` for ``job_id`` for ``window`` seconds.

        Returns ``None`` when the claim is ours, else the id of the job that holds the key. A claim
        whose send never completed (``pending`` past its lease) is taken over. A ``tracked`` job's
        claim is confirmed by its status record (written once it is sent), not by :meth:`confirm_key`.
        """
        from botocore.exceptions import ClientError

        stale = ""  # a tracked claim found unsent past its lease: taken over by naming its holder
        for _ in range(CLAIM_ATTEMPTS):
            now = time.time()
            try:
                self.client.put_item(
                    TableName=self.table,
                    Item={
                        "pk": {"S": f"dedup#{key}"},
                        "sk": {"S": "marker"},
                        "job_id": {"S": job_id},
                        "state": {"S": "pending"},
                        "lease_until": {"N": f"{now + lease:.3f}"},
                        "expires_at": {"N": f"{now + window:.3f}"},
                        "tracked": {"BOOL": tracked},
                    },
                    # A pending claim past its lease is free unless it is tracked: a tracked claim's
                    # confirmation is its job's status, which only _sent_holder reads.
                    ConditionExpression=(
                        "attribute_not_exists(pk) OR expires_at < :now"
                        " OR (#state = :pending AND lease_until < :now"
                        " AND (attribute_not_exists(tracked) OR tracked = :no OR job_id = :stale))"
                    ),
                    ExpressionAttributeNames={"#state": "state"},
                    ExpressionAttributeValues={
                        ":now": {"N": f"{now:.3f}"},
                        ":pending": {"S": "pending"},
                        ":no": {"BOOL": False},
                        ":stale": {"S": stale},
                    },
                )
                return None
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                    raise
            holder, stale = self._sent_holder(key)
            if holder is not None:
                return holder
            # The holder released its claim (its send failed) or its lease ran out: claim again.
        raise EnqueueError(f"could not claim dedup key {key!r}: it kept changing hands; try again")

    def _sent_holder(self, key: str) -> tuple[str | None, str]:
        """The id of the job holding ``key`` once its send is confirmed, or ``None`` when the claim is
        free to take again (and then the id of a stale holder to take it from, or ``""``). Waits
        (briefly) while the holder is still sending, so that a duplicate never gets the id of a job
        whose send then fails.

        Raises:
            EnqueueError: the holder is still sending after ``PENDING_WAIT_SECONDS``.
        """
        deadline = time.monotonic() + PENDING_WAIT_SECONDS
        while True:
            item = self.client.get_item(
                TableName=self.table,
                Key={"pk": {"S": f"dedup#{key}"}, "sk": {"S": "marker"}},
                ConsistentRead=True,
            ).get("Item", {})
            holder = str(item.get("job_id", {}).get("S", ""))
            now = time.time()
            if not holder or float(item.get("expires_at", {}).get("N", "0")) < now:
                return None, ""
            if item.get("state", {}).get("S") == "sent":
                return holder, ""
            tracked = bool(item.get("tracked", {}).get("BOOL"))
            if tracked and self._has_status(holder):
                return holder, ""  # a tracked job's status is written once it is sent: its confirmation
            if float(item.get("lease_until", {}).get("N", "0")) < now:
                return None, holder if tracked else ""  # its sender died or never confirmed: take it over
            if time.monotonic() > deadline:
                raise EnqueueError(
                    f"job {holder} with dedup key {key!r} is still being sent by another enqueue; try again"
                )
            time.sleep(0.05)

    def _has_status(self, job_id: str) -> bool:
        return "Item" in self.client.get_item(
            TableName=self.table,
            Key={"pk": {"S": f"job#{job_id}"}, "sk": {"S": "status"}},
            ConsistentRead=True,
            ProjectionExpression="pk",
        )

    def confirm_key(self, key: str, job_id: str) -> None:
        """Mark the claim as sent (no longer taken over when its lease passes)."""
        self.client.update_item(
            TableName=self.table,
            Key={"pk": {"S": f"dedup#{key}"}, "sk": {"S": "marker"}},
            UpdateExpression="SET #state = :sent",
            ConditionExpression="job_id = :id",
            ExpressionAttributeNames={"#state": "state"},
            ExpressionAttributeValues={":sent": {"S": "sent"}, ":id": {"S": job_id}},
        )

    def release_key(self, key: str, job_id: str) -> None:
        """Drop our claim (the send failed), so that a retry of the enqueue is not blocked."""
        from botocore.exceptions import ClientError

        try:
            self.client.delete_item(
                TableName=self.table,
                Key={"pk": {"S": f"dedup#{key}"}, "sk": {"S": "marker"}},
                ConditionExpression="job_id = :id",
                ExpressionAttributeValues={":id": {"S": job_id}},
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise

    # -- retry budget -----------------------------------------------------------------------------------

    def budget_window(
        self, queue: str, since_bucket: int, before_bucket: int | None = None
    ) -> tuple[int, int]:
        """First attempts and retries of ``queue`` counted in buckets ``>= since_bucket`` (and
        ``< before_bucket`` when given)."""
        values = {":pk": {"S": f"budget#{queue}"}, ":since": {"S": f"{since_bucket:012d}"}}
        condition = "pk = :pk AND sk >= :since"
        if before_bucket is not None:
            if before_bucket <= since_bucket:
                return 0, 0
            condition = "pk = :pk AND sk BETWEEN :since AND :last"
            values[":last"] = {"S": f"{before_bucket - 1:012d}"}
        response = self.client.query(
            TableName=self.table,
            KeyConditionExpression=condition,
            ExpressionAttributeValues=values,
            ConsistentRead=True,
        )
        first = retries = 0
        for item in response.get("Items", []):
            first += int(item.get("first_attempts", {}).get("N", "0"))
            retries += int(item.get("retries", {}).get("N", "0"))
        return first, retries

    def budget_add(self, queue: str, bucket: int, first_attempts: int, retries: int, ttl: int) -> None:
        """Add this batch's counts to the current bucket (one write per batch)."""
        self.client.update_item(
            TableName=self.table,
            Key={"pk": {"S": f"budget#{queue}"}, "sk": {"S": f"{bucket:012d}"}},
            UpdateExpression="ADD first_attempts :f, retries :r SET expires_at = :exp",
            ExpressionAttributeValues={
                ":f": {"N": str(first_attempts)},
                ":r": {"N": str(retries)},
                ":exp": {"N": str(int(time.time()) + ttl)},
            },
        )

    def budget_reserve(self, queue: str, bucket: int, limit: int, ttl: int) -> bool:
        """Take one retry in ``bucket`` if it holds fewer than ``limit``: one conditional ``ADD``, atomic
        across concurrent consumers. ``False`` when the bucket is full."""
        try:
            self.client.update_item(
                TableName=self.table,
                Key={"pk": {"S": f"budget#{queue}"}, "sk": {"S": f"{bucket:012d}"}},
                UpdateExpression="ADD retries :one SET expires_at = :exp",
                ConditionExpression="attribute_not_exists(retries) OR retries < :limit",
                ExpressionAttributeValues={
                    ":one": {"N": "1"},
                    ":limit": {"N": str(limit)},
                    ":exp": {"N": str(int(time.time()) + ttl)},
                },
            )
        except self.client.exceptions.ConditionalCheckFailedException:
            return False
        return True


__all__ = [  # the status model lives in jobframework.status; these names stay importable from here
    "CLAIM_ATTEMPTS",
    "FINAL_STATES",
    "MAX_RESULT_CHARS",
    "PENDING_WAIT_SECONDS",
    "STATUS_TTL_SECONDS",
    "JobState",
    "JobStatus",
    "StateStore",
    "no_status",
    "summarize",
]
