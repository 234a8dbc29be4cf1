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

import json
import time
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from jobframework.errors import EnqueueError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

STATUS_TTL_SECONDS = 7 * 24 * 3600
CLAIM_ATTEMPTS = 5
PENDING_WAIT_SECONDS = 5.0
"""How long a duplicate enqueue waits for the first one's send to be confirmed."""
MAX_RESULT_CHARS = 1000


class JobState(StrEnum):
    QUEUED = "queued"
    SCHEDULED = "scheduled"
    RUNNING = "running"
    RETRYING = "retrying"
    SUCCEEDED = "succeeded"
    DEAD = "dead"
    CANCELLED = "cancelled"
    """Acknowledged unrun: ``client.cancel`` before it started, or superseded by a debounce."""
    EXPIRED = "expired"
    """Acknowledged unrun: not started by its deadline (``expires_in`` / ``expires_after``)."""


FINAL_STATES = frozenset({JobState.SUCCEEDED, JobState.DEAD, JobState.CANCELLED, JobState.EXPIRED})


class JobStatus(BaseModel):
    """What is known of one job (``client.status(job_id)``, ``jf status ID``, ``GET /jobs/{id}``)."""

    id: str
    type: str | None = None
    status: JobState
    attempts: int = 0
    key: str | None = None
    enqueued_at: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    updated_at: str | None = None
    error: str | None = None
    reason: str | None = None
    result: Any = None
    trace_id: str | None = None
    """The W3C trace id the job travelled under (from its enqueue), to find its spans and logs."""


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def summarize(result: Any) -> str | None:
    """A JSON summary of a job's return value, at most 1000 characters (``None`` for ``None``)."""
    if result is None:
        return None
    from pydantic_core import to_jsonable_python

    try:
        text = json.dumps(to_jsonable_python(result), separators=(",", ":"))
    except Exception:
        text = json.dumps(repr(result))
    return text if len(text) <= MAX_RESULT_CHARS else json.dumps(text[: MAX_RESULT_CHARS - 20] + "...")


def no_status(job_id: str) -> str:
    """What to tell someone who asked for a job that has no status record."""
    return (
        f"no job {job_id} in the state table: an unknown id, an expired status (7 days), or a job that "
        "is not tracked (@job(..., track=True) or enqueue(..., track=True) keeps a status)"
    )


class StateStore:
    """Reads and writes the state table.

    Args:
        table: the table's name.
        client: a boto3 DynamoDB client.
    """

    def __init__(self, table: str, client: DynamoDBClient) -> None:
        self.table = table
        self.client = client

    # -- job status ------------------------------------------------------------------------------------

    def set_status(
        self,
        job_id: str,
        state: JobState,
        *,
        job_type: str | None = None,
        attempts: int | None = None,
        key: str | None = None,
        enqueued_at: str | None = None,
        error: str | None = None,
        reason: str | None = None,
        result: str | None = None,
        trace_id: str | None = None,
        ttl: int = STATUS_TTL_SECONDS,
    ) -> None:
        """Record a job's state; later fields overwrite earlier ones, ``started_at`` is set once.

        ``queued`` and ``scheduled`` are written only over nothing or each other, so a producer that
        records them after a fast consumer already ran the job does not move the status back.
        """
        now = _now()
        values: dict[str, Any] = {
            ":status": {"S": state.value},
            ":now": {"S": now},
            ":exp": {"N": str(int(time.time()) + ttl)},
        }
        # Every attribute by placeholder: several (status, error, ...) are DynamoDB reserved words.
        names = {"#status": "status"}
        sets = ["#status = :status", "updated_at = :now", "expires_at = :exp"]
        for name, value in (
            ("job_type", job_type),
            ("job_key", key),
            ("enqueued_at", enqueued_at),
            ("error", error),
            ("reason", reason),
            ("job_result", result),
            ("trace_id", trace_id),
        ):
            if value is not None:
                values[f":{name}"] = {"S": value}
                sets.append(f"#{name} = :{name}")
                names[f"#{name}"] = name
        if attempts is not None:
            values[":attempts"] = {"N": str(attempts)}
            sets.append("attempts = :attempts")
        if state is JobState.RUNNING:
            sets.append("started_at = if_not_exists(started_at, :now)")
        if state in FINAL_STATES:
            sets.append("finished_at = :now")
        if state is JobState.SUCCEEDED:
            sets.append("#error = :none")
            names["#error"] = "error"
            values[":none"] = {"NULL": True}
        from botocore.exceptions import ClientError

        condition: dict[str, str] = {}
        if state in (JobState.QUEUED, JobState.SCHEDULED):
            # The consumer may have started (or finished) the job before the producer gets here.
            condition["ConditionExpression"] = (
                "attribute_not_exists(#status) OR #status IN (:queued, :scheduled)"
            )
            values[":queued"] = {"S": JobState.QUEUED.value}
            values[":scheduled"] = {"S": JobState.SCHEDULED.value}
        try:
            self.client.update_item(
                TableName=self.table,
                Key={"pk": {"S": f"job#{job_id}"}, "sk": {"S": "status"}},
                UpdateExpression="SET " + ", ".join(sets),
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
                **condition,  # type: ignore[arg-type]
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            # Already running or done: a late "queued" must not win.

    def put_statuses(self, statuses: list[dict[str, Any]], ttl: int = STATUS_TTL_SECONDS) -> None:
        """Write whole status records, 25 per ``BatchWriteItem`` (the consumer's per-batch write).

        Each dict has ``id``, ``status`` (a :class:`JobState`) and any of ``type``, ``key``,
        ``attempts``, ``enqueued_at``, ``started_at``, ``finished_at``, ``error``, ``reason``,
        ``result``. Unprocessed items are resent a few times; what is still left raises.
        """
        now = _now()
        expires = str(int(time.time()) + ttl)
        requests = []
        for st in statuses:
            item: dict[str, Any] = {
                "pk": {"S": f"job#{st['id']}"},
                "sk": {"S": "status"},
                "status": {"S": JobState(st["status"]).value},
                "updated_at": {"S": now},
                "expires_at": {"N": expires},
            }
            for field, attribute in _STATUS_ATTRIBUTES.items():
                value = st.get(field)
                if value is not None:
                    item[attribute] = {"N": str(value)} if field == "attempts" else {"S": str(value)}
            requests.append({"PutRequest": {"Item": item}})
        for start in range(0, len(requests), 25):
            pending: dict[str, Any] = {self.table: requests[start : start + 25]}
            for attempt in range(4):
                left = self.client.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
                if not left:
                    break
                pending = left
                time.sleep(0.05 * 2**attempt)
            else:
                raise RuntimeError(f"{len(pending.get(self.table, []))} status records were not written")

    def get_status(self, job_id: str) -> JobStatus | None:
        """A tracked job's status, or ``None`` for an id with no status record.

        One consistent ``Query`` reads the job's items together: the status record (written at
        enqueue and with the outcome) and the start claim of the cancel check (``sk = flow``), which
        is what says ``running``: a job whose claimed run has not ended shows ``running`` with its
        ``started_at`` without the consumer writing a status of its own for the start.
        """
        items = self.client.query(
            TableName=self.table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": f"job#{job_id}"}},
            ConsistentRead=True,
        ).get("Items", [])
        by_sk = {item["sk"]["S"]: {k: _plain(v) for k, v in item.items()} for item in items}
        plain = by_sk.get("status")
        if plain is None:
            return None
        result = plain.get("job_result")
        state = JobState(plain["status"])
        started_at = plain.get("started_at")
        claim = by_sk.get("flow", {})
        attempts = int(plain.get("attempts") or 0)
        if claim.get("started_at"):
            started_at = started_at or claim["started_at"]
            started_attempt = int(claim.get("started_attempt") or 0)
            running = float(claim.get("runs_until") or 0) > time.time() and started_attempt > (
                attempts if state is JobState.RETRYING else 0
            )
            if running and state in (JobState.QUEUED, JobState.SCHEDULED, JobState.RETRYING):
                state, attempts, started_at = JobState.RUNNING, started_attempt, claim["started_at"]
        return JobStatus(
            id=job_id,
            type=plain.get("job_type"),
            status=state,
            attempts=attempts,
            key=plain.get("job_key"),
            enqueued_at=plain.get("enqueued_at"),
            started_at=started_at,
            finished_at=plain.get("finished_at"),
            updated_at=plain.get("updated_at"),
            error=plain.get("error"),
            reason=plain.get("reason"),
            result=json.loads(result) if isinstance(result, str) else None,
            trace_id=plain.get("trace_id"),
        )

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


_STATUS_ATTRIBUTES = {
    "type": "job_type",
    "key": "job_key",
    "attempts": "attempts",
    "enqueued_at": "enqueued_at",
    "started_at": "started_at",
    "finished_at": "finished_at",
    "error": "error",
    "reason": "reason",
    "result": "job_result",
    "trace_id": "trace_id",
}
"""Status fields and the attributes that hold them (those :meth:`StateStore.get_status` reads)."""


def _plain(value: Any) -> Any:
    if "S" in value:
        return value["S"]
    if "N" in value:
        return value["N"]
    if "BOOL" in value:
        return value["BOOL"]
    return None
