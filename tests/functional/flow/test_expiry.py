"""Expiry: a job not started by its deadline is dropped with status expired (and counted)."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest

from jobframework.client import EnqueueRequest
from jobframework.envelope import Envelope, parse_body
from jobframework.errors import ConfigurationError
from jobframework.state import JobState
from jobframework.testing import receive_all

from . import flow_jobs
from .flow_jobs import Item


def test_a_job_not_started_by_its_deadline_is_dropped_expired(flow, capsys, monkeypatch):
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    monkeypatch.setenv("JF_METRICS_DISABLED", "false")
    late = flow.client.enqueue("f.ok", Item(name="late"), expires_in=0.5).id
    on_time = flow.client.enqueue("f.ok", Item(name="on-time"), expires_in=timedelta(minutes=5)).id
    time.sleep(0.7)
    capsys.readouterr()
    records, response = flow.consume("high")
    assert len(records) == 2 and response == {"batchItemFailures": []}
    assert flow_jobs.calls == {"on-time": 1}
    status = flow.client.status(late)
    assert status.status is JobState.EXPIRED and status.reason.startswith("not started by its deadline")
    assert flow.client.status(on_time).status is JobState.SUCCEEDED
    assert receive_all(flow.sqs, flow.url("high")) == []
    assert receive_all(flow.sqs, flow.config.endpoints("high").dlq_url) == []
    emf = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    expired = [m for m in emf if "Expired" in m]
    assert expired and expired[0]["Expired"] == [1.0] and expired[0]["JobType"] == "f.ok"


def test_the_jobs_expires_after_applies_and_enqueue_overrides_it(flow):
    prepared = flow.client.prepare(EnqueueRequest("f.expiring", Item(name="x")))
    env = prepared.envelope
    assert env.deadline is not None and (env.deadline - env.enqueued_at).total_seconds() == 1.0
    dropped = flow.client.enqueue("f.expiring", Item(name="default-expiry")).id  # expires_after=1.0
    kept = flow.client.enqueue("f.expiring", Item(name="longer"), expires_in=60).id
    time.sleep(1.2)
    flow.consume("low")
    assert flow.client.status(dropped).status is JobState.EXPIRED
    assert flow.client.status(kept).status is JobState.SUCCEEDED and flow_jobs.calls == {"longer": 1}


def test_a_retry_after_the_deadline_still_runs(flow):
    """Expiry is about work that never began: a job that started in time finishes its retries."""
    job_id = flow.client.enqueue("f.flaky", Item(name="f", fail_times=1), expires_in=1.0).id
    flow.consume("default")  # attempt 1 fails before the deadline
    time.sleep(1.3)
    flow.consume("default")
    assert flow_jobs.calls["f"] == 2 and flow.client.status(job_id).status is JobState.SUCCEEDED


def test_consumers_racing_the_deadline_run_or_expire_each_job_exactly_once(flow):
    ids = [flow.client.enqueue("f.ok", Item(name=f"r{n}"), expires_in=0.3).id for n in range(16)]
    time.sleep(0.25)
    with ThreadPoolExecutor(3) as pool:
        for f in [pool.submit(flow.consume, "high", max_messages=3) for _ in range(8)]:
            f.result(60)
    while flow.consume("high")[0]:
        pass
    ran = {r["id"] for r in flow_jobs.ran}
    for job_id in ids:
        status = flow.client.status(job_id).status
        assert status is (JobState.SUCCEEDED if job_id in ran else JobState.EXPIRED), (job_id, status)
    assert len(flow_jobs.ran) == len(ran) and receive_all(flow.sqs, flow.url("high")) == []


def test_the_deadline_is_an_additive_wire_field():
    old = Envelope.new("f.ok", {"name": "a"})
    assert "deadline" not in json.loads(old.to_body())  # a producer without expiry sends no new field
    assert parse_body(old.to_body()).deadline is None
    body = json.loads(old.to_body()) | {"deadline": "2026-12-03T12:00:00+00:00"}
    assert parse_body(json.dumps(body)).deadline.isoformat() == "2026-12-03T12:00:00+00:00"


@pytest.mark.parametrize("value", [0, -1, 15 * 24 * 3600, "soon", True])
def test_a_bad_expiry_is_refused_before_anything_is_sent(flow, value):
    with pytest.raises(ConfigurationError, match="expires_in must be"):
        flow.client.enqueue("f.ok", Item(name="x"), expires_in=value)
    assert receive_all(flow.sqs, flow.url("high"), attempts=1) == []
