"""Saga records: one item a saga, written whole and only over the version it was read at.

The item (``pk = saga#<id>``, ``sk = saga``) holds the record as JSON (``doc``) beside the attributes
an operator's listing filters on (``saga_name``, ``status``, ``created_at``), its ``version`` (every
write is conditional on it, so two consumers advancing one saga never lose a transition), and its
TTL (a year while it runs, 30 days once it ends).

:class:`SagaRecords` is what the saga engine and the operator's views ask of them;
:class:`DynamoSagaRecords` keeps them in the state table and :class:`InMemorySagaRecords` in a dict
(tests without the embedded AWS). ``tests/functional/test_saga_records.py`` runs one contract against
both.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Protocol

from jobframework.stores.items import from_item, to_item

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from jobframework.saga.record import SagaRecord

TERMINAL_TTL_SECONDS = 30 * 24 * 3600
"""A finished saga's record is kept this long (a running one a year)."""
RUNNING_TTL_SECONDS = 365 * 24 * 3600


class SagaRecords(Protocol):
    """What the package asks of saga records (see the module's docstring)."""

    def get(self, saga_id: str) -> SagaRecord | None:
        """The record (a consistent read), ``None`` if unknown."""
        ...

    def create(self, record: SagaRecord) -> bool:
        """Write a new record; ``False`` (nothing written) when the id exists already."""
        ...

    def replace(self, record: SagaRecord, expected_version: int) -> bool:
        """Write ``record`` over the one at ``expected_version``; ``False`` when it has changed since."""
        ...

    def find(
        self, *, status: str | None = None, name: str | None = None, limit: int = 100
    ) -> list[SagaRecord]:
        """Records, newest first, of a status and name when given (an operator's listing: a scan)."""
        ...


def _model() -> type[SagaRecord]:
    from jobframework.saga.record import SagaRecord  # the saga package loads only where sagas are used

    return SagaRecord


def _ttl(record: SagaRecord) -> int:
    return int(time.time()) + (TERMINAL_TTL_SECONDS if record.status.terminal else RUNNING_TTL_SECONDS)


def _newest(records: list[SagaRecord], limit: int) -> list[SagaRecord]:
    return sorted(records, key=lambda r: r.created_at, reverse=True)[:limit]


class DynamoSagaRecords:
    """Saga records in the state table ``table``."""

    def __init__(self, table: str, client: DynamoDBClient) -> None:
        self.table = table
        self.client = client

    @staticmethod
    def _key(saga_id: str) -> dict[str, Any]:
        return to_item({"pk": f"saga#{saga_id}", "sk": "saga"})

    def _item(self, record: SagaRecord) -> dict[str, Any]:
        return to_item(
            {
                "pk": f"saga#{record.id}",
                "sk": "saga",
                "saga_name": record.name,
                "status": record.status.value,
                "version": record.version,
                "created_at": record.created_at,
                "updated_at": record.updated_at,
                "doc": record.model_dump_json(),
                "expires_at": _ttl(record),
            }
        )

    def get(self, saga_id: str) -> SagaRecord | None:
        item = self.client.get_item(TableName=self.table, Key=self._key(saga_id), ConsistentRead=True).get(
            "Item"
        )
        return _model().model_validate_json(item["doc"]["S"]) if item else None

    def create(self, record: SagaRecord) -> bool:
        try:
            self.client.put_item(
                TableName=self.table, Item=self._item(record), ConditionExpression="attribute_not_exists(pk)"
            )
        except self.client.exceptions.ConditionalCheckFailedException:
            return False
        return True

    def replace(self, record: SagaRecord, expected_version: int) -> bool:
        try:
            self.client.put_item(
                TableName=self.table,
                Item=self._item(record),
                ConditionExpression="version = :expected",
                ExpressionAttributeValues=to_item({":expected": expected_version}),
            )
        except self.client.exceptions.ConditionalCheckFailedException:
            return False
        return True

    def find(
        self, *, status: str | None = None, name: str | None = None, limit: int = 100
    ) -> list[SagaRecord]:
        names: dict[str, str] = {}
        values: dict[str, Any] = {":prefix": "saga#"}
        filters = ["begins_with(pk, :prefix)"]
        if status is not None:
            names["#status"] = "status"  # a reserved word
            values[":status"] = status
            filters.append("#status = :status")
        if name is not None:
            values[":name"] = name
            filters.append("saga_name = :name")
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "FilterExpression": " AND ".join(filters),
            "ExpressionAttributeValues": to_item(values),
        }
        if names:
            kwargs["ExpressionAttributeNames"] = names
        found: list[SagaRecord] = []
        model = _model()
        while True:
            page = self.client.scan(**kwargs)
            found.extend(model.model_validate_json(from_item(item)["doc"]) for item in page.get("Items", []))
            start = page.get("LastEvaluatedKey")
            if not start:
                return _newest(found, limit)
            kwargs["ExclusiveStartKey"] = start


class InMemorySagaRecords:
    """Saga records in a dict (the record as JSON by id, as the table keeps its ``doc``)."""

    def __init__(self) -> None:
        self.docs: dict[str, str] = {}
        self._lock = threading.Lock()

    def get(self, saga_id: str) -> SagaRecord | None:
        with self._lock:
            doc = self.docs.get(saga_id)
        return _model().model_validate_json(doc) if doc is not None else None

    def create(self, record: SagaRecord) -> bool:
        with self._lock:
            if record.id in self.docs:
                return False
            self.docs[record.id] = record.model_dump_json()
            return True

    def replace(self, record: SagaRecord, expected_version: int) -> bool:
        with self._lock:
            current = self.docs.get(record.id)
            if current is None or _model().model_validate_json(current).version != expected_version:
                return False
            self.docs[record.id] = record.model_dump_json()
            return True

    def find(
        self, *, status: str | None = None, name: str | None = None, limit: int = 100
    ) -> list[SagaRecord]:
        with self._lock:
            docs = list(self.docs.values())
        model = _model()
        records = [model.model_validate_json(doc) for doc in docs]
        return _newest(
            [
                r
                for r in records
                if (status is None or r.status == status) and (name is None or r.name == name)
            ],
            limit,
        )
