"""The consumer, run against the embedded AWS, writes the EMF metrics the dashboard reads."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from jobframework import job
from jobframework.jobs import JobRegistry

scheduled = JobRegistry()


class Tick(BaseModel):
    n: int = 0


@job("m.tick", registry=scheduled, schedule="rate(5 minutes)", idempotent=False)
def tick(p: Tick) -> None: ...


@pytest.fixture
def emf(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Any:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    monkeypatch.setenv("JF_METRICS_DISABLED", "false")
    monkeypatch.delenv("POWERTOOLS_DEV", raising=False)
    monkeypatch.delenv("POWERTOOLS_METRICS_NAMESPACE", raising=False)
    capsys.readouterr()

    def read() -> dict[str, dict[str, Any]]:
        """The documents with a ``JobType`` and ``Priority``, by job type."""
        docs = [
            json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith('{"_aws"')
        ]
        return {d["JobType"]: d for d in docs if "JobType" in d and "Priority" in d}

    return read


def test_a_batch_writes_end_to_end_latency_and_first_attempt_failures_per_job_type(rt, emf):
    rt.client.enqueue("t.ok", {"name": "a"})
    rt.client.enqueue("t.declined", {"name": "card"})
    records, _ = rt.consume("high")
    assert len(records) == 2
    by_type = emf()

    ok = by_type["t.ok"]
    assert ok["Priority"] == "high" and ok["service"] == "jobframework"
    [latency] = ok["EndToEndLatency"]
    assert 0 <= latency < 60_000
    assert ok["FirstAttempts"] == [1.0]
    assert "FirstAttemptFailures" not in ok

    declined = by_type["t.declined"]
    assert declined["FirstAttempts"] == [1.0]
    assert declined["FirstAttemptFailures"] == [1.0]
    assert declined["DeadLettered"] == [1.0]
    assert "EndToEndLatency" not in declined  # dead-lettered: no completion
    [directive] = declined["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == "JobFramework"
    assert directive["Dimensions"] == [["service", "JobType", "Priority"]]


def test_a_failed_first_execution_that_is_retried_counts_as_a_first_attempt_failure(rt, emf):
    rt.client.enqueue("t.flaky", {"name": "f", "fail_times": 1})
    records, response = rt.consume("default")
    assert response["batchItemFailures"] == [{"itemIdentifier": records[0]["messageId"]}]
    flaky = emf()["t.flaky"]
    assert flaky["Priority"] == "default"
    assert flaky["FirstAttempts"] == [1.0]
    assert flaky["FirstAttemptFailures"] == [1.0]
    assert flaky["Retried"] == [1.0]
    assert len(flaky["ProcessingTime"]) == 1
    assert "EndToEndLatency" not in flaky and "Succeeded" not in flaky


def test_a_scheduled_run_writes_its_heartbeat(emf, capsys):
    """The Heartbeat a scheduled job's alarm watches: the stages noted it on the delivery, and no metric
    was written since the consumer became a pipeline (its alarm would have said the schedule stopped)."""
    from jobframework.envelope import Envelope
    from jobframework.scheduling import SCHEDULE_KEY_PREFIX
    from jobframework.testing import FakeLambdaContext, in_memory_consumer, sqs_event

    handler, _ = in_memory_consumer(scheduled)
    capsys.readouterr()
    env = Envelope.new("m.tick", {"n": 1}, key=f"{SCHEDULE_KEY_PREFIX}m.tick:2026-12-07T04:35")
    assert handler(sqs_event(env), FakeLambdaContext()) == {"batchItemFailures": []}
    docs = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith('{"_aws"')]
    assert [d["Heartbeat"] for d in docs if d.get("JobType") == "m.tick" and "Heartbeat" in d] == [[1.0]], (
        docs
    )
