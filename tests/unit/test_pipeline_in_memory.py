"""The consumer's pipeline on the in-memory job records (``jobframework.testing.in_memory_consumer``):
tracked jobs, their statuses, cancel before and during a run, with no embedded AWS and no sleep. The
handler's clients refuse every request, so a request would show as a failed record."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from jobframework import JobContext, job
from jobframework.consumer import Consumer
from jobframework.envelope import Envelope
from jobframework.jobs import JobRegistry
from jobframework.status import JobState
from jobframework.stores.job_records_memory import InMemoryJobRecords
from jobframework.testing import FakeLambdaContext, in_memory_consumer, sqs_event

registry = JobRegistry()
seen: dict[str, Any] = {}


class Order(BaseModel):
    id: str
    cancel_itself: bool = False


@job("u.ship", registry=registry, track=True)
def ship(order: Order, ctx: JobContext) -> dict[str, str]:
    records = seen["records"]
    seen[f"{order.id}.status"] = records.get_status(ctx.job_id).status  # while it runs
    if order.cancel_itself:
        records.mark_cancelled(ctx.job_id, 0.0)  # what client.cancel does while the job runs
        seen[f"{order.id}.cancelled"] = ctx.cancelled
    return {"shipped": order.id}


@pytest.fixture
def world() -> tuple[Consumer, InMemoryJobRecords]:
    """The handler on in-memory job records; any AWS request it made would fail its record."""
    handler, records = in_memory_consumer(registry)
    seen.clear()
    seen["records"] = records
    return handler, records


def _tracked(order: Order) -> Envelope:
    return Envelope.new("u.ship", order.model_dump(), track=True)


def test_a_tracked_job_runs_and_its_status_is_kept_in_memory(world):
    handler, records = world
    env = _tracked(Order(id="o1"))
    records.set_status(env.id, JobState.QUEUED, job_type="u.ship", attempts=0)  # what the client writes
    assert handler(sqs_event(env), FakeLambdaContext()) == {"batchItemFailures": []}
    assert seen["o1.status"] is JobState.RUNNING  # the start claim says so, no write of its own
    done = records.get_status(env.id)
    assert done is not None
    assert (done.status, done.attempts, done.result) == (JobState.SUCCEEDED, 1, {"shipped": "o1"})


def test_a_job_cancelled_before_it_starts_is_acknowledged_unrun(world):
    handler, records = world
    env = _tracked(Order(id="o2"))
    records.set_status(env.id, JobState.QUEUED, job_type="u.ship", attempts=0)
    records.mark_cancelled(env.id, 0.0)
    assert handler(sqs_event(env), FakeLambdaContext()) == {"batchItemFailures": []}
    assert "o2.status" not in seen  # it did not run
    status = records.get_status(env.id)
    assert status is not None and status.status is JobState.CANCELLED


def test_a_running_job_sees_its_cancel(world):
    handler, records = world
    env = _tracked(Order(id="o3", cancel_itself=True))
    records.set_status(env.id, JobState.QUEUED, job_type="u.ship", attempts=0)
    assert handler(sqs_event(env), FakeLambdaContext()) == {"batchItemFailures": []}
    assert seen["o3.cancelled"] is True


def test_a_batch_of_tracked_jobs_runs_concurrently_and_each_status_is_its_own(world):
    handler, records = world
    envs = [_tracked(Order(id=f"b{n}")) for n in range(10)]
    for env in envs:
        records.set_status(env.id, JobState.QUEUED, job_type="u.ship", attempts=0)
    assert handler(sqs_event(*envs), FakeLambdaContext()) == {"batchItemFailures": []}
    statuses = [records.get_status(e.id) for e in envs]
    assert [(s.status, s.result) for s in statuses if s is not None] == [
        (JobState.SUCCEEDED, {"shipped": f"b{n}"}) for n in range(10)
    ]


@job("u.flaky", registry=registry, track=True)
def flaky(order: Order) -> None:
    raise ConnectionError("downstream reset")


def test_a_retry_needs_sqs_so_the_in_memory_handler_leaves_its_record_to_come_back(world):
    """The guard the other tests rely on: a record whose settling needs a request is reported failed
    (SQS then redelivers it after its visibility timeout), not settled in secret."""
    handler, records = world
    env = Envelope.new("u.flaky", {"id": "f1"}, track=True)
    event = sqs_event(env)
    response = handler(event, FakeLambdaContext())
    assert response == {"batchItemFailures": [{"itemIdentifier": event["Records"][0]["messageId"]}]}
    status = records.get_status(env.id)  # what the README says: it does come back, so it is retrying
    assert status is not None and status.status is JobState.RETRYING
    assert status.error is not None and "downstream reset" in status.error


def test_the_refusal_of_a_retry_says_the_job_failed_and_is_retried(world, caplog):
    handler, _ = world
    handler(sqs_event(Envelope.new("u.flaky", {"id": "f2"}, track=True)), FakeLambdaContext())
    refused = _refusals(caplog)
    assert refused and all("(job u.flaky " in m and "failed (" in m for m in refused), refused
    assert all("and is retried in" in m and "downstream reset" in m for m in refused), refused


def _refusals(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The refusals the consumer logged, in a message or as the exception of a failed request."""
    said = [r.getMessage() + (f" {r.exc_info[1]}" if r.exc_info else "") for r in caplog.records]
    return [m for m in said if "in_memory_consumer makes no AWS" in m]


@job("u.long", registry=registry, track=True, timeout=60)
def long_running(order: Order) -> None:
    seen["long"] = order.id


def test_a_record_released_for_lack_of_time_is_refused_as_such_not_as_a_failure(world, caplog):
    """Too little time left in the fake Lambda context: the record is handed back unrun, which needs
    SQS; the refusal says so and what context to give, not that the job failed."""
    handler, records = world
    env = Envelope.new("u.long", {"id": "l1"}, track=True)
    response = handler(sqs_event(env), FakeLambdaContext(10))
    assert len(response["batchItemFailures"]) == 1 and "long" not in seen  # it did not run
    refused = _refusals(caplog)
    assert refused, [r.getMessage() for r in caplog.records]
    for message in refused:
        assert "was released unstarted, not run and not failed" in message, message
        assert "FakeLambdaContext(62) or more" in message  # its timeout, 60 s, and the 1 s margin fit
        assert "retries" not in message and "dead letters" not in message
    assert handler(sqs_event(env), FakeLambdaContext(62)) == {"batchItemFailures": []}  # as it says
    assert seen["long"] == "l1" and records.get_status(env.id).status is JobState.SUCCEEDED


@job("u.note", registry=registry)  # idempotent: the default
def note(order: Order) -> None:
    seen.setdefault("noted", []).append(order.id)


def test_an_idempotent_job_on_a_consumer_without_an_idempotency_table_is_told_once(world, caplog):
    handler, _ = world  # in memory: no idempotency table
    for n in range(2):
        event = sqs_event(Envelope.new("u.note", {"id": f"w{n}"}))
        assert handler(event, FakeLambdaContext()) == {"batchItemFailures": []}
    assert seen["noted"] == ["w0", "w1"]  # it runs, unguarded
    told = [r for r in caplog.records if "no idempotency table" in r.getMessage()]
    assert len(told) == 1 and "u.note" in told[0].getMessage() and told[0].levelname == "WARNING"


class Parcel(BaseModel):
    weight_g: int


@job("u.weigh", registry=registry, version=2, upgrade={1: lambda v1: {"weight_g": v1.get("weight_kg")}})
def weigh(parcel: Parcel) -> None:
    """Version 2 weighs in grams; the (faulty) upgrade copies kilograms over."""


def test_a_payload_its_upgrade_left_invalid_says_it_was_upgraded(caplog):
    handler, _ = in_memory_consumer(registry)
    v1 = Envelope.new("u.weigh", {"weight_kg": 2.5}, payload_version=1)
    handler(sqs_event(v1), FakeLambdaContext())  # (its dead letter is an SQS send: refused here)
    refused = [r.getMessage() for r in caplog.records if "invalid-payload" in r.getMessage()]
    assert refused and all("after its upgrade from payload version 1 to 2" in m for m in refused), refused


class Box(BaseModel):
    id: str


@job("u.keyed", registry=registry, track=True, key=lambda p: f"parcel:{p.nope}")
def keyed(box: Box) -> None: ...


def test_a_key_function_that_raises_is_the_jobs_failure_not_an_invalid_payload(world):
    """A trial's key= function raised on a by-name enqueue (its key runs in the consumer): the record
    was dead-lettered invalid-payload, "payload does not match ... key= function failed:
    ConfigurationError(...)", though the payload was fine and the code was wrong."""
    handler, records = world
    env = Envelope.new("u.keyed", {"id": "p1"}, track=True)  # no key: the consumer runs key=
    handler(sqs_event(env), FakeLambdaContext())
    status = records.get_status(env.id)
    assert status is not None and status.status is JobState.RETRYING, status
    assert status.error is not None and "job u.keyed: its key= function raised AttributeError" in status.error
    assert "does not match" not in status.error and "failed: ConfigurationError(" not in status.error
