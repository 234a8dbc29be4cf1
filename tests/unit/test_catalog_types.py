"""A producer without the job's module (the job catalog's schema) takes what the consumer's model takes
and refuses what it refuses, for the types a trial found them to disagree on: a UUID, a tuple's
positions, a set's repeats, datetimes and durations as numbers, a date given as a midnight datetime."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Annotated, Any, Literal
from uuid import UUID

import pytest
from pydantic import BaseModel, ConfigDict, Field, HttpUrl, ValidationError

from jobframework import job
from jobframework.errors import PayloadValidationError
from jobframework.jobs import JobRegistry
from tests.unit.catalog_routes import as_routed

registry = JobRegistry()


class Sync(BaseModel):
    account: UUID | None = None
    accounts: list[UUID] = []
    pair: tuple[int, str] = (0, "")
    tags: set[str] = set()
    since: datetime | None = None
    every: timedelta | None = None
    day: date | None = None


class StrictSync(BaseModel):
    model_config = ConfigDict(strict=True)
    since: datetime | None = None
    every: timedelta | None = None
    day: date | None = None
    account: UUID | None = None


@job("ct.sync", registry=registry)
def sync(payload: Sync) -> None: ...


@job("ct.strict", registry=registry)
def strict(payload: StrictSync) -> None: ...


def _model_takes(model: type[BaseModel], data: dict[str, Any]) -> bool:
    """As the consumer reads the payload: JSON."""
    try:
        model.model_validate_json(json.dumps(data))
    except ValidationError:
        return False
    return True


def _catalog_takes(job_: Any, data: dict[str, Any]) -> bool:
    try:
        as_routed(job_).validate(data)
    except PayloadValidationError:
        return False
    return True


AGREED = [
    {"account": "nope"},
    {"account": "0b6e6b5e-3c3c-4f6a-9b1e-6a4f3c2b1a00"},
    {"accounts": ["0b6e6b5e-3c3c-4f6a-9b1e-6a4f3c2b1a00", "nope"]},
    {"pair": ["x", "a"]},
    {"pair": [1, "a"]},
    {"pair": [1, "a", "extra"]},
    {"tags": ["a", "a"]},
    {"since": 1_764_950_400},
    {"since": "2026-12-05T10:00:00"},
    {"since": "yesterday"},
    {"every": 3600},
    {"every": "PT1H"},
    {"every": "soon"},
    {"day": "2026-12-05"},
    {"day": "2026-12-05T00:00:00Z"},
    {"day": "2026-12-05T10:30:00Z"},
]


@pytest.mark.parametrize("data", AGREED, ids=lambda d: repr(d)[:50])
def test_the_catalog_takes_what_the_model_takes(data):
    assert _catalog_takes(sync, data) == _model_takes(Sync, data)


@pytest.mark.parametrize(
    "data",
    [
        {"since": 1_764_950_400},
        {"every": 3600},
        {"since": "2026-12-05T10:00:00Z"},
        {"since": "2026-12-05"},
        {"every": "PT1H"},
        {"day": "2026-12-05T00:00:00Z"},
        {"day": "2026-12-05"},
        {"account": "0b6e6b5e-3c3c-4f6a-9b1e-6a4f3c2b1a00"},
    ],
    ids=lambda d: repr(d)[:50],
)
def test_a_strict_model_is_read_as_strictly_by_the_catalog(data):
    assert _catalog_takes(strict, data) == _model_takes(StrictSync, data)


def test_a_bad_uuid_is_refused_by_name_before_sending():
    with pytest.raises(PayloadValidationError, match="account"):
        as_routed(sync).validate({"account": "nope"})


class Cat(BaseModel):
    kind: Literal["cat"]
    meow: int


class Dog(BaseModel):
    kind: Literal["dog"]
    bark: int


class Visit(BaseModel):
    site: HttpUrl | None = None
    pet: Annotated[Cat | Dog, Field(discriminator="kind")] | None = None


@job("ct.visit", registry=registry)
def visit(payload: Visit) -> None: ...


@pytest.mark.parametrize(
    ("data", "said"),
    [
        ({"site": "ftp://x"}, "site: must be a URL whose scheme is http or https, or null"),
        (
            {"pet": {"kind": "cow"}},
            "pet: matches none of its types: kind: must be one of 'cat', 'dog', or must be null",
        ),
        (
            {"pet": {"kind": "cat", "meow": "x"}},
            "pet: matches none of its types: meow: must be integer, or must be null",
        ),
        (
            {"pet": {"kind": ["cat"]}},
            "pet: matches none of its types: kind: must be one of 'cat', 'dog', or must be null",
        ),
        (
            {"since": "yesterday"},
            "since: must be a date and time as ISO 8601 text (2026-12-05T10:00:00Z), or a number (a Unix "
            "time), or null",
        ),
        ({"account": 5}, "account: must be a UUID as text (0b6e6b5e-3c3c-4f6a-9b1e-6a4f3c2b1a00), or null"),
    ],
)
def test_a_union_refused_by_name_says_what_each_of_its_types_wants(data, said):
    with pytest.raises(PayloadValidationError) as refused:
        as_routed(visit if set(data) & {"site", "pet"} else sync).validate(data)
    assert str(refused.value).endswith(f"): {said}"), str(refused.value)


class Price(BaseModel):
    amount: Decimal = Field(gt=0)
    quantity: Decimal = Field(ge=1, le=100)
    step: Decimal | None = Field(default=None, multiple_of=0.5)


@job("ct.price", registry=registry)
def price(payload: Price) -> None: ...


@pytest.mark.parametrize(
    "data",
    [
        {"amount": "0", "quantity": "1"},
        {"amount": "0.01", "quantity": "1"},
        {"amount": "1", "quantity": "0.5"},
        {"amount": "1", "quantity": "100"},
        {"amount": "1", "quantity": "100.01"},
        {"amount": "1", "quantity": 101},
        {"amount": "1", "quantity": "2", "step": "0.75"},
        {"amount": "1", "quantity": "2", "step": "1.5"},
    ],
    ids=lambda d: repr(d)[:60],
)
def test_a_decimal_strings_bounds_are_checked_by_name_as_the_model_reads_them(data):
    assert _catalog_takes(price, data) == _model_takes(Price, data)
