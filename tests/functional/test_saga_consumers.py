"""A saga's steps on a consumer that does not define the saga, and untracked steps' records."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from jobframework.client import JobClient
from jobframework.consumer import consumer
from jobframework.envelope import Envelope, SagaRef
from jobframework.errors import PermanentError
from jobframework.jobs import JobRegistry, job
from jobframework.saga import SagaStatus, saga, step
from jobframework.testing import consume_once, provision_fresh, receive_all

registry = JobRegistry()
ran: list[str] = []


class Parcel(BaseModel):
    parcel_id: str


@job("u.charge", registry=registry, priority="high")  # untracked: no status record of its own
def charge(parcel: Parcel) -> dict[str, Any]:
    ran.append(f"charge {parcel.parcel_id}")
    return {"charged": True}


@job("u.refund", registry=registry, priority="high")
def refund(parcel: Parcel) -> None:
    ran.append(f"refund {parcel.parcel_id}")


@job("u.ship", registry=registry, priority="high")
def ship(parcel: Parcel) -> None:
    ran.append(f"ship {parcel.parcel_id}")


@job("u.decline", registry=registry, priority="high")
def decline(parcel: Parcel) -> None:
    raise PermanentError(f"{parcel.parcel_id} declined")


shipping = saga("u.shipping", steps=[step(charge, compensate=refund), step(ship)], registry=registry)
declining = saga("u.declining", steps=[step(decline)], registry=registry)


def _without_the_sagas() -> JobRegistry:
    """The same jobs, registered where no saga is defined (a consumer that lacks the saga module)."""
    jobs = JobRegistry()
    for j in registry:
        jobs.register(j)
    return jobs


def _setup(jf_aws: Any) -> tuple[Any, Any, JobClient]:
    ran.clear()
    _, config = provision_fresh(jf_aws.endpoint_url, registry)
    sqs = jf_aws.client("sqs")
    return config, sqs, JobClient(config, registry=registry, sqs_client=sqs)


def test_a_step_of_a_saga_the_consumer_does_not_define_is_dead_lettered_unknown_saga(jf_aws):
    """Its saga cannot be advanced there, so no retry can help: the hook's retries went on until SQS's
    own redrive moved the record, with no reason, and the saga showed running for good."""
    config, sqs, client = _setup(jf_aws)
    shipping.start({"parcel_id": "p-1"}, client=client)
    without_the_saga = _without_the_sagas()

    outcomes: list[Any] = []
    handler = consumer(without_the_saga, config=config, sqs_client=sqs, listeners=[outcomes.append])
    records, response = consume_once(handler, sqs, config.endpoints("high").url)

    assert len(records) == 1 and response == {"batchItemFailures": []}  # settled: in the DLQ
    assert ran == ["charge p-1"]
    [outcome] = outcomes  # told as every dead letter is: reason, error, how long it ran
    assert (outcome.outcome, outcome.reason) == ("dead_lettered", "unknown-saga")
    assert outcome.processing_ms is not None and outcome.started_at is not None
    [letter] = receive_all(sqs, config.endpoints("high").dlq_url)
    attrs = {k: v["StringValue"] for k, v in letter["MessageAttributes"].items()}
    assert attrs["jf-reason"] == "unknown-saga"
    assert "saga u.shipping is not defined on this consumer's registry" in attrs["jf-error"]
    assert json.loads(letter["Body"])["type"] == "u.charge"


def test_a_failed_step_of_an_undefined_saga_keeps_why_it_failed(jf_aws):
    config, sqs, client = _setup(jf_aws)
    declining.start({"parcel_id": "p-3"}, client=client)
    handler = consumer(_without_the_sagas(), config=config, sqs_client=sqs)

    consume_once(handler, sqs, config.endpoints("high").url)

    [letter] = receive_all(sqs, config.endpoints("high").dlq_url)
    attrs = {k: v["StringValue"] for k, v in letter["MessageAttributes"].items()}
    assert attrs["jf-reason"] == "unknown-saga"
    assert attrs["jf-error"].endswith("(the job had failed: permanent: PermanentError: p-3 declined)")


def test_a_step_whose_saga_record_is_gone_is_dead_lettered_unknown_saga(jf_aws):
    """No saga record (expired, or a hand-made message): retried, the hook failed the same way."""
    config, sqs, _ = _setup(jf_aws)
    env = Envelope.new("u.ship", {"parcel_id": "p-4"}, saga=SagaRef(id="no-such-saga", step="ship"))
    sqs.send_message(QueueUrl=config.endpoints("high").url, MessageBody=env.to_body())
    handler = consumer(registry, config=config, sqs_client=sqs)

    records, response = consume_once(handler, sqs, config.endpoints("high").url)

    assert len(records) == 1 and response == {"batchItemFailures": []}
    [letter] = receive_all(sqs, config.endpoints("high").dlq_url)
    attrs = {k: v["StringValue"] for k, v in letter["MessageAttributes"].items()}
    assert attrs["jf-reason"] == "unknown-saga" and "no saga no-such-saga" in attrs["jf-error"]


def test_an_untracked_steps_attempts_and_start_are_in_the_saga_record(jf_aws):
    """They came from the step's status record, which an untracked job does not keep: 0 and none."""
    config, sqs, client = _setup(jf_aws)
    saga_id = shipping.start({"parcel_id": "p-2"}, client=client)
    handler = consumer(registry, config=config, sqs_client=sqs)
    for _ in range(2):
        consume_once(handler, sqs, config.endpoints("high").url)

    record = client.saga_status(saga_id)

    assert record is not None and record.status is SagaStatus.SUCCEEDED, record
    assert ran == ["charge p-2", "ship p-2"]
    assert [(s.attempts, bool(s.started_at)) for s in record.steps] == [(1, True), (1, True)]
    assert all(s.started_at <= (s.finished_at or "") for s in record.steps), record.steps
