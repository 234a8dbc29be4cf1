"""A producer not yet moved to a job's new payload version sends the old shape with
``payload_version=``: the consumer upgrades it (a trial's by-name producer broke the moment the
consumer's version 2 was deployed: its version-1 payload was refused against the new schema)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from jobframework import consumer, job
from jobframework.client import JobClient
from jobframework.errors import EnqueueOptionError, PayloadValidationError
from jobframework.jobs import JobRegistry
from jobframework.testing import consume_once, provision_fresh, receive_all

registry = JobRegistry()
exported: list[Any] = []


class Export(BaseModel):  # version 2: "dest" was renamed "destination"
    account_id: str
    destination: str


@job(
    "old.export",
    registry=registry,
    idempotent=False,
    version=2,
    upgrade={1: lambda v1: {"account_id": v1["account_id"], "destination": v1["dest"]}},
)
def export(payload: Export) -> None:
    exported.append(payload)


class Where(BaseModel):
    city: str


class Move(BaseModel):  # version 2: where.town was renamed where.city
    where: Where


def _town_to_city(v1: dict[str, Any]) -> dict[str, Any]:
    v1["where"]["city"] = v1["where"].pop("town")  # (changes the nested object it was given)
    return v1


@job("old.move", registry=registry, idempotent=False, version=2, upgrade={1: _town_to_city})
def move(payload: Move) -> None:
    exported.append(payload)


@pytest.fixture
def world(jf_aws: Any) -> tuple[Any, Any, Any]:
    exported.clear()
    _, config = provision_fresh(jf_aws.endpoint_url, registry)
    sqs = jf_aws.client("sqs")
    return config, sqs, jf_aws


def _sent(sqs: Any, config: Any) -> list[dict[str, Any]]:
    return [json.loads(m["Body"]) for m in receive_all(sqs, config.endpoints("default").url)]


def test_an_older_payload_is_checked_through_the_upgrade_sent_as_it_is_and_run_upgraded(world):
    config, sqs, _ = world
    client = JobClient(config, registry=registry, sqs_client=sqs)
    client.enqueue(export, {"account_id": "a-1", "dest": "s3://x"}, payload_version=1)
    consume_once(consumer(registry, config=config, sqs_client=sqs), sqs, config.endpoints("default").url)
    assert exported == [Export(account_id="a-1", destination="s3://x")]

    client.enqueue(export, {"account_id": "a-2", "dest": "s3://y"}, payload_version=1)
    (body,) = _sent(sqs, config)
    assert (body["payload_version"], body["payload"]) == (1, {"account_id": "a-2", "dest": "s3://y"})


def test_an_older_payload_that_does_not_upgrade_to_a_valid_one_is_refused_before_sending(world):
    config, sqs, _ = world
    client = JobClient(config, registry=registry, sqs_client=sqs)
    with pytest.raises(PayloadValidationError, match="destination"):
        client.enqueue(export, {"account_id": "a-1", "dest": 7}, payload_version=1)
    with pytest.raises(PayloadValidationError, match="a dict of that version's fields"):
        client.enqueue(export, Export(account_id="a", destination="d"), payload_version=1)
    with pytest.raises(EnqueueOptionError, match=r"from 1 to old\.export's version 2"):
        client.enqueue(export, {"account_id": "a-1", "destination": "d"}, payload_version=3)
    assert _sent(sqs, config) == []


def test_a_producer_by_name_sends_an_older_payload_unchecked_for_the_consumer_to_upgrade(world):
    config, sqs, aws = world
    by_name = JobClient(
        config.model_copy(update={"jobs": {}}),  # the job known from the topology's catalog only
        registry=JobRegistry(),
        sqs_client=sqs,
        clients={"ssm": aws.client("ssm")},
    )
    with pytest.raises(PayloadValidationError, match="destination") as refused:  # the catalog's: version 2
        by_name.enqueue("old.export", {"account_id": "a-1", "dest": "s3://x"})
    assert "takes payload version 2: a payload of an older version is sent with payload_version=N" in str(
        refused.value
    )
    with pytest.raises(PayloadValidationError, match="account_id") as wrong_type:  # (a type: not the shape)
        by_name.enqueue("old.export", {"account_id": 7, "destination": "s3://x"})
    assert "payload version" not in str(wrong_type.value)  # (a trial read a versioning hint for it)
    by_name.enqueue("old.export", {"account_id": "a-1", "dest": "s3://x"}, payload_version=1)
    consume_once(consumer(registry, config=config, sqs_client=sqs), sqs, config.endpoints("default").url)
    assert exported == [Export(account_id="a-1", destination="s3://x")]


def test_an_upgrade_that_changes_a_nested_object_leaves_what_is_sent_as_given(world):
    config, sqs, _ = world
    client = JobClient(config, registry=registry, sqs_client=sqs)
    client.enqueue(move, {"where": {"town": "Lyon"}}, payload_version=1)
    (body,) = _sent(sqs, config)
    assert body["payload"] == {"where": {"town": "Lyon"}}
