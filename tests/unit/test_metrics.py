"""The consumer's EMF metrics that the dashboard reads: what one batch writes, captured from stdout."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from jobframework.classification import Reason
from jobframework.delivery import Outcome, OutcomeName, RecordOutcome
from jobframework.telemetry import BatchMetrics


@pytest.fixture
def emf(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Any:
    """Metrics on (the suite turns them off); returns a reader of the EMF documents printed since."""
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    monkeypatch.setenv("JF_METRICS_DISABLED", "false")
    monkeypatch.delenv("POWERTOOLS_DEV", raising=False)
    monkeypatch.delenv("POWERTOOLS_METRICS_NAMESPACE", raising=False)
    capsys.readouterr()

    def read() -> list[dict[str, Any]]:
        return [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]

    return read


def outcome(kind: OutcomeName, attempt: int = 1, **details: Any) -> RecordOutcome:
    return RecordOutcome(
        message_id="m",
        outcome=kind,
        job_type="reports.make",
        job_id="j",
        priority="low",
        attempt=attempt,
        **details,
    )


def document(docs: list[dict[str, Any]], metric: str, **dimensions: str) -> dict[str, Any]:
    """The one document that carries ``metric`` with exactly ``dimensions`` (plus ``service``)."""
    wanted = {"service", *dimensions}
    found = [
        d
        for d in docs
        for directive in d["_aws"]["CloudWatchMetrics"]
        if set(directive["Dimensions"][0]) == wanted
        and metric in {m["Name"] for m in directive["Metrics"]}
        and all(d[k] == v for k, v in dimensions.items())
    ]
    assert len(found) == 1, (metric, dimensions, docs)
    return found[0]


def values(doc: dict[str, Any], metric: str) -> list[float]:
    """The metric's values (the consumer writes every value of a batch in one array)."""
    return list(doc[metric])


def unit_of(doc: dict[str, Any], metric: str) -> str:
    [directive] = doc["_aws"]["CloudWatchMetrics"]
    [unit] = [m["Unit"] for m in directive["Metrics"] if m["Name"] == metric]
    return str(unit)


def test_end_to_end_latency_runs_from_the_envelopes_enqueue_time_to_success(emf):
    metrics = BatchMetrics()
    enqueued = datetime.now(UTC) - timedelta(seconds=90)
    metrics.add(outcome(Outcome.SUCCEEDED, queue_wait_ms=5.0, processing_ms=20.0, enqueued_at=enqueued))
    metrics.add(outcome(Outcome.SUCCEEDED, processing_ms=1.0, enqueued_at=enqueued, duplicate=True))
    metrics.flush()
    doc = document(emf(), "EndToEndLatency", JobType="reports.make", Priority="low")
    assert unit_of(doc, "EndToEndLatency") == "Milliseconds"
    [latency] = values(doc, "EndToEndLatency")  # the duplicate delivery is no second completion
    assert 90_000 <= latency < 100_000
    assert values(doc, "Succeeded") == [2.0]
    assert doc["service"] == "jobframework"


def test_first_attempt_failures_count_failed_first_executions_only(emf):
    metrics = BatchMetrics()
    metrics.add(outcome(Outcome.SUCCEEDED, processing_ms=1.0))  # first execution, succeeded
    metrics.add(outcome(Outcome.RETRIED, processing_ms=2.0, delay=2))  # first execution, failed
    metrics.add(outcome(Outcome.DEAD_LETTERED, processing_ms=2.0, reason=Reason.PERMANENT))  # failed
    metrics.add(outcome(Outcome.RETRIED, attempt=2, processing_ms=2.0, delay=4))  # a retry: not a first
    metrics.add(outcome(Outcome.DEAD_LETTERED, reason=Reason.INVALID_PAYLOAD))  # refused: never ran
    metrics.add(outcome(Outcome.RETRIED, reason="backlogged", delay=60))  # deferred: never ran
    metrics.add(outcome(Outcome.RELEASED))  # handed back unrun
    metrics.flush()
    doc = document(emf(), "FirstAttemptFailures", JobType="reports.make", Priority="low")
    assert values(doc, "FirstAttempts") == [3.0]
    assert values(doc, "FirstAttemptFailures") == [2.0]
    assert unit_of(doc, "FirstAttempts") == unit_of(doc, "FirstAttemptFailures") == "Count"
    assert values(doc, "DeadLettered") == [2.0]
    assert values(doc, "Retried") == [3.0]


def test_a_batch_without_failures_writes_first_attempts_and_no_failure_count(emf):
    metrics = BatchMetrics()
    for _ in range(3):
        metrics.add(outcome(Outcome.SUCCEEDED, processing_ms=1.0, enqueued_at=datetime.now(UTC)))
    metrics.flush()
    doc = document(emf(), "FirstAttempts", JobType="reports.make", Priority="low")
    assert values(doc, "FirstAttempts") == [3.0]
    assert "FirstAttemptFailures" not in doc
    assert len(values(doc, "EndToEndLatency")) == 3


def test_processing_time_includes_executions_that_were_dead_lettered(emf):
    metrics = BatchMetrics()
    metrics.add(outcome(Outcome.SUCCEEDED, processing_ms=10.0))
    metrics.add(outcome(Outcome.DEAD_LETTERED, processing_ms=30.0, reason=Reason.EXHAUSTED, attempt=3))
    metrics.flush()
    docs = emf()
    doc = document(docs, "ProcessingTime", JobType="reports.make", Priority="low")
    assert sorted(values(doc, "ProcessingTime")) == [10.0, 30.0]
    by_reason = document(docs, "DeadLettered", Reason="exhausted", Priority="low")
    assert values(by_reason, "DeadLettered") == [1.0]


def test_times_are_written_to_the_microsecond(emf):
    metrics = BatchMetrics()
    metrics.add(outcome(Outcome.SUCCEEDED, queue_wait_ms=12.3456789, processing_ms=0.0004999))
    metrics.flush()
    doc = document(emf(), "ProcessingTime", JobType="reports.make", Priority="low")
    assert values(doc, "QueueWait") == [12.346] and values(doc, "ProcessingTime") == [0.0]


def test_one_batch_writes_one_document_per_job_type_and_priority(emf):
    metrics = BatchMetrics()
    for job_type in ("a.one", "b.two"):
        for _ in range(4):
            metrics.add(RecordOutcome("m", Outcome.SUCCEEDED, job_type, "j", "high", 1, processing_ms=1.0))
    metrics.flush()
    docs = emf()
    assert sorted(d["JobType"] for d in docs) == ["a.one", "b.two"]
    assert [values(d, "FirstAttempts") for d in docs] == [[4.0], [4.0]]


def test_nothing_is_written_when_metrics_are_disabled(emf, monkeypatch):
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    metrics = BatchMetrics()
    metrics.add(outcome(Outcome.SUCCEEDED, processing_ms=1.0))
    metrics.flush()
    assert emf() == []
    assert metrics.pending() == 0  # the batch's counts are dropped, not carried into the next batch


def test_jf_metrics_disabled_turns_off_the_sagas_metrics_too(monkeypatch, capsys):
    """The testing plugin and `jf dev` set it: an ended saga printed its EMF line among a test's output."""
    from jobframework.saga.engine import emit_metric

    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    monkeypatch.setenv("JF_METRICS_DISABLED", "true")
    emit_metric("SagaCompensated", "orders.checkout")
    assert capsys.readouterr().out == ""
    monkeypatch.setenv("JF_METRICS_DISABLED", "false")
    emit_metric("SagaCompensated", "orders.checkout")
    assert '"SagaCompensated"' in capsys.readouterr().out


def test_the_namespace_is_the_deployments_also_for_a_worker_run_outside_the_construct(emf, monkeypatch):
    """The stack's alarms read JobFramework/<app>-<stage>; a self-hosted `jf worker` given only the
    topology parameter wrote JobFramework, which no alarm reads (missed-run alarms paged)."""
    metrics = BatchMetrics()
    for parameter, namespace in (
        ("/shop/prod/topology", "JobFramework/shop-prod"),  # as the construct's consumers get it
        ("", "JobFramework"),  # jf dev without a parameter, a bare consumer
        ("/not/a/topology/path", "JobFramework"),
    ):
        monkeypatch.setenv("JF_TOPOLOGY_PARAMETER", parameter)
        metrics.add(outcome(Outcome.SUCCEEDED, processing_ms=1.0))
        metrics.flush()
        assert {d["_aws"]["CloudWatchMetrics"][0]["Namespace"] for d in emf()} == {namespace}
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "Team/Own")  # given: it wins
    metrics.add(outcome(Outcome.SUCCEEDED, processing_ms=1.0))
    metrics.flush()
    assert {d["_aws"]["CloudWatchMetrics"][0]["Namespace"] for d in emf()} == {"Team/Own"}
