"""Effectively once, against the embedded AWS: idempotent execution, enqueue dedup, the retry budget,
job status, long delays, payload versions, signing and large payloads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from jobframework.attempts import ATTR_NEWER
from jobframework.budget import RetryBudget
from jobframework.client import JobClient
from jobframework.consumer import Outcome, RecordOutcome, consumer
from jobframework.delays import due_time, fire_due, schedule_name
from jobframework.envelope import Envelope, message_attribute, string_attribute
from jobframework.errors import ConfigurationError, EnqueueError
from jobframework.newer_payload import NEWER_WINDOW_SECONDS
from jobframework.scheduling import scheduled_envelope
from jobframework.state import JobState
from jobframework.testing import consume_once, provision_fresh, receive_all
from jobframework.tracing import continue_trace, new_trace

from . import jobs_effectively_once as jobs
from .conftest import Runtime


@pytest.fixture
def eo(jf_aws: Any) -> Runtime:
    jobs.effects.clear()
    jobs.observed.clear()
    jobs.while_running.clear()
    jobs.hang_next.clear()
    topology, config = provision_fresh(jf_aws.endpoint_url, jobs.registry)
    sqs = jf_aws.client("sqs")
    return Runtime(
        topology,
        config,
        sqs,
        JobClient(config, registry=jobs.registry, sqs_client=sqs),
        consumer(jobs.registry, config=config, sqs_client=sqs, listeners=[outcomes.append]),
    )


outcomes: list[RecordOutcome] = []


@pytest.fixture(autouse=True)
def _fresh_outcomes() -> None:
    outcomes.clear()


def drain(rt: Runtime, priority: str, *, rounds: int = 50, **kwargs: Any) -> int:
    """Consume until the queue gives nothing; returns how many records were handled."""
    handled = 0
    for _ in range(rounds):
        records, _ = rt.consume(priority, **kwargs)
        if not records:
            return handled
        handled += len(records)
    raise AssertionError(f"the {priority} queue did not drain in {rounds} polls")


def redeliver(rt: Runtime, priority: str, body: str, attributes: dict[str, Any] | None = None) -> None:
    """Put a copy of a message back on the queue (SQS's at-least-once delivery, or a redrive)."""
    rt.sqs.send_message(QueueUrl=rt.url(priority), MessageBody=body, MessageAttributes=attributes or {})


def dead_letters(rt: Runtime, priority: str) -> list[dict[str, Any]]:
    return list(receive_all(rt.sqs, rt.dlq(priority)))


def of(kind: str) -> list[RecordOutcome]:
    return [o for o in outcomes if o.outcome == kind]


# --- idempotent execution ---------------------------------------------------------------------------------


def test_the_same_job_delivered_twice_runs_once_and_the_duplicate_counts_as_succeeded(eo):
    sent = eo.client.enqueue("eo.effect", {"name": "twice"})
    (record,), _ = eo.consume("high")
    redeliver(eo, "high", record["body"])  # same id and key: a second delivery of the same job
    (again,), response = eo.consume("high")
    assert response == {"batchItemFailures": []}
    assert json.loads(again["body"])["id"] == sent.id
    assert jobs.effects["twice"] == 1
    assert [(o.outcome, o.duplicate) for o in outcomes] == [
        (Outcome.SUCCEEDED, False),
        (Outcome.SUCCEEDED, True),
    ]
    assert receive_all(eo.sqs, eo.url("high")) == [] and dead_letters(eo, "high") == []


def test_a_job_that_fails_then_succeeds_applies_its_effect_once(eo):
    eo.client.enqueue("eo.effect", {"name": "flaky", "fail_times": 1}, key="flaky:1")
    (first,), response = eo.consume("high")
    assert response["batchItemFailures"] == [{"itemIdentifier": first["messageId"]}]
    assert jobs.effects["flaky"] == 0
    # The failed attempt left no idempotency record: the retry runs (it is not skipped as done).
    assert drain(eo, "high") == 1
    assert jobs.effects["flaky"] == 1
    redeliver(eo, "high", first["body"])
    drain(eo, "high")
    assert jobs.effects["flaky"] == 1
    assert [(o.outcome, o.duplicate) for o in outcomes] == [
        (Outcome.RETRIED, False),
        (Outcome.SUCCEEDED, False),
        (Outcome.SUCCEEDED, True),
    ]


KILLED_INVOCATION_SECONDS = 5.0
"""The killed invocation's Lambda time: long enough for a loaded machine to start the job in it (with
2.5 s, a start-up of over a second left too little time and the job was released unstarted)."""


def test_a_killed_invocations_in_progress_record_expires_and_the_job_runs_again(eo, jf_aws):
    env = Envelope.new("eo.killable", {"name": "killed", "fail_times": 0})
    redeliver(eo, "high", env.to_body())
    # A real invocation in its own process, killed (SIGKILL, as Lambda does) while its job runs.
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.functional.killed_consumer", str(KILLED_INVOCATION_SECONDS)],
        env={**os.environ, **eo.config.to_env()},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "hanging"
        started = time.monotonic()
        items = jf_aws.client("dynamodb").scan(TableName=eo.config.idempotency_table)["Items"]
        assert [i["status"]["S"] for i in items] == ["INPROGRESS"]
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert outcomes == []
    # While its invocation could still be running, another delivery is handed back, not run.
    redeliver(eo, "high", env.to_body())
    (_held,), response = eo.consume("high")
    assert response["batchItemFailures"] == []  # handed back as a fresh copy: not an attempt
    assert jobs.effects["killed"] == 0
    (retried,) = of(Outcome.RETRIED)
    assert retried.error and "another delivery" in retried.error
    # It comes back when the record expires, not after a whole job timeout.
    assert retried.delay is not None and retried.delay <= KILLED_INVOCATION_SECONDS + 1
    # The record expired by the killed invocation's hard end; then the job runs.
    time.sleep(max(0.0, KILLED_INVOCATION_SECONDS + 0.1 - (time.monotonic() - started)))
    deadline = time.monotonic() + 8
    while not jobs.effects["killed"]:
        eo.consume("high")
        assert time.monotonic() < deadline, "the job never ran again"
        time.sleep(0.2)
    assert jobs.effects["killed"] == 1
    assert of(Outcome.SUCCEEDED)[-1].duplicate is False


# --- enqueue dedup ------------------------------------------------------------------------------------------


def test_fifty_concurrent_enqueues_of_one_key_make_one_job(eo, jf_aws):
    session = jf_aws.session()
    clients = []
    for _ in range(50):  # each producer its own client and connections
        own = JobClient(eo.config, registry=jobs.registry, session=session)
        own.sqs  # noqa: B018 - made now, not inside the race
        own._client("dynamodb")
        clients.append(own)
    start = threading.Barrier(50)

    def enqueue(own: JobClient) -> Any:
        start.wait()
        return own.enqueue("eo.dedup", {"name": "o-50"})

    with ThreadPoolExecutor(max_workers=50) as pool:
        results = list(pool.map(enqueue, clients))
    ids = {r.id for r in results}
    assert len(ids) == 1
    assert sorted(r.duplicate for r in results) == [False] + [True] * 49
    (message,) = receive_all(eo.sqs, eo.url("high"))
    assert json.loads(message["Body"])["id"] == ids.pop()


def test_a_failed_send_after_the_marker_does_not_block_a_retry_of_the_enqueue(eo):
    failures = []

    def refuse_once(**_: Any) -> None:
        if not failures:
            failures.append(1)
            raise ConnectionResetError("connection reset by peer")

    eo.sqs.meta.events.register("before-call.sqs.SendMessage", refuse_once)
    try:
        with pytest.raises(EnqueueError):
            eo.client.enqueue("eo.dedup", {"name": "o-1"})
        retried = eo.client.enqueue("eo.dedup", {"name": "o-1"})
        again = eo.client.enqueue("eo.dedup", {"name": "o-1"})
    finally:
        eo.sqs.meta.events.unregister("before-call.sqs.SendMessage", refuse_once)
    assert failures == [1]
    assert retried.ok and not retried.duplicate
    assert again.duplicate and again.id == retried.id
    (message,) = receive_all(eo.sqs, eo.url("high"))
    assert json.loads(message["Body"])["id"] == retried.id


def test_a_duplicate_never_gets_the_id_of_a_first_enqueue_that_is_still_unsent(eo):
    state = eo.client.state
    assert state is not None
    # Another producer claimed the key and died before its send (its marker stays pending, 1 s lease).
    assert state.dedup.claim("order:o-ghost", "ghost-job", window=3600, lease=1.0) is None
    result = eo.client.enqueue("eo.dedup", {"name": "o-ghost"})
    assert result.id != "ghost-job"  # it waited out the lease and sent the job itself
    assert not result.duplicate
    (message,) = receive_all(eo.sqs, eo.url("high"))
    assert json.loads(message["Body"])["id"] == result.id


# --- the retry budget ---------------------------------------------------------------------------------------


def test_the_budget_dead_letters_during_an_outage_and_keeps_retries_within_the_fraction(eo):
    eo.handler._features()
    budget = RetryBudget(fraction=0.2, floor=2)
    eo.handler.retry_budget = budget
    jobs_sent = 20
    eo.client.enqueue_many([jobs.outage.request({"name": f"o{n}"}) for n in range(jobs_sent)])
    drain(eo, "default")
    first_attempts = sum(1 for o in outcomes if o.attempt == 1)
    retries = len(of(Outcome.RETRIED))
    dead = dead_letters(eo, "default")
    reasons = [message_attribute(m, "jf-reason") for m in dead]
    assert first_attempts == jobs_sent
    assert retries <= budget.fraction * first_attempts + budget.floor
    assert retries >= budget.floor  # it did allow some
    assert len(dead) == jobs_sent  # nothing lost
    assert reasons.count("budget") >= jobs_sent - retries
    spent = next(m for m in dead if message_attribute(m, "jf-reason") == "budget")
    assert "the retry budget of " in message_attribute(spent, "jf-error")  # what to do, in the letter
    assert "redrive once the downstream is back" in message_attribute(spent, "jf-error")
    assert sum(jobs.effects.values()) == first_attempts + retries  # every attempt hit the downstream once


# --- job status ---------------------------------------------------------------------------------------------


def test_status_moves_from_queued_through_running_and_retrying_to_succeeded(eo):
    jobs.while_running.append(lambda ctx: eo.client.status(ctx.job_id))
    sent = eo.client.enqueue("eo.effect", {"name": "st", "fail_times": 1})
    queued = eo.client.status(sent.id)
    assert queued is not None
    assert (queued.status, queued.attempts, queued.type) == (JobState.QUEUED, 0, "eo.effect")
    assert queued.enqueued_at and queued.key == sent.key
    assert queued.trace_id is not None and len(queued.trace_id) == 32  # the enqueue's W3C trace

    before = datetime.now(UTC)
    eo.consume("high")
    retrying = eo.client.status(sent.id)
    assert retrying is not None
    assert (retrying.status, retrying.attempts) == (JobState.RETRYING, 1)
    assert retrying.error == "ConnectionError: st: downstream unavailable"
    # when the backoff ends (an operator's "when does it run again?": jf status had no answer)
    assert retrying.next_attempt_at is not None
    assert (
        before < datetime.fromisoformat(retrying.next_attempt_at) <= datetime.now(UTC) + timedelta(seconds=5)
    )

    drain(eo, "high")
    done = eo.client.status(sent.id)
    assert done is not None
    assert (done.status, done.attempts, done.error, done.next_attempt_at) == (
        JobState.SUCCEEDED,
        2,
        None,
        None,
    )
    assert done.result == {"applied": "st"}
    assert done.started_at and done.finished_at and done.started_at <= done.finished_at
    assert [s.status for s in jobs.observed] == [JobState.RUNNING, JobState.RUNNING]
    assert [s.attempts for s in jobs.observed] == [1, 2]
    assert {s.trace_id for s in jobs.observed} == {queued.trace_id} == {done.trace_id}  # kept throughout


def test_status_of_a_dead_job_has_its_reason_and_error_and_an_unknown_id_is_none(eo):
    sent = eo.client.enqueue("eo.blob", {"name": "reject-me", "data": "x"})
    drain(eo, "high")
    dead = eo.client.status(sent.id)
    assert dead is not None
    assert (dead.status, dead.attempts, dead.reason) == (JobState.DEAD, 1, "permanent")
    assert dead.error == "PermanentError: rejected"
    assert eo.client.status("no-such-job") is None


def test_a_fast_consumer_is_not_overwritten_by_the_queued_status(eo):
    """The consumer may finish a job before the client records it as queued: queued must not win."""
    sent = eo.client.enqueue("eo.effect", {"name": "race"})
    drain(eo, "high")
    store = eo.client.state
    assert store is not None
    store.jobs.set_status(sent.id, JobState.QUEUED, job_type="eo.effect", attempts=0)  # the client, late
    status = eo.client.status(sent.id)
    assert status is not None and status.status is JobState.SUCCEEDED


# --- long delays --------------------------------------------------------------------------------------------


def test_a_two_hour_delay_is_a_one_time_schedule_that_fire_due_sends_and_deletes(eo, jf_aws):
    scheduler = jf_aws.client("scheduler")
    sent = eo.client.enqueue("eo.effect", {"name": "later"}, delay=timedelta(hours=2))
    assert receive_all(eo.sqs, eo.url("high")) == []
    schedule = scheduler.get_schedule(Name=schedule_name(sent.id), GroupName="default")
    due = due_time(schedule["ScheduleExpression"])
    assert due is not None
    assert abs((due - (datetime.now(UTC) + timedelta(hours=2))).total_seconds()) < 60
    assert schedule["ActionAfterCompletion"] == "DELETE"
    assert schedule["Target"]["Arn"].endswith(":" + eo.url("high").rsplit("/", 1)[-1])
    env = Envelope.model_validate_json(schedule["Target"]["Input"])
    assert (env.id, env.type, env.payload["name"]) == (sent.id, "eo.effect", "later")
    status = eo.client.status(sent.id)
    assert status is not None and status.status is JobState.SCHEDULED

    assert fire_due(scheduler, eo.sqs, now=datetime.now(UTC) + timedelta(hours=1)) == 0
    assert fire_due(scheduler, eo.sqs, now=datetime.now(UTC) + timedelta(hours=2, minutes=1)) == 1
    with pytest.raises(scheduler.exceptions.ResourceNotFoundException):
        scheduler.get_schedule(Name=schedule_name(sent.id), GroupName="default")
    drain(eo, "high")
    assert jobs.effects["later"] == 1


def test_a_datetime_delay_runs_the_job_at_that_time_and_a_past_one_now(eo, jf_aws):
    """Celery's eta: a trial's enqueue(..., delay=tomorrow) was refused (seconds or a timedelta)."""
    scheduler = jf_aws.client("scheduler")
    at = datetime.now(UTC) + timedelta(hours=3)
    sent = eo.client.enqueue("eo.effect", {"name": "at-three"}, delay=at)
    due = due_time(
        scheduler.get_schedule(Name=schedule_name(sent.id), GroupName="default")["ScheduleExpression"]
    )
    assert due is not None and abs((due - at).total_seconds()) < 60
    late = eo.client.enqueue("eo.effect", {"name": "was-due"}, delay=datetime.now(UTC) - timedelta(minutes=5))
    (message,) = receive_all(eo.sqs, eo.url("high"))
    assert json.loads(message["Body"])["id"] == late.id  # due already: sent now, with no delay
    scheduler.delete_schedule(Name=schedule_name(sent.id), GroupName="default")  # (others count them)


def test_fire_due_takes_an_aware_datetime_and_says_so(eo, jf_aws):
    with pytest.raises(TypeError, match=r"now must be an aware datetime, e.g. datetime.now\(UTC\)"):
        fire_due(jf_aws.client("scheduler"), eo.sqs, now=time.time() + 3600)  # type: ignore[arg-type]


def test_a_job_scheduled_past_15_minutes_runs_in_its_producers_trace(eo, jf_aws):
    """EventBridge Scheduler sends the body alone (no traceparent attribute): the trace travels in the
    envelope, so the job's run and its status keep the producer's trace id."""
    parent = new_trace()
    with continue_trace(parent):
        sent = eo.client.enqueue("eo.effect", {"name": "traced"}, delay=timedelta(hours=2))
    before = eo.client.status(sent.id)
    assert before is not None and before.trace_id == parent.trace_id
    heard: list[RecordOutcome] = []
    handler = consumer(jobs.registry, config=eo.config, sqs_client=eo.sqs, listeners=[heard.append])
    scheduler = jf_aws.client("scheduler")
    schedule = scheduler.get_schedule(Name=schedule_name(sent.id), GroupName="default")
    assert Envelope.model_validate_json(schedule["Target"]["Input"]).traceparent == parent.traceparent
    due = datetime.now(UTC) + timedelta(hours=2, minutes=1)
    assert fire_due(scheduler, eo.sqs, now=due) == 1
    records, _ = consume_once(handler, eo.sqs, eo.url("high"))
    assert len(records) == 1 and "traceparent" not in records[0]["messageAttributes"]  # as it comes
    assert [o.outcome for o in heard] == ["succeeded"]
    after = eo.client.status(sent.id)
    assert after is not None and after.status is JobState.SUCCEEDED and after.trace_id == parent.trace_id


def test_a_job_scheduled_a_month_ahead_keeps_its_status_and_its_cancel_until_after_its_run(eo, jf_aws):
    """A status lasts 7 days; one of a job due in 30 days, and the marker of its cancel, last until 7
    days after its run time. The cancel deletes its one-time schedule (it was counted as scheduled and
    fired, to be acknowledged unrun); the marker would still refuse a firing that came anyway."""
    scheduler, dynamodb = jf_aws.client("scheduler"), jf_aws.client("dynamodb")
    sent = eo.client.enqueue("eo.effect", {"name": "next-month"}, delay=timedelta(days=30))
    kept = time.time() + timedelta(days=37).total_seconds()
    scheduled = eo.client.status(sent.id)
    assert scheduled is not None and scheduled.status is JobState.SCHEDULED
    assert scheduled.expires_at is not None and abs(scheduled.expires_at - kept) < 60

    assert eo.client.cancel(sent.id).outcome.value == "cancelled"
    cancelled = eo.client.status(sent.id)
    assert cancelled is not None and cancelled.status is JobState.CANCELLED
    assert cancelled.expires_at is not None and abs(cancelled.expires_at - kept) < 60
    marker = dynamodb.get_item(
        TableName=eo.config.state_table, Key={"pk": {"S": f"job#{sent.id}"}, "sk": {"S": "flow"}}
    )["Item"]
    assert "cancelled_at" in marker and abs(int(marker["expires_at"]["N"]) - kept) < 60

    with pytest.raises(scheduler.exceptions.ResourceNotFoundException):  # deleted by the cancel
        scheduler.get_schedule(Name=schedule_name(sent.id), GroupName="default")
    fire_due(scheduler, eo.sqs, now=datetime.now(UTC) + timedelta(days=30, minutes=1))
    drain(eo, "high")
    assert jobs.effects["next-month"] == 0
    after = eo.client.status(sent.id)
    assert after is not None and after.status is JobState.CANCELLED


@pytest.mark.parametrize(
    ("delay", "message"),
    [
        (-1, r"delay must be >= 0"),
        (timedelta(days=366), r"over the one-year limit"),
        ("soon", "seconds"),
        (
            datetime(2030, 1, 1, 9),
            r"delay as a time to run at needs its time zone \(datetime\(\.\.\., tzinfo=UTC\)\)",
        ),
    ],
)
def test_bad_delays_are_clear_errors_and_nothing_is_sent(eo, jf_aws, delay, message):
    scheduler = jf_aws.client("scheduler")
    before = scheduler.list_schedules(NamePrefix="jf-delay-")["Schedules"]  # (other tests' may remain)
    with pytest.raises(ConfigurationError, match=message):
        eo.client.enqueue("eo.effect", {"name": "bad"}, delay=delay)
    assert receive_all(eo.sqs, eo.url("high")) == []
    assert scheduler.list_schedules(NamePrefix="jf-delay-")["Schedules"] == before


# --- payload versions ---------------------------------------------------------------------------------------


def test_an_older_payload_is_upgraded_and_a_newer_one_is_dead_lettered_unrun(eo):
    """The newer one has been handed back for a consumer that reads it for longer than the window
    (test_newer_payloads.py: before that, it is handed back)."""
    v1 = Envelope.new("eo.greet", {"name": "Ada Lovelace"}, payload_version=1)
    v3 = Envelope.new("eo.greet", {"first": "Grace", "last": "Hopper", "title": "RADM"}, payload_version=3)
    long_ago = string_attribute(f"{time.time() - NEWER_WINDOW_SECONDS - 60:.0f}")
    for env in (v1, v3):
        attributes = {"jf-type": string_attribute(env.type)}
        redeliver(eo, "high", env.to_body(), attributes | ({ATTR_NEWER: long_ago} if env is v3 else {}))
    drain(eo, "high")
    assert dict(jobs.effects) == {"Ada/Lovelace": 1}
    (dead,) = dead_letters(eo, "high")
    assert json.loads(dead["Body"])["id"] == v3.id
    assert message_attribute(dead, "jf-reason") == "version"
    assert "newer than this consumer's 2" in (message_attribute(dead, "jf-error") or "")
    assert "for a consumer that reads it; none came" in (message_attribute(dead, "jf-error") or "")


def test_the_client_sends_the_jobs_current_version(eo):
    eo.client.enqueue("eo.greet", {"first": "Alan", "last": "Turing"})
    (message,) = receive_all(eo.sqs, eo.url("high"))
    assert json.loads(message["Body"])["payload_version"] == 2


# --- signing ------------------------------------------------------------------------------------------------


@pytest.fixture
def signed(eo, jf_aws) -> tuple[Runtime, JobClient]:
    """The runtime with signing on (keys in an SSM SecureString), and an unsigned client beside it."""
    name = f"/jf/test/{uuid.uuid4().hex[:8]}/signing-keys"
    keys = {"current": "k2", "keys": {"k1": "old-secret-0123456789", "k2": "new-secret-0123456789"}}
    jf_aws.client("ssm").put_parameter(Name=name, Value=json.dumps(keys), Type="SecureString")
    config = eo.config.model_copy(update={"signing_keys": f"ssm:{name}"})
    unsigned = eo.client
    eo.config = config
    eo.client = JobClient(config, registry=jobs.registry, sqs_client=eo.sqs, session=jf_aws.session())
    eo.handler = consumer(jobs.registry, config=config, sqs_client=eo.sqs, listeners=[outcomes.append])
    return eo, unsigned


def test_a_signed_message_runs(signed):
    rt, _ = signed
    rt.client.enqueue("eo.effect", {"name": "signed"})
    (message,) = receive_all(rt.sqs, rt.url("high"))
    assert message_attribute(message, "jf-kid") == "k2" and message_attribute(message, "jf-sig")
    rt.sqs.change_message_visibility(
        QueueUrl=rt.url("high"), ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
    )
    drain(rt, "high")
    assert jobs.effects["signed"] == 1
    assert dead_letters(rt, "high") == []


def test_tampered_unsigned_and_unknown_key_messages_are_dead_lettered_unrun(signed):
    rt, unsigned = signed
    rt.client.enqueue("eo.effect", {"name": "original"})
    (message,) = receive_all(rt.sqs, rt.url("high"))
    rt.sqs.delete_message(QueueUrl=rt.url("high"), ReceiptHandle=message["ReceiptHandle"])
    attrs = {k: string_attribute(v["StringValue"]) for k, v in message["MessageAttributes"].items()}
    tampered = message["Body"].replace('"original"', '"tampered"')
    redeliver(rt, "high", tampered, attrs)
    unsigned.enqueue("eo.effect", {"name": "unsigned"})
    unknown = {**attrs, "jf-kid": string_attribute("k9")}
    redeliver(rt, "high", message["Body"].replace('"original"', '"unknown"'), unknown)
    rekeyed = json.loads(message["Body"])
    rekeyed["key"] = "another-key"  # a replay under a fresh key would escape idempotency
    redeliver(rt, "high", json.dumps(rekeyed), attrs)
    drain(rt, "high")
    assert dict(jobs.effects) == {}
    dead = dead_letters(rt, "high")
    assert [message_attribute(m, "jf-reason") for m in dead] == ["signature"] * 4
    errors = sorted(message_attribute(m, "jf-error") or "" for m in dead)
    assert any("not signed" in e for e in errors)
    assert any("unknown signing key id 'k9'" in e for e in errors)
    assert sum("does not match" in e for e in errors) == 2


def test_a_delayed_signed_job_carries_its_signature_in_the_envelope(signed, jf_aws):
    rt, _ = signed
    rt.client.enqueue("eo.effect", {"name": "scheduled"}, delay=3600)
    scheduler = jf_aws.client("scheduler")
    assert fire_due(scheduler, rt.sqs, now=datetime.now(UTC) + timedelta(hours=1, minutes=1)) == 1
    drain(rt, "high")
    assert jobs.effects["scheduled"] == 1


def test_messages_signed_with_the_previous_key_still_verify_during_rotation(signed, jf_aws):
    rt, _ = signed
    name = rt.config.signing_keys.removeprefix("ssm:")  # type: ignore[union-attr]
    ssm = jf_aws.client("ssm")
    old = json.loads(ssm.get_parameter(Name=name, WithDecryption=True)["Parameter"]["Value"])
    old_name = name + "-before"
    ssm.put_parameter(Name=old_name, Value=json.dumps({**old, "current": "k1"}), Type="SecureString")
    before = rt.config.model_copy(update={"signing_keys": f"ssm:{old_name}"})
    JobClient(before, registry=jobs.registry, sqs_client=rt.sqs, session=jf_aws.session()).enqueue(
        "eo.effect", {"name": "old-key"}
    )
    drain(rt, "high")
    assert jobs.effects["old-key"] == 1


def test_a_key_added_in_one_step_is_read_again_when_a_message_names_it(signed, jf_aws, monkeypatch):
    """A trial rotated in one step (a new key, current at once): the running consumer dead-lettered
    its jobs, 'unknown signing key id', until its five-minute cache ran out."""
    from jobframework import signing

    rt, _ = signed
    rt.client.enqueue("eo.effect", {"name": "before"})
    drain(rt, "high")  # (the consumer has read the ring)
    name = rt.config.signing_keys.removeprefix("ssm:")  # type: ignore[union-attr]
    ssm = jf_aws.client("ssm")
    ring = json.loads(ssm.get_parameter(Name=name, WithDecryption=True)["Parameter"]["Value"])
    ring = {"current": "k3", "keys": {**ring["keys"], "k3": "third-secret-0123456789"}}
    ssm.put_parameter(Name=name, Value=json.dumps(ring), Type="SecureString", Overwrite=True)
    monkeypatch.setattr(signing, "RECHECK_SECONDS", 0.0)  # (a forger's unknown ids: a read each 10 s)
    JobClient(rt.config, registry=jobs.registry, sqs_client=rt.sqs, session=jf_aws.session()).enqueue(
        "eo.effect", {"name": "after"}
    )
    drain(rt, "high")
    assert (jobs.effects["before"], jobs.effects["after"]) == (1, 1)
    assert dead_letters(rt, "high") == []


def test_a_forged_copy_of_a_jobs_message_changes_neither_its_status_nor_what_listeners_hear(signed):
    """A trial's unsigned copy of a finished job's message (its id from a 202's Location) turned the
    job's status to dead, erased its result, and told the team's notifier the job had died."""
    rt, _ = signed
    sent = rt.client.enqueue("eo.effect", {"name": "real"})
    drain(rt, "high")
    done = rt.client.status(sent.id)
    assert done is not None and done.status is JobState.SUCCEEDED
    outcomes.clear()
    for claimed in ("eo.effect", "eo.no-such-job"):  # (an unknown type is refused before the signature)
        forged = Envelope.new(claimed, {"name": "real"}, job_id=sent.id, track=True)
        redeliver(rt, "high", forged.to_body())
    drain(rt, "high")
    assert rt.client.status(sent.id) == done
    assert sorted((o.reason, o.job_id, o.job_type) for o in outcomes) == [
        ("signature", None, None),
        ("unknown-type", None, None),
    ]
    assert len(dead_letters(rt, "high")) == 2  # (each kept as it came)


def _redrive_a_forged_copy(rt: Runtime, job_id: str, name: str) -> Any:
    """Send an unsigned copy of job ``job_id``'s message (dead-lettered ``signature``), then redrive
    that letter alone, as an operator pasting its message id would; the redrive's result."""
    from jobframework.dlq import DeadLetters

    forged = Envelope.new("eo.effect", {"name": name}, job_id=job_id, track=True)
    redeliver(rt, "high", forged.to_body())
    drain(rt, "high")
    letters = DeadLetters(rt.config, rt.sqs, wait_time_seconds=0)
    [letter] = [x for x in letters.peek("high", limit=None) if x.reason == "signature"]
    return letters.redrive("high", message_ids=[letter.message_id])


def test_a_redrive_of_a_forged_letter_leaves_the_dead_job_it_names_dead(signed):
    """A last trial's forged letter named a dead payout's id: redriven (the id jf status suggests
    selects it too), it set the payout's status to queued, for good (its copy died again unwritten)."""
    rt, _ = signed
    dead = rt.client.enqueue("eo.effect", {"name": "doomed", "fail_times": 9})
    drain(rt, "high")
    died = rt.client.status(dead.id)
    assert died is not None and died.status is JobState.DEAD
    moved = _redrive_a_forged_copy(rt, dead.id, "doomed")
    assert moved.moved == 1 and moved.requeued == 0
    drain(rt, "high")  # (its copy dies again, unwritten)
    again = rt.client.status(dead.id)
    assert again is not None and again.status is JobState.DEAD


def test_a_redrive_of_a_forged_letter_leaves_the_running_job_it_names_running(signed, jf_aws):
    """A last trial's forged letter named a running payout: redriven, it lapsed the run's start
    claim, and the payout read queued (then jf cancel said "cancelled before it started")."""
    import time as clock

    from jobframework.state import StateStore

    rt, _ = signed
    sent = rt.client.enqueue("eo.effect", {"name": "paying"}, delay=600)  # (left queued)
    records = StateStore(str(rt.config.state_table), jf_aws.client("dynamodb")).jobs
    now = clock.time()
    assert records.claim_start(sent.id, attempt=1, runs_until=now + 600, now=now, claimant="its-run")
    running = rt.client.status(sent.id)
    assert running is not None and running.status is JobState.RUNNING
    assert _redrive_a_forged_copy(rt, sent.id, "paying").moved == 1
    after = rt.client.status(sent.id)
    assert after is not None and after.status is JobState.RUNNING


def test_an_unsigned_firing_of_a_recurring_schedule_runs_but_a_forged_payload_does_not(signed):
    rt, _ = signed
    (spec,) = rt.topology.schedules
    firing = scheduled_envelope(spec, datetime.now(UTC), str(uuid.uuid4()))
    forged = firing.model_copy(update={"id": str(uuid.uuid4()), "payload": {"name": "forged"}})
    for env in (firing, forged):
        redeliver(rt, "high", env.to_body())  # Scheduler's SQS target sends the body only
    drain(rt, "high")
    assert dict(jobs.effects) == {"tick:hourly": 1}
    (dead,) = dead_letters(rt, "high")
    assert json.loads(dead["Body"])["id"] == forged.id
    assert message_attribute(dead, "jf-reason") == "signature"


def test_unsigned_firings_made_up_for_other_times_run_no_more_than_the_schedule_would(signed):
    """A fintech trial sent five unsigned firings of its nightly payout, each for a time of its own
    (yesterday's slot, a time between slots, 2031, ...): all five ran, each a new key."""
    rt, _ = signed
    (spec,) = rt.topology.schedules  # rate(1 hour): a made-up time is taken as its hour's slot
    now = datetime.now(UTC).replace(microsecond=0)
    hour = now.replace(minute=0, second=0)
    times = {"real": now, "same-hour": hour + timedelta(seconds=(now - hour).seconds // 2)}
    times |= {"last-week": now - timedelta(days=7), "next-year": now + timedelta(days=365)}
    firings = {name: scheduled_envelope(spec, at, str(uuid.uuid4())) for name, at in times.items()}
    broken = firings["real"].model_copy(update={"id": str(uuid.uuid4()), "key": "schedule:eo.tick:soon"})
    for env in (*firings.values(), broken):
        redeliver(rt, "high", env.to_body())
    drain(rt, "high")
    assert dict(jobs.effects) == {"tick:hourly": 1}  # (the same hour's made-up time: its slot's key)
    letters = dead_letters(rt, "high")
    dead = {json.loads(m["Body"])["id"]: message_attribute(m, "jf-error") or "" for m in letters}
    assert "too old" in dead[firings["last-week"].id] and "ahead" in dead[firings["next-year"].id]
    assert "is no slot of its schedule" in dead[broken.id] and len(dead) == 3


def test_an_unsigned_firing_runs_under_its_slots_id_not_the_one_it_claims(signed):
    """A last trial's forged firing claimed a finished payout's id: the payout's status became the
    firing's (its result gone, its type the scheduled job's). One with a deadline wrote expired."""
    rt, _ = signed
    payout = rt.client.enqueue("eo.effect", {"name": "payout"})
    drain(rt, "high")
    before = rt.client.status(payout.id)
    assert before is not None and before.status is JobState.SUCCEEDED
    (spec,) = rt.topology.schedules
    claimed = scheduled_envelope(spec, datetime.now(UTC), payout.id)
    claimed = claimed.model_copy(update={"track": True})
    deadline = scheduled_envelope(spec, datetime.now(UTC), str(uuid.uuid4()))
    deadline = deadline.model_copy(update={"deadline": datetime.now(UTC) - timedelta(hours=1)})
    for env in (claimed, deadline):
        redeliver(rt, "high", env.to_body())
    drain(rt, "high")
    assert rt.client.status(payout.id) == before
    assert jobs.effects["tick:hourly"] == 1  # (the firing ran, as its slot's own)
    [letter] = dead_letters(rt, "high")
    assert "a deadline" in (message_attribute(letter, "jf-error") or "")


# --- large payloads -----------------------------------------------------------------------------------------


def test_a_900_kb_payload_round_trips_through_s3(eo, jf_aws):
    data = "x" * 900_000
    sent = eo.client.enqueue("eo.blob", {"name": "big", "data": data})
    (message,) = receive_all(eo.sqs, eo.url("high"))
    assert len(message["Body"]) < 2000
    env = json.loads(message["Body"])
    ref = env["payload_ref"]
    assert env["payload"] == {} and ref["bucket"] == eo.config.payload_bucket and ref["size"] > 900_000
    stored = jf_aws.client("s3").get_object(Bucket=ref["bucket"], Key=ref["key"])["Body"].read()
    assert json.loads(stored)["data"] == data
    eo.sqs.change_message_visibility(
        QueueUrl=eo.url("high"), ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
    )
    drain(eo, "high")
    assert jobs.observed == [900_000]
    status = eo.client.status(sent.id)
    assert status is not None and status.result == 900_000


def test_the_dead_letter_of_an_offloaded_payload_keeps_the_pointer(eo):
    eo.client.enqueue("eo.blob", {"name": "reject-big", "data": "y" * 300_000})
    (record,), _ = eo.consume("high")
    (dead,) = dead_letters(eo, "high")
    assert dead["Body"] == record["body"]
    assert json.loads(dead["Body"])["payload_ref"]["key"].endswith(".json")
    assert message_attribute(dead, "jf-reason") == "permanent"


def test_a_small_payload_is_not_offloaded(eo):
    eo.client.enqueue("eo.blob", {"name": "small", "data": "z" * 1000})
    (message,) = receive_all(eo.sqs, eo.url("high"))
    assert "payload_ref" not in json.loads(message["Body"])
