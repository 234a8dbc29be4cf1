"""A payload is validated as the JSON it came as: a strict model's datetime, UUID and Decimal arrive as
text and are taken, whether the consumer reads the envelope and its payload in one pass (the record's
``jf-type`` names the job) or in two (a body without the attribute, as EventBridge Scheduler sends)."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any
from uuid import UUID, uuid4

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from jobframework import job
from jobframework.consumer import consumer
from jobframework.envelope import Envelope, parse_typed
from jobframework.errors import ConfigurationError
from jobframework.job_options import Schedule
from jobframework.jobs import JobRegistry
from jobframework.testing import FakeLambdaContext, sqs_event, sqs_record
from jobframework.topology import QueueEndpoints, RuntimeConfig
from jobframework.validation import validate_data

registry = JobRegistry()
ran: list[Any] = []


class Invoice(BaseModel):
    model_config = ConfigDict(strict=True)
    id: UUID
    due: datetime
    total: Decimal


@job("pm.invoice", registry=registry, idempotent=False)
def send_invoice(invoice: Invoice) -> None:
    ran.append(invoice)


class Renamed(BaseModel):
    full_name: str


@job(
    "pm.greet",
    registry=registry,
    idempotent=False,
    version=2,
    upgrade={1: lambda old: {"full_name": old["name"]}},
)
def greet(person: Renamed) -> None:
    ran.append(person)


def _handler() -> Any:
    config = RuntimeConfig(
        queues={"default": QueueEndpoints(url="https://sqs/pm-default", dlq_url="https://sqs/dlq")}
    )
    return consumer(registry, config=config, sqs_client=object())  # type: ignore[arg-type]


def _invoice() -> tuple[Invoice, Envelope]:
    invoice = Invoice(id=uuid4(), due=datetime(2027, 1, 31, tzinfo=UTC), total=Decimal("120.50"))
    return invoice, Envelope.new("pm.invoice", invoice)  # (a model is sent as its JSON data)


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


def test_a_strict_payload_runs_when_the_record_names_its_job():
    invoice, env = _invoice()
    record = sqs_record(env)
    assert record["messageAttributes"]["jf-type"]["stringValue"] == "pm.invoice"  # the one-pass path
    assert _handler()(sqs_event(record), FakeLambdaContext()) == {"batchItemFailures": []}
    assert ran == [invoice]


def test_the_record_that_names_its_job_is_read_in_one_pass(monkeypatch):
    def two_passes(body: str) -> Envelope:
        raise AssertionError("the envelope was read without its payload")

    monkeypatch.setattr("jobframework.envelope.parse_body", two_passes)
    invoice, env = _invoice()
    assert _handler()(sqs_event(env), FakeLambdaContext()) == {"batchItemFailures": []}
    assert ran == [invoice]


def test_a_strict_payload_runs_from_a_body_alone():
    invoice, env = _invoice()
    assert _handler()(sqs_event(env.to_body()), FakeLambdaContext()) == {"batchItemFailures": []}
    assert ran == [invoice]


def test_an_older_payload_version_is_upgraded_even_when_the_record_names_its_job():
    env = Envelope.new("pm.greet", {"name": "Ada"}, payload_version=1)
    assert _handler()(sqs_event(env), FakeLambdaContext()) == {"batchItemFailures": []}
    assert ran == [Renamed(full_name="Ada")]


def test_the_body_names_the_job_when_the_attribute_names_another():
    env = Envelope.new("pm.greet", {"full_name": "Grace"}, payload_version=2)
    record = sqs_record(env, message_attributes={"jf-type": "pm.invoice"})
    assert _handler()(sqs_event(record), FakeLambdaContext()) == {"batchItemFailures": []}
    assert ran == [Renamed(full_name="Grace")]


def test_parse_typed_leaves_what_it_cannot_read_to_the_general_path():
    _, env = _invoice()
    body = env.to_body()
    parsed = parse_typed(body, "pm.invoice", Invoice, 1)
    assert parsed is not None and isinstance(parsed.payload, Invoice) and isinstance(parsed, Envelope)
    assert parse_typed(body, "pm.greet", Invoice, 1) is None  # another type
    assert parse_typed(body, "pm.invoice", Invoice, 2) is None  # another payload version
    assert parse_typed(body, "pm.invoice", Renamed, 1) is None  # a payload that does not match
    assert parse_typed("{not json", "pm.invoice", Invoice, 1) is None


def test_validate_data_takes_json_data_and_python_values_and_names_only_what_is_wrong():
    due = datetime(2027, 1, 31, tzinfo=UTC)
    as_json = {"id": str(uuid4()), "due": "2027-01-31T00:00:00Z", "total": "120.50"}
    assert validate_data(Invoice, as_json).due == due
    assert validate_data(Invoice, {**as_json, "id": uuid4(), "due": due, "total": Decimal(1)}).due == due
    with pytest.raises(ValidationError) as raised:
        validate_data(Invoice, {**as_json, "due": "not a date"})
    assert [e["loc"] for e in raised.value.errors()] == [("due",)]
    with pytest.raises(ValidationError):
        validate_data(Invoice, [as_json])  # not an object: no JSON reading of it either
    with pytest.raises(ValidationError):  # Python values are read as Python: a datetime is no str
        validate_data(Renamed, {"full_name": datetime(2027, 1, 31, tzinfo=UTC)})
    with pytest.raises(ValidationError) as raised:  # every field wrong: said as JSON, not "an instance"
        validate_data(Invoice, {"id": "nope", "due": "yesterday", "total": "abc"})
    messages = " ".join(e["msg"] for e in raised.value.errors())
    assert "instance" not in messages and "valid UUID" in messages, messages


def test_a_schedules_payload_for_a_strict_model_is_taken_as_json():
    reg = JobRegistry()
    due = {"id": str(uuid4()), "due": "2027-01-31T00:00:00Z", "total": "1.00"}

    @job("pm.nightly", registry=reg, idempotent=False, schedule=Schedule("rate(1 day)", payload=due))
    def nightly(invoice: Invoice) -> None: ...

    assert nightly.validate(due).total == Decimal("1.00")
    with pytest.raises(ConfigurationError, match="does not match Invoice"):

        @job("pm.broken", registry=reg, schedule=Schedule("rate(1 day)", payload={"id": "x"}))
        def broken(invoice: Invoice) -> None: ...
