"""A job's records in the state table (:class:`~jobframework.stores.job_records.JobRecords`).

Items are converted with boto3's ``TypeSerializer``/``TypeDeserializer``
(:mod:`jobframework.stores.items`); every write that must not undo another is conditional.
"""

from __future__ import annotations

import contextlib
import logging
import time
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from jobframework.status import FINAL_STATES, STATUS_TTL_SECONDS, JobState, JobStatus, now_iso
from jobframework.stores import key_records
from jobframework.stores.items import batch_get, from_item, to_item
from jobframework.stores.job_records import (
    CLAIM_FIELDS,
    EARLY_STATES,
    STATUS_FIELDS,
    StartCheck,
    StartClaim,
    kept_until,
    merged_status,
)
from jobframework.stores.key_records import KeyHolder

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

log = logging.getLogger(__name__)

FLOW_SK = "flow"
BATCH_WRITE_ITEMS = 25
"""Items per ``BatchWriteItem`` (DynamoDB's limit)."""


_STATUS_ATTRIBUTES = {
    "job_type": "type",
    "job_key": "key",
    "attempts": "attempts",
    "enqueued_at": "enqueued_at",
    "started_at": "started_at",
    "finished_at": "finished_at",
    "updated_at": "updated_at",
    "error": "error",
    "reason": "reason",
}
"""Status-item attribute -> :class:`JobStatus` field, of those a list shows (``set_status`` writes them)."""


def status_of_item(item: dict[str, Any]) -> JobStatus:
    """The :class:`JobStatus` a raw status item says (a scan's: the lists, a bulk cancel), without its
    start claim (:func:`jobframework.stores.job_records.with_claims` adds it)."""
    plain = from_item(item)
    values: dict[str, Any] = {"id": str(plain["pk"]).removeprefix("job#"), "status": plain["status"]}
    for attribute, name in _STATUS_ATTRIBUTES.items():
        value = plain.get(attribute)
        if value is not None:
            values[name] = int(value) if name == "attempts" else str(value)
    return JobStatus(**values)


def _key(job_id: str, sk: str) -> dict[str, Any]:
    return {"pk": {"S": f"job#{job_id}"}, "sk": {"S": sk}}


class DynamoJobRecords:
    """A job's status and flow items in the state table ``table``; with ``key_table`` (the idempotency
    table), a tracked idempotent job keyed by its id has its start read from its idempotency record."""

    def __init__(self, table: str, client: DynamoDBClient, key_table: str | None = None) -> None:
        self.table = table
        self.client = client
        self.key_table = key_table

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
        run_at: str | None = None,
        ttl: int = STATUS_TTL_SECONDS,
    ) -> None:
        now = now_iso()
        if state is JobState.SUCCEEDED:
            error = None  # a success clears the error (below)
        given = {
            "job_type": job_type,
            "attempts": attempts,
            "job_key": key,
            "enqueued_at": enqueued_at,
            "error": error,
            "reason": reason,
            "job_result": result,
            "trace_id": trace_id,
            "run_at": run_at,
        }
        plain: dict[str, Any] = {":status": state.value, ":now": now, ":exp": int(time.time()) + ttl}
        # Every attribute by placeholder: several (status, error, ...) are DynamoDB reserved words.
        names = {"#status": "status"}
        sets = ["#status = :status", "updated_at = :now", "expires_at = :exp"]
        for name, value in given.items():
            if value is not None:
                plain[f":{name}"] = value
                sets.append(f"#{name} = :{name}")
                names[f"#{name}"] = name
        if state is JobState.RUNNING:
            sets.append("started_at = if_not_exists(started_at, :now)")
        if state in FINAL_STATES:
            sets.append("finished_at = :now")
        remove = ""
        if state is JobState.SUCCEEDED:
            remove = " REMOVE #error"
            names["#error"] = "error"
        condition: dict[str, str] = {}
        if state in EARLY_STATES:
            # The consumer may have started (or finished) the job before the producer gets here.
            condition["ConditionExpression"] = (
                "attribute_not_exists(#status) OR #status IN (:queued, :scheduled)"
            )
            plain[":queued"], plain[":scheduled"] = JobState.QUEUED.value, JobState.SCHEDULED.value
        # Already running or done: a late "queued" must not win.
        with contextlib.suppress(self.client.exceptions.ConditionalCheckFailedException):
            self.client.update_item(
                TableName=self.table,
                Key=_key(job_id, "status"),
                UpdateExpression="SET " + ", ".join(sets) + remove,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=to_item(plain),
                **condition,  # type: ignore[arg-type]
            )

    def claims(self, job_ids: list[str]) -> dict[str, dict[str, Any]]:
        """One ``BatchGetItem`` per 100 keys (consistent reads); unprocessed keys asked again a few times."""
        keys = [_key(i, FLOW_SK) for i in dict.fromkeys(job_ids)]
        flows, left = batch_get(self.client, self.table, keys, consistent=True, attempts=4)
        if left:  # (those jobs read as their status items say: queued, not running)
            log.warning("%d start claims were not read (throttled)", left)
        return {str(flow["pk"]).removeprefix("job#"): flow for flow in flows}

    def set_progress(self, job_id: str, percent: float, note: str | None) -> bool:
        try:
            self.client.update_item(
                TableName=self.table,
                Key=_key(job_id, "status"),
                # (not updated_at: a running job's start is read as no earlier than its status's last
                # change, and a progress report is no change of its state)
                UpdateExpression="SET progress = :p, progress_note = :n, progress_at = :now",
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeValues=to_item(
                    {":p": Decimal(str(round(percent, 2))), ":n": note, ":now": now_iso()}
                ),
            )
        except self.client.exceptions.ConditionalCheckFailedException:
            return False  # no status item (untracked, or gone): none is made for it
        return True

    def requeue(self, job_id: str, reason: str) -> bool:
        try:
            self.client.update_item(
                TableName=self.table,
                Key=_key(job_id, "status"),
                UpdateExpression=(
                    "SET #status = :queued, #reason = :reason, updated_at = :now, expires_at = :exp "
                    "ADD redrives :one REMOVE finished_at, next_attempt_at"
                ),
                ConditionExpression="#status = :dead",
                ExpressionAttributeNames={"#status": "status", "#reason": "reason"},
                ExpressionAttributeValues=to_item(
                    {
                        ":queued": JobState.QUEUED.value,
                        ":dead": JobState.DEAD.value,
                        ":reason": reason,
                        ":now": now_iso(),
                        ":exp": int(time.time()) + STATUS_TTL_SECONDS,
                        ":one": 1,
                    }
                ),
            )
        except self.client.exceptions.ConditionalCheckFailedException:
            return False  # not dead (run again already, or no status): as it is
        return True

    def lapse_claim(self, job_id: str, *, died_at: str) -> None:
        with contextlib.suppress(self.client.exceptions.ConditionalCheckFailedException):
            self.client.update_item(
                TableName=self.table,
                Key=_key(job_id, FLOW_SK),
                UpdateExpression="SET runs_until = :zero",
                ConditionExpression="runs_until > :zero AND started_at < :died",
                ExpressionAttributeValues=to_item({":zero": 0, ":died": died_at}),
            )

    def put_statuses(self, statuses: list[dict[str, Any]], ttl: int = STATUS_TTL_SECONDS) -> None:
        """25 records a ``BatchWriteItem``; unprocessed ones are resent a few times, then it raises."""
        now, expires = now_iso(), int(time.time()) + ttl
        requests = []
        for st in statuses:
            plain: dict[str, Any] = {"pk": f"job#{st['id']}", "sk": "status", "updated_at": now}
            plain |= {"status": JobState(st["status"]).value, "expires_at": expires}
            plain |= {attribute: st.get(field) for field, attribute in STATUS_FIELDS.items()}
            plain["updated_at"] = plain.get("finished_at") or now  # a finish is the last change
            if plain["attempts"] is not None:
                plain["attempts"] = int(plain["attempts"])
            requests.append({"PutRequest": {"Item": to_item(plain)}})
        for start in range(0, len(requests), BATCH_WRITE_ITEMS):
            pending: dict[str, Any] = {self.table: requests[start : start + BATCH_WRITE_ITEMS]}
            for attempt in range(4):
                left = self.client.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
                if not left:
                    break
                pending = left
                time.sleep(0.05 * 2**attempt)
            else:
                raise RuntimeError(f"{len(pending.get(self.table, []))} status records were not written")

    def get_status(self, job_id: str) -> JobStatus | None:
        """One consistent ``Query`` reads the job's two items together."""
        by_sk = {sk: from_item(item) for sk, item in self._items(job_id).items()}
        now = time.time()
        status = merged_status(job_id, by_sk.get("status"), by_sk.get(FLOW_SK, {}), now)
        if (
            status is None
            or self.key_table is None
            or status.type is None
            or status.status not in key_records.MOVABLE_STATES
            or not key_records.keyed_by_id(job_id, status.key)
        ):
            return status
        record = key_records.read(self.client, self.key_table, status.type, job_id)
        return key_records.merged_with(status, record, now)

    def key_holder(self, job_id: str, job_type: str) -> KeyHolder | None:
        if self.key_table is None:
            return None
        return key_records.holder(self.client, self.key_table, job_type, job_id)

    def claim_start(
        self, job_id: str, *, attempt: int, runs_until: float, now: float, claimant: str = ""
    ) -> bool:
        try:
            self.client.update_item(
                TableName=self.table,
                Key=_key(job_id, FLOW_SK),
                UpdateExpression=(
                    "SET started_at = :at, runs_until = :until, started_attempt = :attempt, "
                    "claimed_by = :me, expires_at = :exp"
                ),
                # (what replaces_claim says: another delivery's live claim of this attempt stands)
                ConditionExpression=(
                    "attribute_not_exists(cancelled_at) AND (attribute_not_exists(runs_until) OR "
                    "runs_until < :now OR started_attempt < :attempt OR attribute_not_exists(claimed_by) "
                    "OR claimed_by = :me)"
                ),
                ExpressionAttributeValues=to_item(
                    {
                        ":at": now_iso(),
                        ":until": round(runs_until, 3),
                        ":attempt": attempt,
                        ":me": claimant,
                        ":now": round(now, 3),
                        ":exp": int(now) + STATUS_TTL_SECONDS,
                    }
                ),
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except self.client.exceptions.ConditionalCheckFailedException as exc:
            old = getattr(exc, "response", {}).get("Item") or {}
            return "cancelled_at" not in old  # cancelled: False; another's live claim: it stands
        return True

    def unclaim_start(self, job_id: str, *, claimant: str) -> None:
        with contextlib.suppress(self.client.exceptions.ConditionalCheckFailedException):  # not its claim
            self.client.update_item(
                TableName=self.table,
                Key=_key(job_id, FLOW_SK),
                UpdateExpression="REMOVE " + ", ".join(CLAIM_FIELDS),
                ConditionExpression="attribute_exists(runs_until) AND claimed_by = :me",
                ExpressionAttributeValues=to_item({":me": claimant}),
            )

    def cancel_marked(self, job_id: str) -> bool:
        item = self.client.get_item(
            TableName=self.table,
            Key=_key(job_id, FLOW_SK),
            ConsistentRead=True,
            ProjectionExpression="cancelled_at",
        ).get("Item", {})
        return "cancelled_at" in item

    def start_check(self, job_id: str) -> StartCheck:
        by_sk = self._items(job_id, projection="sk, cancelled_at")
        return StartCheck("cancelled_at" in by_sk.get(FLOW_SK, {}), "status" in by_sk)

    def _items(self, job_id: str, projection: str | None = None) -> dict[str, dict[str, Any]]:
        """The job's items (its status and its flow record) by sort key, in one consistent ``Query``
        (DynamoDB's form; ``projection``: only those attributes)."""
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": {"S": f"job#{job_id}"}},
            "ConsistentRead": True,
        }
        if projection is not None:
            request["ProjectionExpression"] = projection
        items = self.client.query(**request).get("Items", [])
        return {item["sk"]["S"]: item for item in items}

    def mark_cancelled(self, job_id: str, now: float, *, keep_until: float = 0) -> StartClaim:
        item = self.client.update_item(
            TableName=self.table,
            Key=_key(job_id, FLOW_SK),
            UpdateExpression="SET cancelled_at = if_not_exists(cancelled_at, :at), expires_at = :exp",
            ExpressionAttributeValues=to_item({":at": now_iso(), ":exp": kept_until(now, keep_until)}),
            ReturnValues="ALL_NEW",
        ).get("Attributes", {})
        plain = from_item(item)
        return StartClaim(float(plain.get("runs_until", 0)), int(plain.get("started_attempt", 0)))

    def finish_cancelled(self, job_id: str, reason: str, *, keep_until: float = 0) -> None:
        finals = sorted(s.value for s in FINAL_STATES)  # (cancelled too: a repeated cancel writes nothing)
        plain: dict[str, Any] = {
            ":cancelled": JobState.CANCELLED.value,
            ":reason": reason,
            ":now": now_iso(),
            ":exp": kept_until(time.time(), keep_until),
        }
        plain |= {f":f{n}": final for n, final in enumerate(finals)}
        with contextlib.suppress(self.client.exceptions.ConditionalCheckFailedException):  # final already
            self.client.update_item(
                TableName=self.table,
                Key=_key(job_id, "status"),
                UpdateExpression=(
                    "SET #status = :cancelled, #reason = :reason, updated_at = :now, finished_at = :now, "
                    "expires_at = :exp"
                ),
                ConditionExpression=(
                    "attribute_not_exists(#status) OR NOT #status IN ("
                    + ", ".join(f":f{n}" for n in range(len(finals)))
                    + ")"
                ),
                ExpressionAttributeNames={"#status": "status", "#reason": "reason"},
                ExpressionAttributeValues=to_item(plain),
            )
