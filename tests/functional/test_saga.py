"""Sagas against the embedded AWS: steps, compensations, duplicates, signals, a killed worker."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from jobframework.envelope import lambda_record, parse_body
from jobframework.errors import ConfigurationError, PayloadValidationError
from jobframework.jobs import JobRegistry, job
from jobframework.local.aws import FAKE_CREDENTIALS
from jobframework.saga import SagaRecord, SagaStatus, on_step_event, saga, step, wait
from jobframework.state import JobState
from jobframework.testing import FakeLambdaContext, receive_all

from . import saga_jobs
from .conftest import Runtime

ROOT = Path(__file__).resolve().parents[2]


def drive(rt: Runtime, saga_id: str, until: Callable[[SagaRecord], bool], timeout: float = 15) -> SagaRecord:
    """Run the consumer on the high queue until the saga's record satisfies ``until``."""
    deadline = time.monotonic() + timeout
    while True:
        record = rt.client.saga_status(saga_id)
        assert record is not None
        if until(record):
            return record
        if time.monotonic() > deadline:
            raise AssertionError(f"saga did not get there in {timeout}s: {record.model_dump_json(indent=1)}")
        records, _ = rt.consume("high")
        if not records:
            time.sleep(0.05)


def ended(record: SagaRecord) -> bool:
    return record.status.terminal


def test_a_saga_that_succeeds_passes_outputs_forward_in_one_trace(srt):
    saga_id = saga_jobs.order_saga.start({"order_id": "o-1", "amount_cents": 1999}, client=srt.client)

    record = drive(srt, saga_id, ended)

    assert record.status is SagaStatus.SUCCEEDED
    assert saga_jobs.events == ["charge:o-1", "reserve:o-1", "notify:o-1"]
    assert [s.state.value for s in record.steps] == ["succeeded"] * 3
    assert record.steps[0].output == {"charge_id": "ch-o-1"}
    assert record.steps[2].output == "mailed about ch-o-1"  # notify read the charge's output
    assert all(s.attempts == 1 and s.started_at and s.finished_at for s in record.steps)
    assert record.finished_at and record.reason is None and not record.outbox
    assert set(saga_jobs.traces.values()) == {record.trace_id}  # every step continues the root trace
    assert srt.client.status(record.steps[1].job_id).key == f"saga:{saga_id}:s.reserve"


def test_a_failure_at_step_2_compensates_step_1_only(srt):
    saga_id = saga_jobs.order_saga.start({"order_id": "o-2", "fail_at": "reserve"}, client=srt.client)

    record = drive(srt, saga_id, ended)

    assert record.status is SagaStatus.COMPENSATED
    assert saga_jobs.events == ["charge:o-2", "reserve:o-2", "refund ch-o-2:o-2"]
    charge_, reserve_, notify_ = record.steps
    assert reserve_.state.value == "failed" and "reserve of o-2 declined" in (reserve_.error or "")
    assert record.reason == "step s.reserve failed (permanent)"
    assert charge_.compensation_state.value == "compensated"
    assert reserve_.compensation_state is None and notify_.state.value == "pending"
    # The saga took the step's failure: no dead letter (an out-of-stock order paged on-call and rolled a
    # canary back through the DLQ's alarms, for an expected outcome, a letter that must not be redriven)
    assert receive_all(srt.sqs, srt.dlq("high")) == []
    from tests.functional.conftest_local import cli_env, invoke

    said = invoke(["cancel", str(reserve_.job_id)], cli_env(srt.config))  # (no letter to purge: it says so)
    assert "it has no dead letter: taken by saga" in said.stderr and "jf dlq purge" not in said.stderr
    status = srt.client.status(reserve_.job_id)
    assert status is not None and (status.status, status.reason) == (
        JobState.DEAD,
        f"permanent: taken by saga {saga_id}, which compensates (no dead letter)",
    )


def test_a_step_redelivered_after_its_saga_compensated_does_not_run(srt):
    """The failed step's message again once its saga has compensated (a duplicate delivery, or a dead
    letter of a version that dead-lettered a saga's failed steps, redriven): running it would act after
    the step before it was undone, unknown to the saga."""
    saga_id = saga_jobs.order_saga.start({"order_id": "o-9", "fail_at": "reserve"}, client=srt.client)
    seen: list[dict[str, Any]] = []
    for _ in range(40):
        before = srt.client.saga_status(saga_id)
        assert before is not None
        if ended(before):
            break
        records, _ = srt.consume("high")
        seen.extend(records)
    assert before.status is SagaStatus.COMPENSATED
    [letter] = [{"Body": r["body"]} for r in seen if parse_body(r["body"]).type == "s.reserve"]
    srt.sqs.send_message(QueueUrl=srt.url("high"), MessageBody=letter["Body"])  # as a redrive sends it
    outcomes: list[Any] = []
    srt.handler.listeners.append(outcomes.append)
    records, response = srt.consume("high")
    assert len(records) == 1 and response == {"batchItemFailures": []}
    assert [(o.outcome, o.reason) for o in outcomes] == [("skipped", "saga moved on")]
    assert saga_jobs.events == ["charge:o-9", "reserve:o-9", "refund ch-o-9:o-9"]  # not run again
    assert srt.client.saga_status(saga_id) == before
    status = srt.client.status(parse_body(letter["Body"]).id)
    assert (status.status, status.reason) == (JobState.CANCELLED, "saga moved on")


def test_a_failure_at_step_3_compensates_2_then_1(srt):
    saga_id = saga_jobs.order_saga.start({"order_id": "o-3", "fail_at": "notify"}, client=srt.client)

    record = drive(srt, saga_id, ended)

    assert record.status is SagaStatus.COMPENSATED
    assert saga_jobs.events == [
        "charge:o-3",
        "reserve:o-3",
        "notify:o-3",
        "release rs-sku-1:o-3",
        "refund ch-o-3:o-3",
    ]
    assert [s.compensation_state and s.compensation_state.value for s in record.steps] == [
        "compensated",
        "compensated",
        None,
    ]


def _receive_one(rt: Runtime, job_type: str) -> dict[str, Any]:
    queue_arn = rt.sqs.get_queue_attributes(QueueUrl=rt.url("high"), AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    messages = receive_all(rt.sqs, rt.url("high"))
    assert [parse_body(m["Body"]).type for m in messages] == [job_type]
    return lambda_record(messages[0], queue_arn=queue_arn)


def _deliver_twice(rt: Runtime, record: dict[str, Any]) -> None:
    """The same message delivered twice (as SQS at-least-once may), then acknowledged."""
    for _ in range(2):
        assert rt.handler({"Records": [record]}, FakeLambdaContext()) == {"batchItemFailures": []}
    rt.sqs.delete_message(QueueUrl=rt.url("high"), ReceiptHandle=record["receiptHandle"])


def test_duplicate_deliveries_neither_double_advance_nor_double_compensate(srt):
    saga_id = saga_jobs.order_saga.start({"order_id": "o-4", "fail_at": "reserve"}, client=srt.client)

    charged = _receive_one(srt, "s.charge")
    _deliver_twice(srt, charged)  # a step delivered twice
    after_charge = srt.client.saga_status(saga_id)
    # and its completion reported once more, as a retried saga hook does
    on_step_event(srt.handler, parse_body(charged["body"]), "completed", result='{"charge_id": "other"}')
    assert srt.client.saga_status(saga_id) == after_charge
    _deliver_twice(srt, _receive_one(srt, "s.reserve"))  # fails: compensation queued once
    _deliver_twice(srt, _receive_one(srt, "s.refund"))  # a compensation delivered twice

    record = srt.client.saga_status(saga_id)
    assert saga_jobs.events.count("charge:o-4") == 1
    assert saga_jobs.events.count("refund ch-o-4:o-4") == 1
    assert after_charge.steps[1].state.value == "queued"
    assert record.status is SagaStatus.COMPENSATED
    assert receive_all(srt.sqs, srt.url("high")) == []  # nothing was sent twice
    # start, step 1 done (+ outbox sent), step 2 failed (+ sent), compensated: one write each
    assert record.version == after_charge.version + 3


def test_a_compensation_that_keeps_failing_ends_the_saga_failed_with_its_reason(srt, capsys, monkeypatch):
    monkeypatch.setitem(os.environ, "POWERTOOLS_METRICS_DISABLED", "false")
    monkeypatch.setitem(os.environ, "JF_METRICS_DISABLED", "false")
    saga_id = saga_jobs.order_saga.start(
        {"order_id": "o-5", "fail_at": "notify", "broken_compensation": "release"}, client=srt.client
    )

    record = drive(srt, saga_id, ended)

    assert record.status is SagaStatus.FAILED
    assert record.reason == "compensation s.release of step s.reserve was dead-lettered (exhausted)"
    assert "warehouse API is down" in (record.error or "")
    release_ = record.steps[1]
    assert release_.compensation_state.value == "failed" and release_.compensation_attempts == 2
    assert record.steps[0].compensation_state is None  # never started: compensations run in reverse order
    assert "refund ch-o-5:o-5" not in saga_jobs.events  # reverse order: it stops where it failed
    metrics = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    failed = [m for m in metrics if "SagaFailed" in m]
    assert len(failed) == 1 and failed[0]["Saga"] == "t.order", metrics


def test_a_signal_before_the_deadline_continues(srt):
    saga_id = saga_jobs.approval_saga.start({"order_id": "o-6"}, client=srt.client)
    record = drive(srt, saga_id, lambda r: r.steps[1].state.value == "waiting")

    assert saga_jobs.approval_saga.signal(saga_id, "approval", {"approved_by": "ops"}, client=srt.client)
    record = drive(srt, saga_id, ended)

    assert record.status is SagaStatus.SUCCEEDED
    assert record.steps[1].state.value == "signalled"
    assert record.steps[1].output == {"approved_by": "ops"}
    assert saga_jobs.events == ["charge:o-6", "notify:o-6"]
    time.sleep(2.2)  # the deadline check still arrives; it changes nothing
    srt.consume("high")
    assert srt.client.saga_status(saga_id).version == record.version


def test_jf_saga_signal_approves_a_waiting_saga_and_says_when_it_was_not_taken(srt):
    from tests.functional.conftest_local import cli_env, invoke

    env = {**cli_env(srt.config), "JF_JOBS": "tests.functional.saga_jobs"}
    saga_id = saga_jobs.approval_later_saga.start({"order_id": "o-11"}, client=srt.client)
    drive(srt, saga_id, lambda r: r.steps[1].state.value == "waiting")

    unfit = invoke(["saga", "signal", saga_id, "approval", '{"amount_cents": "lots"}'], env)
    taken = invoke(["saga", "signal", saga_id, "approval", '{"approved_by": "ops"}', "--json"], env)
    record = drive(srt, saga_id, ended)
    wrong = invoke(["saga", "signal", saga_id, "aproval"], env)
    bad_json = invoke(["saga", "signal", saga_id, "approval", "{approved"], env)
    late = invoke(["saga", "signal", saga_id, "approval"], env)
    unknown = invoke(["saga", "signal", "nope", "approval"], env)
    # A process whose job modules do not define the saga (this one imported saga_jobs already).
    elsewhere = subprocess.run(
        [sys.executable, "-m", "jobframework.cli", "saga", "signal", saga_id, "approval"],
        env={**os.environ, **env, "JF_JOBS": "tests.functional.jobs_under_test"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert wrong.exit_code == 2 and "has no wait named 'aproval' (waits: approval)" in wrong.output
    assert bad_json.exit_code == 2 and "the data is not JSON" in bad_json.output
    # data the next step (s.notify) could not take is refused, and the saga still waits for a good one
    assert unfit.exit_code == 2, unfit.output
    assert "payload of its next step s.notify (Charged) does not validate: amount_cents" in unfit.output
    assert taken.exit_code == 0, taken.output
    assert json.loads(taken.stdout) == {"id": saga_id, "signal": "approval", "taken": True}
    assert record.status is SagaStatus.SUCCEEDED and record.steps[1].output == {"approved_by": "ops"}
    assert late.exit_code == 1 and "did not take approval: it has ended" in late.output
    assert unknown.exit_code == 1 and "no saga nope" in unknown.output
    assert elsewhere.returncode == 1, elsewhere.stderr
    assert "saga " + saga_id + " is a t.approval_later, which the job modules loaded here do not define" in (
        elsewhere.stderr
    )
    assert "pass the module that defines it with --jobs" in elsewhere.stderr


def test_no_signal_before_the_deadline_compensates(srt):
    saga_id = saga_jobs.approval_saga.start({"order_id": "o-7"}, client=srt.client)

    record = drive(srt, saga_id, ended)

    assert record.status is SagaStatus.COMPENSATED
    assert record.steps[1].state.value == "timed_out"
    assert record.reason == "step approval failed (deadline)"
    assert saga_jobs.events == ["charge:o-7", "refund ch-o-7:o-7"]
    assert not saga_jobs.approval_saga.signal(saga_id, "approval", {}, client=srt.client)  # too late


def test_a_deadline_check_that_arrives_early_comes_back_at_the_deadline_quietly(srt, jf_aws, caplog):
    """A trial fired a saga's deadline check early (fire_due with a later now): it was retried each
    second, each time an ERROR with its traceback, and never got to the deadline."""
    import logging
    from datetime import datetime, timedelta

    from jobframework.saga.record import iso_utc
    from jobframework.stores.sagas import DynamoSagaRecords

    saga_id = saga_jobs.approval_saga.start({"order_id": "o-early"}, client=srt.client)
    drive(srt, saga_id, lambda r: r.steps[1].state.value == "waiting")
    records = DynamoSagaRecords(str(srt.config.state_table), jf_aws.client("dynamodb"))
    record = records.get(saga_id)
    assert record is not None and record.steps[1].deadline is not None
    later = datetime.fromisoformat(record.steps[1].deadline) + timedelta(seconds=120)
    moved = record.model_copy(deep=True)
    moved.steps[1].deadline = iso_utc(later)
    assert records.replace(moved, record.version)  # (its check, due in 2 s, is now 2 minutes early)
    time.sleep(2.2)
    with caplog.at_level(logging.INFO, logger="jobframework.consumer"):
        got, response = srt.consume("high")
    [check] = [r for r in got if json.loads(r["body"])["type"] == "jf.saga.deadline"]
    assert response["batchItemFailures"] == [{"itemIdentifier": check["messageId"]}]  # back later
    said = [r for r in caplog.records if "arrived" in r.getMessage()]
    assert [(r.levelno, r.exc_info) for r in said] == [(logging.INFO, None)], said
    assert "at its deadline" in said[0].getMessage()
    assert srt.client.saga_status(saga_id).steps[1].state.value == "waiting"  # (nothing changed)


def test_the_worker_killed_mid_saga_leaves_it_resumable_and_it_completes(srt, tmp_path):
    srt.sqs.set_queue_attributes(QueueUrl=srt.url("high"), Attributes={"VisibilityTimeout": "3"})
    marker = tmp_path / "slow-started"
    env = {k: v for k, v in os.environ.items() if not k.startswith("JF_")}
    env.update(FAKE_CREDENTIALS)
    env.update(srt.config.to_env())
    env.pop("JF_TOPOLOGY_PARAMETER", None)
    env["PYTHONPATH"] = str(ROOT)
    log = (tmp_path / "worker.log").open("w")

    def start_worker() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.functional.saga_worker"], cwd=ROOT, env=env, stdout=log, stderr=log
        )

    saga_id = saga_jobs.slow_saga.start({"order_id": "o-8", "marker": str(marker)}, client=srt.client)
    first = start_worker()
    try:
        deadline = time.monotonic() + 20
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert marker.exists(), (tmp_path / "worker.log").read_text()
        first.send_signal(signal.SIGKILL)  # in the middle of the slow step
        first.wait(5)
    finally:
        if first.poll() is None:
            first.kill()
    killed = srt.client.saga_status(saga_id)
    assert killed.status is SagaStatus.RUNNING
    assert [s.state.value for s in killed.steps] == ["succeeded", "queued", "pending"]

    second = start_worker()
    try:
        deadline = time.monotonic() + 25
        record = killed
        while not record.status.terminal and time.monotonic() < deadline:
            time.sleep(0.2)
            record = srt.client.saga_status(saga_id)
    finally:
        second.send_signal(signal.SIGTERM)
        try:
            second.wait(10)
        except subprocess.TimeoutExpired:
            second.kill()
    assert record.status is SagaStatus.SUCCEEDED, (tmp_path / "worker.log").read_text()[-3000:]
    assert record.steps[1].output == {"packed": True}


def test_bad_definitions_fail_at_import_with_a_clear_message():
    reg = JobRegistry()

    @job("b.one", registry=reg)
    def one(order: saga_jobs.Order) -> None: ...

    def not_a_job(order: saga_jobs.Order) -> None: ...

    with pytest.raises(ConfigurationError, match="has no steps"):
        saga("b.empty", steps=[], registry=reg)
    with pytest.raises(ConfigurationError, match=r"compensation of step b\.one must be a registered job"):
        step(one, compensate=not_a_job)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"takes the job object that @job returned .* not its name"):
        step("b.one")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"decorate \S*not_a_job with @job"):  # (not "<function ..>")
        saga("b.plain", steps=[step(one), not_a_job], registry=reg)  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match=r"step 'b\.one' appears twice"):
        saga("b.twice", steps=[step(one), step(one)], registry=reg)
    with pytest.raises(ConfigurationError, match="not registered in the saga's registry"):
        saga("b.foreign", steps=[step(saga_jobs.charge)], registry=reg)
    with pytest.raises(ConfigurationError, match="timeout must be within"):
        wait("approval", timeout=0)
    saga("b.ok", steps=[step(one), step(one, name="again"), wait("approval", timeout=60)], registry=reg)
    with pytest.raises(ConfigurationError, match="already defined on this registry: give this one another"):
        saga("b.ok", steps=[step(one)], registry=reg)
    assert "jf.saga.deadline" in reg


def test_start_validates_the_first_step_before_writing_anything(srt):
    with pytest.raises(PayloadValidationError, match=r"first step s\.charge") as refused:
        saga_jobs.order_saga.start({"amount_cents": 5}, client=srt.client)
    assert refused.value.fields == [{"field": "order_id", "message": "Field required"}]
    assert receive_all(srt.sqs, srt.url("high")) == []


def test_jf_saga_ls_and_show(srt):
    from tests.functional.conftest_local import cli_env, invoke

    done = saga_jobs.order_saga.start({"order_id": "o-9", "fail_at": "reserve"}, client=srt.client)
    drive(srt, done, ended)
    waiting = saga_jobs.approval_saga.start({"order_id": "o-10"}, client=srt.client)
    env = cli_env(srt.config)

    listed = invoke(["saga", "ls", "--json"], env)
    compensated = invoke(["saga", "ls", "--status", "compensated", "--json"], env)
    shown = invoke(["saga", "show", done, "--json"], env)
    table = invoke(["saga", "show", done], {**env, "COLUMNS": "200"})  # no cell folded
    missing = invoke(["saga", "show", "nope"], env)
    deadline = invoke(["status", f"{waiting}-d1"], env)  # (an untracked saga job: not in a DLQ, ever)
    taken = invoke(["status", f"{done}-1"], env)  # (the failed step, which its saga took: no letter)
    no_such = invoke(["status", f"{waiting}-7"], env)  # (its shape, not one of its jobs)

    assert listed.exit_code == 0, listed.output
    assert {r["id"]: r["status"] for r in json.loads(listed.stdout)} == {
        done: "compensated",
        waiting: "running",
    }
    assert [r["id"] for r in json.loads(compensated.stdout)] == [done]
    assert deadline.exit_code == 1
    said = " ".join(deadline.output.split())
    assert f"it is the deadline check of step 1 of saga {waiting} (t.approval, running)" in said, said
    assert f"jf saga show {waiting}" in said and "jf dlq" not in said
    assert taken.exit_code == 0 and "taken by saga" in taken.stdout and "dead letter:" not in taken.stdout
    assert "jf dlq ls, then jf dlq peek LANE" in " ".join(no_such.output.split())
    record = json.loads(shown.stdout)
    assert record["reason"] == "step s.reserve failed (permanent)"
    assert [s["state"] for s in record["steps"]] == ["succeeded", "failed", "pending"]
    assert table.exit_code == 0, table.output
    assert "reason: step s.reserve failed (permanent)" in table.stdout
    assert "s.refund compensated (1 attempt)" in table.stdout  # not "(1 attempts)"
    assert "s.release not run" in table.stdout  # the failed step's: declared, never queued
    assert missing.exit_code == 1 and "no saga nope" in missing.output


def test_a_step_whose_payload_the_data_does_not_make_says_how_data_flows():
    """A Celery trial ported a chain: its first step returned a string, and the next step's payload
    lacked the field that string was meant for; the saga said only pydantic's "Field required"."""
    from datetime import UTC, datetime

    from jobframework.saga import StepEvent, advance
    from jobframework.saga.transitions import enter_step

    defn, now = saga_jobs.order_saga, datetime.now(UTC)
    record = defn.new_record({"order_id": "o-12"}, "s-12")
    enter_step(defn, record, 0, now)
    assert advance(defn, record, StepEvent("step", "s.charge", "completed", output="ch-12"), now)  # (no dict)
    assert advance(
        defn, record, StepEvent("step", "s.reserve", "completed", output={"reservation_id": "r"}), now
    )
    notify = record.steps[2]
    assert notify.error is not None and notify.error.startswith(
        "the saga's data does not make s.notify's payload (its start payload and the earlier steps' dict "
        "outputs; a step that returns a plain value keeps it under its own name"
    ), notify.error
    assert "charge_id" in notify.error  # (pydantic's own words follow)


def test_a_redriven_compensation_that_completes_resumes_the_rollback():
    from datetime import UTC, datetime

    from jobframework.saga import StepEvent, advance
    from jobframework.saga.transitions import enter_step

    defn, now = saga_jobs.order_saga, datetime.now(UTC)
    record = defn.new_record({"order_id": "o-11"}, "s-11")
    enter_step(defn, record, 0, now)
    for name, output in (("s.charge", {"charge_id": "ch"}), ("s.reserve", {"reservation_id": "rs"})):
        assert advance(defn, record, StepEvent("step", name, "completed", output=output), now)
    assert advance(defn, record, StepEvent("step", "s.notify", "failed", reason="permanent", error="x"), now)
    assert advance(defn, record, StepEvent("compensate", "s.reserve", "failed", reason="exhausted"), now)
    assert record.status is SagaStatus.FAILED and record.steps[0].compensation_state is None

    # the operator fixes the warehouse and redrives the dead letter: it completes
    assert advance(defn, record, StepEvent("compensate", "s.reserve", "completed"), now)
    assert record.status is SagaStatus.COMPENSATING
    assert record.outbox[-1].step == "compensate:s.charge"  # the rollback carries on, in order
    assert advance(defn, record, StepEvent("compensate", "s.charge", "completed"), now)
    assert record.status is SagaStatus.COMPENSATED
    assert not advance(defn, record, StepEvent("compensate", "s.charge", "completed"), now)  # duplicate


def test_run_saga_runs_a_saga_to_its_end_or_to_a_wait(srt):
    """A trial's team wrote its own loop over every queue, with a deadline, to run a saga in a test (and
    its first try stopped at the first step that succeeded)."""
    from jobframework.testing import run_saga

    failed = saga_jobs.order_saga.start({"order_id": "o-rs", "fail_at": "reserve"}, client=srt.client)
    record = run_saga(srt.client, failed, srt.handler, srt.sqs)
    assert record.status is SagaStatus.COMPENSATED and saga_jobs.events[-1] == "refund ch-o-rs:o-rs"

    waiting = saga_jobs.approval_later_saga.start({"order_id": "o-rw"}, client=srt.client)
    at_wait = run_saga(
        srt.client, waiting, srt.handler, srt.sqs, until=lambda r: any(s.state == "waiting" for s in r.steps)
    )
    assert at_wait.status is SagaStatus.RUNNING
    assert saga_jobs.approval_later_saga.signal(waiting, "approval", {}, client=srt.client)
    assert run_saga(srt.client, waiting, srt.handler, srt.sqs).status is SagaStatus.SUCCEEDED
    stuck = saga_jobs.approval_later_saga.start({"order_id": "o-rt"}, client=srt.client)
    with pytest.raises(TimeoutError, match=r"after 0\.2 s"):
        run_saga(srt.client, stuck, srt.handler, srt.sqs, timeout=0.2)
