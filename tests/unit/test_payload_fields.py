"""A refused payload says what is wrong field by field (``PayloadValidationError.fields``), whichever
way it was checked: by the job's model, by the catalog's schema (a producer without the job's module),
after an older version's upgrade, at a saga's start. A 202 handler hands that list to its caller as it
is; ``str(exc)`` also names the job, its model and the SSM parameter, which its callers need not see."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from jobframework import job
from jobframework.errors import PayloadValidationError
from jobframework.jobs import JobRegistry
from jobframework.outgoing import EnqueueRequest
from jobframework.payload_data import checked_payload, payload_data
from tests.unit.catalog_routes import as_routed

registry = JobRegistry()


class Line(BaseModel):
    sku: str
    quantity: int = 1


class Order(BaseModel):
    order_id: str
    lines: list[Line]
    total: float = 0.0


@job("pf.order", registry=registry)
def place(order: Order) -> None: ...


@job("pf.order2", registry=registry, version=2, upgrade={1: lambda d: {**d, "lines": []}})
def place_v2(order: Order) -> None: ...


def _refused(check: Any) -> PayloadValidationError:
    with pytest.raises(PayloadValidationError) as refused:
        check()
    return refused.value


BAD = {"order_id": 7, "lines": [{"sku": "a"}, {"quantity": "many"}]}
FIELDS = [
    {"field": "order_id", "message": "Input should be a valid string"},
    {"field": "lines.1.sku", "message": "Field required"},
    {
        "field": "lines.1.quantity",
        "message": "Input should be a valid integer, unable to parse string as an integer",
    },
]


def test_the_jobs_model_refusal_lists_each_field_and_what_is_wrong_with_it():
    error = _refused(lambda: payload_data(place, BAD))
    assert error.fields == FIELDS
    assert "pf.order does not match Order" in str(error)  # (the developer's text names the job)


def test_a_refusal_by_the_catalog_schema_lists_the_same_fields():
    error = _refused(lambda: as_routed(place).validate({"lines": [{"quantity": 2}], "extra": 1}))
    assert {f["field"] for f in error.fields} == {"order_id", "lines.0.sku"}
    assert all(f["message"] == "Field required" for f in error.fields)
    assert "SSM parameter /jf/test/topology" in str(error) and not any(
        "SSM" in f["message"] for f in error.fields
    )


def test_a_refusal_that_adds_a_hint_for_older_versions_keeps_the_fields_without_it():
    error = _refused(lambda: checked_payload(place_v2, EnqueueRequest("pf.order2", BAD)))
    assert error.fields == FIELDS
    assert "payload_version=N" in str(error) and not any(
        "payload_version" in f["message"] for f in error.fields
    )


def test_a_value_json_cannot_carry_is_named_by_its_field():
    error = _refused(lambda: payload_data(place, {"order_id": "o", "lines": [], "total": float("nan")}))
    assert error.fields == [
        {"field": "total", "message": "nan cannot be sent as JSON; send null or a number"}
    ]


def test_a_refusal_without_a_field_is_one_entry_for_the_whole_payload():
    error = PayloadValidationError("payload for t.x must be a JSON object, got 3")
    assert error.fields == [{"field": "", "message": "payload for t.x must be a JSON object, got 3"}]


def test_a_refusal_by_the_catalog_schema_lists_every_nested_field_as_the_model_does():
    """A trial's producer by name got only lines.0.sku for two bad lines: the schema stops at its first
    complaint, and only the top-level fields were checked again one by one."""
    data = {"order_id": "o", "lines": [{"sku": 1}, "oops", {"sku": "a", "quantity": "many"}]}
    by_schema = _refused(lambda: as_routed(place).validate(data)).fields
    by_model = _refused(lambda: payload_data(place, data)).fields
    assert (
        [f["field"] for f in by_schema]
        == [f["field"] for f in by_model]
        == [
            "lines.0.sku",
            "lines.1",
            "lines.2.quantity",
        ]
    )


class Stock(BaseModel):
    order_id: str
    by_warehouse: dict[str, Line]
    gift: Line | None = None


@job("pf.stock", registry=registry)
def stock(s: Stock) -> None: ...


def test_a_refusal_by_the_catalog_schema_lists_the_fields_of_a_dicts_models_and_an_optional_model():
    """The last trial's dict[str, Line] listed its first bad entry only, and a Line | None field said
    "matches none of its types" where the model names gift.sku."""
    data = {
        "order_id": "o",
        "by_warehouse": {"a": {"sku": "a", "quantity": "x"}, "b": {"quantity": 1}, "c": {"sku": 3}},
        "gift": {"sku": 4},
    }
    by_schema = _refused(lambda: as_routed(stock).validate(data)).fields
    by_model = _refused(lambda: payload_data(stock, data)).fields
    expected = ["by_warehouse.a.quantity", "by_warehouse.b.sku", "by_warehouse.c.sku", "gift.sku"]
    assert [f["field"] for f in by_schema] == [f["field"] for f in by_model] == expected
