"""A job module's listener hears every consumer of the process, the deployed one too (a BullMQ trial
found `consumer(listeners=...)` only, for a handler it does not write when it deploys)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from jobframework import RecordOutcome, on_outcome
from jobframework.consumer import consumer
from jobframework.envelope import Envelope
from jobframework.jobs import JobRegistry, job
from jobframework.outcome_listeners import registered, remove_outcome_listener
from jobframework.testing import FakeLambdaContext, sqs_event, sqs_record
from jobframework.topology import QueueEndpoints, RuntimeConfig

registry = JobRegistry()


class Thumb(BaseModel):
    image_id: str


@job("images.thumbnail", registry=registry, idempotent=False)
def thumbnail(p: Thumb) -> dict[str, str]:
    return {"path": f"thumbs/{p.image_id}.png"}


def test_a_registered_listener_hears_each_outcome_with_the_result_and_a_failing_one_is_no_failure():
    heard: list[RecordOutcome] = []

    @on_outcome
    def broken(outcome: RecordOutcome) -> None:
        raise RuntimeError("the listener's own bug")

    @on_outcome
    def completed(outcome: RecordOutcome) -> None:
        heard.append(outcome)

    config = RuntimeConfig(
        queues={"default": QueueEndpoints(url="https://sqs/q-default", dlq_url="https://sqs/d")}
    )
    handler = consumer(registry, config=config, sqs_client=object())  # type: ignore[arg-type]
    record = sqs_record(
        Envelope.new("images.thumbnail", {"image_id": "u1"}), queue_arn="arn:aws:sqs:us-east-1:1:q-default"
    )
    try:
        assert handler(sqs_event(record), FakeLambdaContext(900)) == {"batchItemFailures": []}
    finally:
        for listener in (broken, completed):
            remove_outcome_listener(listener)
    [outcome] = heard
    assert (outcome.outcome, outcome.job_type) == ("succeeded", "images.thumbnail")
    assert outcome.result == {"path": "thumbs/u1.png"}  # (as client.status(id).result gives it)
    assert completed not in registered()


def test_on_outcome_refuses_what_is_not_a_function():
    import pytest

    from jobframework.errors import ConfigurationError

    not_a_function: Any = "images.thumbnail"
    with pytest.raises(ConfigurationError, match="on_outcome takes a function of one RecordOutcome"):
        on_outcome(not_a_function)
