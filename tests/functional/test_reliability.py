"""Reliability (issue 12) against the embedded AWS: async jobs, BaseExceptions, overruns, failed writes,
attempts that count executions, odd exceptions and odd events. Faults come through botocore event hooks
on the real clients."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from jobframework import ConfigurationError, job
from jobframework.client import JobClient
from jobframework.consumer import Outcome, RecordOutcome, consumer
from jobframework.envelope import Envelope, message_attribute, record_attribute
from jobframework.jobs import JobRegistry
from jobframework.local.emulator import Emulator, pollers_for
from jobframework.telemetry import job_logger
from jobframework.testing import FakeLambdaContext, provision_fresh, receive_all, sqs_event, sqs_record

from . import jobs_reliability as jobs
from .conftest import Runtime

outcomes: list[RecordOutcome] = []


@pytest.fixture
def rel(jf_aws: Any) -> Runtime:
    jobs.effects.clear()
    jobs.attempts_seen.clear()
    jobs.loops.clear()
    jobs.started.clear()
    outcomes.clear()
    topology, config = provision_fresh(jf_aws.endpoint_url, jobs.registry)
    sqs = jf_aws.client("sqs")
    return Runtime(
        topology,
        config,
        sqs,
        JobClient(config, registry=jobs.registry, sqs_client=sqs),
        consumer(jobs.registry, config=config, sqs_client=sqs, listeners=[outcomes.append]),
    )


@contextmanager
def hooked(client: Any, event: str, hook: Any) -> Iterator[None]:
    client.meta.events.register(event, hook)
    try:
        yield
    finally:
        client.meta.events.unregister(event, hook)


def attrs(message: dict[str, Any]) -> dict[str, str | None]:
    return {name: message_attribute(message, name) for name in message.get("MessageAttributes", {})}


def drain(rt: Runtime, priority: str, rounds: int = 20, **kwargs: Any) -> None:
    for _ in range(rounds):
        records, _ = rt.consume(priority, **kwargs)
        if not records:
            return
    raise AssertionError(f"{priority} did not drain")


def dead(rt: Runtime, priority: str = "high") -> list[dict[str, Any]]:
    return list(receive_all(rt.sqs, rt.dlq(priority)))


def by_type(records: list[dict[str, Any]], response: dict[str, Any]) -> list[str]:
    types = {r["messageId"]: json.loads(r["body"])["type"] for r in records}
    return sorted(types[f["itemIdentifier"]] for f in response["batchItemFailures"])


# --- 1. async jobs --------------------------------------------------------------------------------------


def test_an_async_job_is_awaited_with_the_same_outcomes_retries_and_idempotency(rel):
    rel.client.enqueue("r.async", {"name": "a-ok"})
    rel.client.enqueue("r.async", {"name": "a-fails", "fail": True})
    records, response = rel.consume("high")
    assert by_type(records, response) == ["r.async"]  # the failing one is retried, the other succeeded
    assert jobs.effects["a-ok"] == 1
    ok_body = next(r["body"] for r in records if "a-ok" in r["body"])
    status = rel.client.status(json.loads(ok_body)["id"])
    assert status is not None and status.result == {"awaited": "a-ok"}
    drain(rel, "high")  # attempt 2 fails too: exhausted
    (letter,) = dead(rel)
    assert attrs(letter)["jf-reason"] == "exhausted" and attrs(letter)["jf-attempts"] == "2"
    assert ("a-fails", 2) in jobs.attempts_seen
    # Idempotency holds for async jobs: a second delivery of the succeeded job is skipped.
    rel.sqs.send_message(QueueUrl=rel.url("high"), MessageBody=ok_body)
    drain(rel, "high")
    assert jobs.effects["a-ok"] == 1
    assert outcomes[-1].outcome == Outcome.SUCCEEDED and outcomes[-1].duplicate
    assert len(set(jobs.loops)) == 1  # one event loop per process, reused across invocations


def test_generators_classes_and_other_non_runnables_are_refused_at_decoration():
    reg = JobRegistry()
    from pydantic import BaseModel

    class P(BaseModel):
        n: int

    def gen(p: P):  # type: ignore[no-untyped-def]
        yield p

    async def agen(p: P):  # type: ignore[no-untyped-def]
        yield p

    for fn in (gen, agen):
        with pytest.raises(ConfigurationError, match=r"generator function.*return the result"):
            job("x.gen", registry=reg)(fn)
    with pytest.raises(ConfigurationError, match="must decorate a function"):
        job("x.cls", registry=reg)(P)
    with pytest.raises(ConfigurationError, match="must decorate a function"):
        job("x.none", registry=reg)(42)  # type: ignore[arg-type]
    assert len(reg) == 0


# --- 3. BaseException is the job's failure ----------------------------------------------------------------


def test_a_jobs_base_exception_fails_only_that_job_and_never_the_batch(rel):
    for job_type, name in (
        ("r.plain", "neighbour"),
        ("r.interrupt", "ki"),
        ("r.genexit", "ge"),
        ("r.cancelled", "ce"),
        ("r.permanent", "refused"),
    ):
        rel.client.enqueue(job_type, {"name": name})
    records, response = rel.consume("high")
    assert len(records) == 5
    assert by_type(records, response) == ["r.cancelled", "r.genexit", "r.interrupt"]
    assert jobs.effects["neighbour"] == 1  # not run twice by a failed batch
    (letter,) = dead(rel)  # one copy, not two
    assert attrs(letter)["jf-reason"] == "permanent"
    retried = {o.job_type: o.error for o in outcomes if o.outcome == Outcome.RETRIED}
    assert "KeyboardInterrupt" in (retried["r.interrupt"] or "")
    assert "CancelledError" in (retried["r.cancelled"] or "")
    drain(rel, "high")  # their second attempts fail too: exhausted, each dead-lettered once
    reasons = sorted(str(attrs(m)["jf-reason"]) for m in dead(rel))
    assert reasons == ["exhausted", "exhausted", "exhausted"]
    assert jobs.effects["neighbour"] == 1


def test_a_worker_poller_survives_jobs_that_raise_base_exceptions(rel):
    pollers = [p for p in pollers_for(rel.config, rel.topology) if p.name == "high"]
    emulator = Emulator(pollers, rel.handler, rel.sqs, workers=2, idle_seconds=0.02, max_idle_seconds=0.1)
    for n in range(4):
        rel.client.enqueue("r.interrupt", {"name": f"ki-{n}"})
    emulator.start()
    try:
        deadline = time.monotonic() + 20
        while sum(jobs.effects[f"ki-{n}"] for n in range(4)) < 4:
            assert time.monotonic() < deadline, "the KeyboardInterrupt jobs never all ran"
            time.sleep(0.05)
        assert sum(t.is_alive() for t in emulator._threads) == 2
        rel.client.enqueue("r.plain", {"name": "after"})
        while not jobs.effects["after"]:
            assert time.monotonic() < deadline, "a later job never ran: a poller died"
            time.sleep(0.05)
    finally:
        assert emulator.stop(drain_timeout=10)
    assert emulator.stats.invocation_errors == 0


# --- 4. a running job keeps its key and its message --------------------------------------------------------


def test_an_overrunning_job_keeps_its_key_and_its_message_and_the_overrun_is_logged(rel, caplog):
    # The queue hides a received message for 2 s only (injected): without a heartbeat it would
    # reappear while the job runs, and the in-progress record would lapse at 1 s + 1 s.
    def short_visibility(params: dict[str, Any], **_: Any) -> None:
        params["VisibilityTimeout"] = 2

    sent = rel.client.enqueue("r.long", {"name": "overrun", "seconds": 4.5})
    first: dict[str, Any] = {}
    with hooked(rel.sqs, "provide-client-params.sqs.ReceiveMessage", short_visibility):
        worker = threading.Thread(target=lambda: first.update(response=rel.consume("high")[1]))
        worker.start()
        assert jobs.started.wait(10)
        time.sleep(3.0)  # past the 1 s timeout, the first key expiry (2 s) and the visibility (2 s)
        assert receive_all(rel.sqs, rel.url("high")) == []  # the message is still held
        # A duplicate delivery of the same job arrives now: it waits, it does not run.
        rel.sqs.send_message(
            QueueUrl=rel.url("high"),
            MessageBody=Envelope.new("r.long", {"name": "overrun", "seconds": 0}, key=sent.key).to_body(),
        )
        (_dup,), response = rel.consume("high")
        worker.join(15)
    assert response == {"batchItemFailures": []}  # handed back as a copy
    assert [o.outcome for o in outcomes][:1] == [Outcome.RETRIED]
    assert jobs.effects["overrun"] == 1
    assert first["response"] == {"batchItemFailures": []}
    assert any("past its timeout of 1s" in r.getMessage() for r in caplog.records)
    time.sleep(1.5)
    drain(rel, "high")  # the duplicate's copy comes back and is skipped as done
    assert jobs.effects["overrun"] == 1


# --- 5. and 10. exceptions whose text cannot be had ---------------------------------------------------


def test_a_permanent_error_whose_str_raises_is_dead_lettered_by_the_framework(rel):
    rel.client.enqueue("r.unprintable", {"name": "perm", "fail": True})
    rel.client.enqueue("r.unprintable", {"name": "retry"})
    _records, response = rel.consume("high")
    assert len(response["batchItemFailures"]) == 1  # the plain one is retried with a visibility change
    (letter,) = dead(rel)
    assert attrs(letter)["jf-reason"] == "permanent"
    assert "UnprintablePermanent: <str() of UnprintablePermanent raised ValueError>" in str(
        attrs(letter)["jf-error"]
    )
    drain(rel, "high")
    assert sorted(str(attrs(m)["jf-reason"]) for m in dead(rel)) == ["exhausted"]


def test_in_a_batched_job_a_bad_exception_fails_only_its_item_and_a_settled_item_stays_settled(rel):
    names = ["fine-1", "unprintable-1", "refused-1", "interrupted-1", "fine-2"]
    rel.client.enqueue_many([jobs.batched.request({"name": n}) for n in names])
    records, response = rel.consume("low")
    failed = sorted(
        json.loads(r["body"])["payload"]["name"]
        for r in records
        if r["messageId"] in {f["itemIdentifier"] for f in response["batchItemFailures"]}
    )
    assert failed == ["interrupted-1", "unprintable-1"]
    (letter,) = dead(rel, "low")  # one dead letter, not two
    assert json.loads(letter["Body"])["payload"]["name"] == "refused-1"
    assert all(jobs.effects[n] == 1 for n in names)


def test_in_a_batched_job_a_throttled_item_is_handed_back_alone_and_runs_again(rel):
    sent = rel.client.enqueue_many([jobs.batched.request({"name": n}) for n in ("fine-3", "throttled-1")])
    records, response = rel.consume("low")
    assert len(records) == 2 and response == {"batchItemFailures": []}
    throttled = rel.client.status(sent[1].id)
    assert throttled is not None and (throttled.status.value, throttled.attempts) == ("retrying", 0)
    assert dead(rel, "low") == []
    drain(rel, "low", wait_seconds=2)  # (its copy comes back after its second)
    assert (jobs.effects["fine-3"], jobs.effects["throttled-1"]) == (1, 2)
    done = rel.client.status(sent[1].id)
    assert done is not None and (done.status.value, done.attempts) == ("succeeded", 1)


# --- 6. and 11. writes after the job ------------------------------------------------------------------------


def test_a_completion_write_that_fails_once_is_retried_and_the_job_does_not_run_again(rel, jf_aws):
    rel.handler._features()
    assert rel.handler.idempotency is not None
    dynamodb = rel.handler.idempotency.client
    failures: list[int] = []

    def fail_first_completion(params: dict[str, Any], **_: Any) -> None:
        if params.get("TableName") == rel.config.idempotency_table and not failures:
            failures.append(1)
            raise ConnectionResetError("connection reset while recording the completion")

    rel.client.enqueue("r.flaky", {"name": "written"})
    with hooked(dynamodb, "provide-client-params.dynamodb.UpdateItem", fail_first_completion):
        records, response = rel.consume("high")
    assert failures == [1] and response == {"batchItemFailures": []}
    items = jf_aws.client("dynamodb").scan(TableName=rel.config.idempotency_table)["Items"]
    assert [i["status"]["S"] for i in items] == ["COMPLETED"]
    rel.sqs.send_message(QueueUrl=rel.url("high"), MessageBody=records[0]["body"])
    drain(rel, "high")
    assert jobs.effects["written"] == 1


def test_a_completion_write_that_keeps_failing_acknowledges_the_job_that_ran(rel, caplog):
    rel.handler._features()
    assert rel.handler.idempotency is not None

    def always(params: dict[str, Any], **_: Any) -> None:
        if params.get("TableName") == rel.config.idempotency_table:
            raise ConnectionResetError("the idempotency table is unreachable")

    rel.client.enqueue("r.flaky", {"name": "unrecorded"})
    with hooked(rel.handler.idempotency.client, "provide-client-params.dynamodb.UpdateItem", always):
        _, response = rel.consume("high")
    assert response == {"batchItemFailures": []}
    assert jobs.effects["unrecorded"] == 1 and [o.outcome for o in outcomes] == [Outcome.SUCCEEDED]
    assert any("recording its completion failed 5 times" in r.getMessage() for r in caplog.records)


def test_a_permanent_error_is_dead_lettered_even_when_deleting_its_in_progress_record_fails(rel):
    rel.handler._features()
    assert rel.handler.idempotency is not None

    def refuse(params: dict[str, Any], **_: Any) -> None:
        raise ConnectionResetError("cannot delete now")

    rel.client.enqueue("r.permanent", {"name": "kept-permanent"})
    with hooked(rel.handler.idempotency.client, "provide-client-params.dynamodb.DeleteItem", refuse):
        _, response = rel.consume("high")
    assert response == {"batchItemFailures": []}
    (letter,) = dead(rel)
    assert attrs(letter)["jf-reason"] == "permanent"
    assert jobs.effects["kept-permanent"] == 1


# --- 7. and 12. attempts count executions -------------------------------------------------------------------


def test_releases_do_not_use_up_attempts_and_attempts_report_executions(rel):
    rel.client.enqueue("r.flaky", {"name": "released", "fail": True})
    for _ in range(3):  # three releases for lack of time (5 s job, 3 s left)
        records, response = rel.consume("high", context=FakeLambdaContext(3))
        assert len(records) == 1 and response == {"batchItemFailures": []}
    assert jobs.attempts_seen == []
    records, response = rel.consume("high")  # the first execution: fails, retried (not exhausted)
    assert len(response["batchItemFailures"]) == 1 and dead(rel) == []
    drain(rel, "high")
    assert jobs.attempts_seen == [("released", 1), ("released", 2)]
    (letter,) = dead(rel)
    assert attrs(letter)["jf-reason"] == "exhausted" and attrs(letter)["jf-attempts"] == "2"
    assert "jf-executions" not in attrs(letter)  # a redrive starts the attempts again
    # The queue's safety net cannot move a job first: receives of one copy never pass max attempts.
    high = rel.topology.queue("high")
    assert high.max_receive_count > max(j.retry.max_attempts for j in jobs.registry if j.lane == "high")


def test_a_record_its_invocations_never_have_the_time_for_is_released_ever_later(rel):
    """A trial's export, sent by jf dev to a lane whose consumer's invocations were shorter than its
    timeout, was released at once, 70 times a second, for ever."""
    rel.client.enqueue("r.flaky", {"name": "misrouted"})
    for released in range(1, 5):  # (a 5 s job, 3 s invocations): back at once three times
        records, _ = rel.consume("high", context=FakeLambdaContext(3))
        assert len(records) == 1, f"release {released}"
        counted = record_attribute(records[0], "jf-short-releases")
        assert counted == (str(released - 1) if released > 1 else None)
    assert rel.consume("high", context=FakeLambdaContext(3))[0] == []  # the fourth: back in 2 s
    assert jobs.attempts_seen == []


def test_a_record_without_a_receive_count_is_still_exhausted_after_max_attempts(rel):
    arn = rel.sqs.get_queue_attributes(QueueUrl=rel.url("high"), AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    record = sqs_record(Envelope.new("r.flaky", {"name": "uncounted", "fail": True}), queue_arn=arn)
    del record["attributes"]["ApproximateReceiveCount"]
    assert rel.handler(sqs_event(record), FakeLambdaContext()) == {
        "batchItemFailures": []
    }  # retried as a copy
    drain(rel, "high")
    assert jobs.attempts_seen == [("uncounted", 1), ("uncounted", 2)]
    (letter,) = dead(rel)
    assert attrs(letter)["jf-reason"] == "exhausted" and attrs(letter)["jf-attempts"] == "2"


# --- 13. and issue 11: odd events, and a log line for every dead letter ------------------------------------


def test_odd_events_and_records_are_each_their_own_outcome(rel):
    assert rel.handler({"Records": []}, FakeLambdaContext()) == {"batchItemFailures": []}
    arn = rel.sqs.get_queue_attributes(QueueUrl=rel.url("high"), AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    healthy = sqs_record(Envelope.new("r.plain", {"name": "healthy"}), queue_arn=arn)
    dict_body = {**sqs_record("x", queue_arn=arn), "body": {"not": "text"}}
    event = {"Records": [42, None, healthy, dict_body, {"body": "no id"}, "a string"]}
    assert rel.handler(event, FakeLambdaContext()) == {"batchItemFailures": []}
    assert jobs.effects["healthy"] == 1
    (letter,) = dead(rel)
    assert attrs(letter)["jf-reason"] == "malformed" and "dict, not text" in str(attrs(letter)["jf-error"])


class _Structured(logging.Handler):
    """The consumer's log lines as the Powertools formatter renders them (with its keys)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(json.loads(job_logger().registered_formatter.format(record)))


def test_malformed_and_unknown_type_dead_letters_are_logged_with_the_keys_of_other_dead_letters(rel):
    handler = _Structured()
    logging.getLogger("jobframework.consumer").addHandler(handler)
    try:
        rel.sqs.send_message(QueueUrl=rel.url("high"), MessageBody="{not json")
        rel.sqs.send_message(QueueUrl=rel.url("high"), MessageBody=Envelope.new("r.nobody", {}).to_body())
        rel.client.enqueue("r.permanent", {"name": "logged"})
        drain(rel, "high")
    finally:
        logging.getLogger("jobframework.consumer").removeHandler(handler)
    lines = [line for line in handler.lines if "dead-lettered" in line["message"]]
    by_reason = {line["message"].split("(")[2].split(")")[0]: line for line in lines}
    assert set(by_reason) == {"malformed", "unknown-type", "permanent"}
    assert by_reason["malformed"]["level"] == by_reason["unknown-type"]["level"] == "WARNING"
    keys = {"job_id", "job_type", "job_key", "attempt"}
    assert keys <= set(by_reason["permanent"]) and keys <= set(by_reason["unknown-type"])
    assert by_reason["unknown-type"]["job_type"] == "r.nobody"
    assert "attempt" in by_reason["malformed"]
