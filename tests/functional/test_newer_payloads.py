"""A payload version newer than the consumer's job, during a deploy: handed back for a consumer that
reads it, then dead-lettered ``version`` (jobframework/newer_payload.py).

A platform trial: a producer deployed with version 2 while the canary still sent nine invocations in
ten to the old consumer had those jobs dead-lettered at once, which the DLQ-inflow alarm counts and
which rolls the canary back."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from jobframework import consumer, job
from jobframework.attempts import ATTR_NEWER
from jobframework.client import JobClient
from jobframework.envelope import Envelope
from jobframework.jobs import JobRegistry
from jobframework.newer_payload import NEWER_RETRY_SECONDS, NEWER_WINDOW_SECONDS
from jobframework.testing import consume_once, provision_fresh, sqs_record

old = JobRegistry()
new = JobRegistry()
ran: list[Any] = []


class ExportV1(BaseModel):
    account_id: str
    dest: str


class ExportV2(BaseModel):
    account_id: str
    destination: str


@job("newer.export", registry=old, idempotent=False)
def export_v1(payload: ExportV1) -> None:
    ran.append(("v1", payload))


@job("newer.ordered", registry=old, idempotent=False, ordered_by=lambda p: p.account_id, timeout=5)
def ordered_v1(payload: ExportV1) -> None:
    ran.append(("v1", payload))


@job(
    "newer.export",
    registry=new,
    idempotent=False,
    version=2,
    upgrade={1: lambda v1: {"account_id": v1["account_id"], "destination": v1["dest"]}},
)
def export_v2(payload: ExportV2) -> None:
    ran.append(("v2", payload))


@pytest.fixture
def world(jf_aws: Any) -> tuple[Any, Any, list[dict[str, Any]]]:
    ran.clear()
    _, config = provision_fresh(jf_aws.endpoint_url, old)
    sqs = jf_aws.client("sqs")
    copies: list[dict[str, Any]] = []

    def sent(params: dict[str, Any], **_: Any) -> None:
        if params["QueueUrl"] == config.endpoints("default").url:
            copies.extend(params["Entries"])

    sqs.meta.events.register("provide-client-params.sqs.SendMessageBatch", sent)
    return config, sqs, copies


def test_an_old_consumer_hands_a_newer_payload_back_and_the_new_one_runs_it(world):
    config, sqs, copies = world
    url = config.endpoints("default").url
    outcomes: list[Any] = []
    JobClient(config, registry=new, sqs_client=sqs).enqueue(
        export_v2, ExportV2(account_id="a-1", destination="s3://x")
    )
    consume_once(consumer(old, config=config, sqs_client=sqs, listeners=[outcomes.append]), sqs, url)
    [outcome] = outcomes
    assert (outcome.outcome, outcome.reason) == ("released", "newer payload")
    assert "payload is version 2, newer than this consumer's 1" in (outcome.error or "")
    assert ran == []
    [copy] = copies  # a fresh copy, back in a minute, carrying when it was first handed back
    assert copy["DelaySeconds"] == NEWER_RETRY_SECONDS
    first = float(copy["MessageAttributes"][ATTR_NEWER]["StringValue"])
    assert abs(first - time.time()) < 30
    # A minute later the deploy has finished: the new consumer reads it, as its first attempt.
    attributes = {k: v for k, v in copy["MessageAttributes"].items()}
    sqs.send_message(QueueUrl=url, MessageBody=copy["MessageBody"], MessageAttributes=attributes)
    outcomes.clear()
    consume_once(consumer(new, config=config, sqs_client=sqs, listeners=[outcomes.append]), sqs, url)
    assert [(o.outcome, o.attempt) for o in outcomes] == [("succeeded", 1)]
    assert ran == [("v2", ExportV2(account_id="a-1", destination="s3://x"))]


def test_a_newer_payload_no_consumer_read_within_the_window_is_dead_lettered_saying_so(world):
    config, sqs, copies = world
    outcomes: list[Any] = []
    handler = consumer(old, config=config, sqs_client=sqs, listeners=[outcomes.append])
    env = Envelope.new("newer.export", {"account_id": "a-2", "destination": "d"}, payload_version=2)
    since = time.time() - NEWER_WINDOW_SECONDS - 5
    record = sqs_record(env, config=config, registry=old, message_attributes={ATTR_NEWER: f"{since:.0f}"})
    assert handler({"Records": [record]}, None) == {"batchItemFailures": []}
    [outcome] = outcomes
    assert (outcome.outcome, outcome.reason) == ("dead_lettered", "version")
    assert "handed back for 60 minutes for a consumer that reads it; none came" in (outcome.error or "")
    assert copies == []


def test_a_copy_handed_back_again_keeps_the_time_it_was_first_handed_back(world):
    """Its window counts from its first hand-back, not from each (it would be handed back for ever)."""
    config, sqs, copies = world
    handler = consumer(old, config=config, sqs_client=sqs)
    env = Envelope.new("newer.export", {"account_id": "a-4", "destination": "d"}, payload_version=2)
    since = f"{time.time() - 600:.0f}"
    record = sqs_record(env, config=config, registry=old, message_attributes={ATTR_NEWER: since})
    assert handler({"Records": [record]}, None) == {"batchItemFailures": []}
    [copy] = copies
    assert copy["MessageAttributes"][ATTR_NEWER]["StringValue"] == since


def test_another_copy_of_the_job_does_not_take_the_time_over(world):
    """A retry's or a limit's copy of a job that once waited for a newer consumer starts no clock: a
    later old consumer (a rollback) counts from its own first hand-back."""
    from jobframework.handback import copy_message

    env = Envelope.new("newer.export", {"account_id": "a-5", "destination": "d"}, payload_version=2)
    config, _, _ = world
    record = sqs_record(env, config=config, registry=old, message_attributes={ATTR_NEWER: "1765000000"})
    assert ATTR_NEWER not in copy_message(record, delay=0, executions=0)["MessageAttributes"]


def test_a_newer_payload_on_a_fifo_lane_is_dead_lettered_at_once(world):
    """Its hand-back would stay in place, its group behind it, carrying no count."""
    config, sqs, _ = world
    outcomes: list[Any] = []
    handler = consumer(old, config=config, sqs_client=sqs, listeners=[outcomes.append])
    env = Envelope.new("newer.ordered", {"account_id": "a-3", "destination": "d"}, payload_version=2)
    record = sqs_record(env, config=config, registry=old)
    assert record["eventSourceARN"].endswith(".fifo")
    handler({"Records": [record]}, None)
    assert [(o.outcome, o.reason) for o in outcomes] == [("dead_lettered", "version")]


def test_a_newer_payload_cancelled_while_it_waits_is_dropped_cancelled_not_dead_lettered(world):
    """A jf cancel of the waiting job is honoured at its next hand-back; it had waited out the hour,
    then been dead-lettered version."""
    config, sqs, copies = world
    url = config.endpoints("default").url
    outcomes: list[Any] = []
    producer = JobClient(config, registry=new, sqs_client=sqs)
    queued = producer.enqueue(export_v2, ExportV2(account_id="a-6", destination="d"), track=True)
    old_consumer = consumer(old, config=config, sqs_client=sqs, listeners=[outcomes.append])
    consume_once(old_consumer, sqs, url)
    assert [o.reason for o in outcomes] == ["newer payload"]
    waiting = producer.status(queued.id)  # (it read queued, attempts 0: no word of why)
    assert waiting is not None and (waiting.status, waiting.attempts) == ("retrying", 0)
    assert "newer payload: " in (waiting.error or "") and "waiting for a consumer that reads it" in (
        waiting.error or ""
    )
    assert producer.cancel(queued.id).outcome == "cancelled"
    [copy] = copies
    sqs.send_message(
        QueueUrl=url, MessageBody=copy["MessageBody"], MessageAttributes=copy["MessageAttributes"]
    )
    outcomes.clear()
    consume_once(old_consumer, sqs, url)
    assert [(o.outcome, o.reason) for o in outcomes] == [("skipped", "cancelled")]
    status = producer.status(queued.id)
    assert status is not None and (status.status, status.attempts) == ("cancelled", 0)
    assert ran == [] and len(copies) == 1


def test_a_newer_payload_whose_deadline_passes_while_it_waits_is_dropped_expired(world):
    config, sqs, copies = world
    outcomes: list[Any] = []
    handler = consumer(old, config=config, sqs_client=sqs, listeners=[outcomes.append])
    env = Envelope.new("newer.export", {"account_id": "a-7", "destination": "d"}, payload_version=2)
    env = env.model_copy(update={"deadline": env.enqueued_at - timedelta(seconds=1)})
    record = sqs_record(
        env, config=config, registry=old, message_attributes={ATTR_NEWER: f"{time.time():.0f}"}
    )
    assert handler({"Records": [record]}, None) == {"batchItemFailures": []}
    assert [o.outcome for o in outcomes] == ["skipped"] and "not started by its deadline" in (
        outcomes[0].reason or ""
    )
    assert copies == []


def test_a_newer_payload_dead_lettered_at_last_counts_no_attempt(world):
    """It never ran: its dead status says attempts 0 (it said 1)."""
    config, sqs, _ = world
    producer = JobClient(config, registry=new, sqs_client=sqs)
    queued = producer.enqueue(export_v2, ExportV2(account_id="a-8", destination="d"), track=True)
    [message] = sqs.receive_message(
        QueueUrl=config.endpoints("default").url, MessageAttributeNames=["All"], AttributeNames=["All"]
    )["Messages"]
    since = time.time() - NEWER_WINDOW_SECONDS - 5
    attributes = {
        k: {"stringValue": v["StringValue"], "dataType": v["DataType"]}
        for k, v in message["MessageAttributes"].items()
    }
    attributes[ATTR_NEWER] = {"stringValue": f"{since:.0f}", "dataType": "String"}
    record = sqs_record(Envelope.model_validate_json(message["Body"]), config=config, registry=old)
    record["messageAttributes"] = attributes
    handler = consumer(old, config=config, sqs_client=sqs)
    assert handler({"Records": [record]}, None) == {"batchItemFailures": []}
    status = producer.status(queued.id)
    assert status is not None and (status.status, status.attempts) == ("dead", 0)
