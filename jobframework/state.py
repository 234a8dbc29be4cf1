"""The framework's state table: job status, enqueue dedup markers, retry-budget counters.

One DynamoDB table (``pk``, ``sk``, TTL attribute ``expires_at``), reached with the
low-level client so that Lambda loads nothing heavy. A job's records and the dedup markers are
kept by :mod:`jobframework.stores` (``StateStore.jobs``, ``StateStore.dedup``: each an interface with
an in-memory twin); the retry budget's counter is here. Items:

| item | pk | sk |
|---|---|---|
| job status, start claim and cancel marker | ``job#<id>`` | ``status``, ``flow`` |
| dedup marker | ``dedup#<key>`` | ``marker`` |
| retry-budget counter | ``budget#<queue>`` | ``<minute bucket>`` |
| saga record | ``saga#<id>`` | ``saga`` |
| flow control (cancel, pause, debounce, limits) | see :mod:`jobframework.flow` | |
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from jobframework.status import (
    FINAL_STATES,
    MAX_RESULT_CHARS,
    STATUS_TTL_SECONDS,
    JobState,
    JobStatus,
    no_status,
    summarize,
)
from jobframework.stores.dedup import CLAIM_ATTEMPTS, PENDING_WAIT_SECONDS, DedupMarkers, DynamoDedupMarkers
from jobframework.stores.job_records import JobRecords
from jobframework.stores.job_records_dynamodb import DynamoJobRecords

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from jobframework.config import RuntimeConfig
    from jobframework.stores.sagas import SagaRecords


class StateStore:
    """Reads and writes the state table.

    Args:
        table: the table's name.
        client: a boto3 DynamoDB client.
        key_table: the idempotency table, where a tracked idempotent job keyed by its id has its start
            recorded (:mod:`jobframework.stores.key_records`); ``None``: statuses from this table alone.
    """

    def __init__(
        self,
        table: str,
        client: DynamoDBClient,
        *,
        jobs: JobRecords | None = None,
        dedup: DedupMarkers | None = None,
        sagas: SagaRecords | None = None,
        key_table: str | None = None,
    ) -> None:
        self.table = table
        self.client = client
        self.key_table = key_table
        """The idempotency table this store's statuses read (``None``: none)."""
        self.jobs: JobRecords = jobs if jobs is not None else DynamoJobRecords(table, client, key_table)
        """A job's records: status, start claim, cancel marker (:mod:`jobframework.stores.job_records`)."""
        self.dedup: DedupMarkers = dedup if dedup is not None else DynamoDedupMarkers(table, client)
        """Enqueue dedup markers (:mod:`jobframework.stores.dedup`)."""
        self._sagas = sagas

    @classmethod
    def of(cls, config: RuntimeConfig, client: DynamoDBClient) -> StateStore:
        """The state table of a deployment's configuration (its statuses read its idempotency table too)."""
        if not config.state_table:
            raise ValueError("the configuration names no state table (JF_STATE_TABLE)")
        return cls(config.state_table, client, key_table=config.idempotency_table)

    @property
    def sagas(self) -> SagaRecords:
        """Saga records (:mod:`jobframework.stores.sagas`; made on first use: most consumers run none)."""
        if self._sagas is None:
            from jobframework.stores.sagas import DynamoSagaRecords

            self._sagas = DynamoSagaRecords(self.table, self.client)
        return self._sagas

    # -- job status ------------------------------------------------------------------------------------

    def put_statuses(self, statuses: list[dict[str, Any]], ttl: int = STATUS_TTL_SECONDS) -> None:
        """Write whole status records, 25 per ``BatchWriteItem`` (the consumer's per-batch write)."""
        self.jobs.put_statuses(statuses, ttl)

    def get_status(self, job_id: str) -> JobStatus | None:
        """A tracked job's status (``running`` while a claimed run has not ended), or ``None``."""
        return self.jobs.get_status(job_id)

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
