from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import pytest

from jobframework.client import JobClient
from jobframework.consumer import Consumer, consumer
from jobframework.delivery import RecordOutcome
from jobframework.testing import consume_once, provision_fresh
from jobframework.topology import RuntimeConfig

from . import flow_jobs


@dataclass
class Flow:
    """A fresh topology of the flow jobs, with a client and a consumer that records outcomes."""

    config: RuntimeConfig
    sqs: Any
    dynamodb: Any
    client: JobClient
    handler: Consumer
    outcomes: list[RecordOutcome] = field(default_factory=list)

    def url(self, lane: str) -> str:
        return self.config.endpoints(lane).url

    def consume(self, lane: str, **kwargs: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        return consume_once(self.handler, self.sqs, self.url(lane), **kwargs)


@pytest.fixture
def flow(jf_aws: Any) -> Flow:
    flow_jobs.calls.clear()
    flow_jobs.ran.clear()
    flow_jobs.started.clear()
    _, config = provision_fresh(jf_aws.endpoint_url, flow_jobs.registry)
    sqs, dynamodb = jf_aws.client("sqs"), jf_aws.client("dynamodb")
    outcomes: list[RecordOutcome] = []
    handler = consumer(flow_jobs.registry, config=config, sqs_client=sqs, listeners=[outcomes.append])
    client = JobClient(config, registry=flow_jobs.registry, sqs_client=sqs, clients={"dynamodb": dynamodb})
    return Flow(config, sqs, dynamodb, client, handler, outcomes)


@pytest.fixture(autouse=True)
def _serialized_dynamodb_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    """DynamoDB applies each conditional write atomically; moto evaluates the condition and then writes
    without a lock, so two racing requests can both pass. The flow tests race writes on purpose, so
    they make the embedded AWS (in this process) serialize them as DynamoDB does."""
    from moto.dynamodb.models import DynamoDBBackend

    lock = threading.RLock()
    for name in ("update_item", "put_item", "delete_item"):
        original = getattr(DynamoDBBackend, name)

        def serialized(self: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            with lock:
                return _original(self, *args, **kwargs)

        monkeypatch.setattr(DynamoDBBackend, name, serialized)
