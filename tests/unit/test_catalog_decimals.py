"""A producer that knows a job only from the catalog refuses a Decimal the job's model would refuse
(a trial's invoice amounts "abc" and "-3" were sent, then dead-lettered invalid-payload)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from pydantic import BaseModel, Field, ValidationError

from jobframework.catalog import RoutedJob
from jobframework.errors import PayloadValidationError
from jobframework.jobs import JobRegistry, job
from tests.unit.catalog_routes import as_routed


class Line(BaseModel):
    amount: Decimal | float = Field(gt=0)
    discount: Decimal = Field(default=Decimal(0), ge=0, le=100, decimal_places=2)
    adjustment: Decimal = Decimal(0)
    credit: Decimal = Field(default=Decimal(0), le=Decimal("99999.99"))
    tip: Decimal | float | None = Field(default=None, gt=0)


class Invoice(BaseModel):
    lines: list[Line]


registry = JobRegistry()


@job("invoices.render", registry=registry)
def render(invoice: Invoice) -> None:
    """Renders the invoice."""


def routed() -> RoutedJob:
    return as_routed(render)


@pytest.mark.parametrize(
    "line",
    [
        {"amount": "abc"},  # not a number
        {"amount": "-3"},  # under gt=0, as a string
        {"amount": -3},  # under gt=0 (pydantic wrote the union's bound as "gt", which no validator reads)
        {"amount": 1, "discount": "-0.01"},
        {"amount": 1, "discount": "1.234"},  # decimal_places=2
    ],
)
def test_a_decimal_the_model_refuses_is_refused_before_sending_naming_the_field(line):
    with pytest.raises(
        PayloadValidationError, match=r"lines\.0\.(amount|discount): must be (a decimal|bigger)"
    ):
        routed().validate({"lines": [line]})
    with pytest.raises(ValidationError):  # what the consumer would have said
        Invoice.model_validate({"lines": [line]})


@pytest.mark.parametrize(
    "line",
    [
        {"amount": "12.50", "discount": " 3.25 "},  # pydantic strips the spaces
        {"amount": 0.5, "discount": "-0"},  # zero, signed
        {"amount": "1e2", "discount": "1e1", "adjustment": "-7.5"},  # no bound: a minus is fine
        {"amount": "+3", "discount": 0},
        {"amount": "1_000", "adjustment": "\u0663"},  # underscores, any Unicode digit: Decimal() reads them
        {"amount": 1, "tip": None},
    ],
)
def test_a_decimal_the_model_takes_passes(line):
    routed().validate({"lines": [line]})
    Invoice.model_validate({"lines": [line]})


def test_the_refusal_says_what_a_decimal_field_takes():
    with pytest.raises(PayloadValidationError) as amount:
        routed().validate({"lines": [{"amount": "abc"}]})
    assert str(amount.value).endswith(
        "lines.0.amount: must be a decimal number (a JSON number, or one as a string) above 0"
    )  # (fastjsonschema's words: "cannot be validated by any definition")
    with pytest.raises(PayloadValidationError) as discount:
        routed().validate({"lines": [{"amount": 1, "discount": "1.234"}]})
    assert str(discount.value).endswith(
        "lines.0.discount: must be a decimal number (a JSON number, or one as a string) at least 0 and at "
        "most 100 and with at most 2 decimal places"
    )


def test_the_refusal_writes_bounds_as_given_and_says_when_null_is_taken():
    with pytest.raises(PayloadValidationError) as credit:
        routed().validate({"lines": [{"amount": 1, "credit": 100000}]})
    assert str(credit.value).endswith(
        "lines.0.credit: must be a decimal number (a JSON number, or one as a string) at most 99999.99"
    )  # (":g" wrote 100000)
    with pytest.raises(PayloadValidationError) as tip:
        routed().validate({"lines": [{"amount": 1, "tip": "abc"}]})
    assert str(tip.value).endswith(
        "lines.0.tip: must be a decimal number (a JSON number, or one as a string) above 0, or null"
    )
