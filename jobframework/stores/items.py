"""DynamoDB item conversion with boto3's own serializer: plain Python values in, items out; and the
batched read of many items by key (:func:`batch_get`).

boto3 is imported on the first conversion, not with this module: importing ``boto3.dynamodb.types``
loads boto3 and s3transfer (some 80 ms), which a consumer whose batches make no DynamoDB request
(untracked jobs) should not pay at cold start.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
    from mypy_boto3_dynamodb import DynamoDBClient

BATCH_GET_KEYS = 100
"""Keys a ``BatchGetItem`` takes at most (DynamoDB's limit)."""


@functools.cache
def _codec() -> tuple[TypeSerializer, TypeDeserializer]:
    from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

    return TypeSerializer(), TypeDeserializer()


def _plain(value: Any) -> Any:
    """Floats as Decimal (the serializer refuses floats); containers converted throughout."""
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def to_item(values: Mapping[str, Any]) -> dict[str, Any]:
    """A DynamoDB item from plain values (``None`` values are left out).

    >>> to_item({"pk": "job#1", "attempts": 2, "error": None})
    {'pk': {'S': 'job#1'}, 'attempts': {'N': '2'}}
    """
    serializer = _codec()[0]
    return {k: serializer.serialize(_plain(v)) for k, v in values.items() if v is not None}


def from_item(item: Mapping[str, Any]) -> dict[str, Any]:
    """Plain values from a DynamoDB item; whole numbers come back as ``int``, others as ``float``.

    >>> from_item({"pk": {"S": "job#1"}, "attempts": {"N": "2"}})
    {'pk': 'job#1', 'attempts': 2}
    """
    deserializer = _codec()[1]
    return {k: _python(deserializer.deserialize(v)) for k, v in item.items()}


def _python(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _python(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_python(v) for v in value]
    if isinstance(value, set):
        return {_python(v) for v in value}
    return value


def batch_get(
    client: DynamoDBClient,
    table: str,
    keys: Sequence[Mapping[str, Any]],
    *,
    consistent: bool,
    attempts: int,
) -> tuple[list[dict[str, Any]], int]:
    """The items of ``keys`` (raw DynamoDB keys) that exist, as plain values, and how many keys were left
    unread: one ``BatchGetItem`` per :data:`BATCH_GET_KEYS`, its unprocessed keys (throttled) asked again
    with a backoff, ``attempts`` requests at most a chunk."""
    found: list[dict[str, Any]] = []
    left = 0
    for start in range(0, len(keys), BATCH_GET_KEYS):
        request: dict[str, Any] = {
            table: {"Keys": list(keys[start : start + BATCH_GET_KEYS]), "ConsistentRead": consistent}
        }
        for attempt in range(attempts):
            response = client.batch_get_item(RequestItems=request)
            found.extend(from_item(item) for item in response.get("Responses", {}).get(table, []))
            request = response.get("UnprocessedKeys") or {}
            if not request:
                break
            time.sleep(0.05 * 2**attempt)  # throttled: what is left, again (as BatchWriteItem's)
        else:
            left += len(request[table]["Keys"])
    return found, left
