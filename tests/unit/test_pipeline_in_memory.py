"""The consumer's pipeline on the in-memory job records: tracked jobs, their statuses, cancel before and
during a run, with no embedded AWS and no sleep. Any AWS request fails the test."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from pydantic import BaseModel

from jobframework import JobContext, job
from jobframework.consumer import Consumer, consumer
from jobframework.envelope import Envelope
from jobframework.jobs import JobRegistry, Priority
from jobframework.state import StateStore
from jobframework.status import JobState
from jobframework.stores.job_records import InMemoryJobRecords
from jobframework.testing import FakeLambdaContext, sqs_event
from jobframework.topology import RuntimeConfig

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
def world() -> tuple[Consumer, InMemoryJobRecords, list[str]]:
    requests: list[str] = []

    def no_aws(event_name: str, **_: Any) -> None:
        requests.append(event_name)
        raise AssertionError(f"the pipeline made an AWS request: {event_name}")

    session = boto3.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
    )
    sqs, dynamodb = (session.client(s, endpoint_url="http://127.0.0.1:9") for s in ("sqs", "dynamodb"))
    for client in (sqs, dynamodb):
        client.meta.events.register("before-send", no_aws)
    config = RuntimeConfig(
        queues={
            p: {"url": f"https://q/jf-dev-{p.value}", "dlq_url": f"https://q/jf-dev-{p.value}-dlq"}
            for p in Priority
        },
        state_table="jf-state",
    )
    records = InMemoryJobRecords()
    seen.clear()
    seen["records"] = records
    handler = consumer(
        registry, config=config, sqs_client=sqs, state=StateStore("jf-state", dynamodb, jobs=records)
    )
    return handler, records, requests


def _tracked(order: Order) -> Envelope:
    return Envelope.new("u.ship", order.model_dump()).model_copy(update={"track": True})


def test_a_tracked_job_runs_and_its_status_is_kept_in_memory(world):
    handler, records, requests = world
    env = _tracked(Order(id="o1"))
    records.set_status(env.id, JobState.QUEUED, job_type="u.ship", attempts=0)  # what the client writes
    assert handler(sqs_event(env), FakeLambdaContext()) == {"batchItemFailures": []}
    assert seen["o1.status"] is JobState.RUNNING  # the start claim says so, no write of its own
    done = records.get_status(env.id)
    assert done is not None
    assert (done.status, done.attempts, done.result) == (JobState.SUCCEEDED, 1, {"shipped": "o1"})
    assert requests == []


def test_a_job_cancelled_before_it_starts_is_acknowledged_unrun(world):
    handler, records, requests = world
    env = _tracked(Order(id="o2"))
    records.set_status(env.id, JobState.QUEUED, job_type="u.ship", attempts=0)
    records.mark_cancelled(env.id, 0.0)
    assert handler(sqs_event(env), FakeLambdaContext()) == {"batchItemFailures": []}
    assert "o2.status" not in seen  # it did not run
    status = records.get_status(env.id)
    assert status is not None and status.status is JobState.CANCELLED
    assert requests == []


def test_a_running_job_sees_its_cancel(world):
    handler, records, requests = world
    env = _tracked(Order(id="o3", cancel_itself=True))
    records.set_status(env.id, JobState.QUEUED, job_type="u.ship", attempts=0)
    assert handler(sqs_event(env), FakeLambdaContext()) == {"batchItemFailures": []}
    assert seen["o3.cancelled"] is True
    assert requests == []


def test_a_batch_of_tracked_jobs_runs_concurrently_and_each_status_is_its_own(world):
    handler, records, requests = world
    envs = [_tracked(Order(id=f"b{n}")) for n in range(10)]
    for env in envs:
        records.set_status(env.id, JobState.QUEUED, job_type="u.ship", attempts=0)
    assert handler(sqs_event(*envs), FakeLambdaContext()) == {"batchItemFailures": []}
    statuses = [records.get_status(e.id) for e in envs]
    assert [(s.status, s.result) for s in statuses if s is not None] == [
        (JobState.SUCCEEDED, {"shipped": f"b{n}"}) for n in range(10)
    ]
    assert requests == []
