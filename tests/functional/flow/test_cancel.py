"""Cancel: before the start a job is acknowledged unrun (status cancelled); running, it sees ctx.cancelled."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import pytest

from jobframework.errors import ConfigurationError
from jobframework.flow.cancel import CancelOutcome, CancelResult
from jobframework.state import JobState, StateStore
from jobframework.testing import FakeLambdaContext, receive_all
from tests.functional.conftest_local import cli_env, invoke, send_duplicate

from . import flow_jobs
from .conftest import Flow
from .flow_jobs import Item


def test_a_job_cancelled_before_it_starts_is_acknowledged_unrun(flow):
    job_id = flow.client.enqueue("f.ok", Item(name="a")).id
    first = flow.client.cancel(job_id)
    assert first.outcome is CancelOutcome.CANCELLED and first.status is JobState.QUEUED
    assert flow.client.status(job_id).status is JobState.CANCELLED

    records, response = flow.consume("high")
    assert len(records) == 1 and response == {"batchItemFailures": []}
    assert flow_jobs.calls["a"] == 0
    status = flow.client.status(job_id)
    assert status.status is JobState.CANCELLED and status.finished_at
    assert status.reason == "cancelled before it started"  # (as jf cancel wrote it: the consumer keeps it)
    assert [(o.outcome, o.reason) for o in flow.outcomes] == [("skipped", "cancelled")]
    assert receive_all(flow.sqs, flow.url("high")) == []  # acknowledged
    assert receive_all(flow.sqs, flow.config.endpoints("high").dlq_url) == []

    again = flow.client.cancel(job_id)  # idempotent
    assert again.outcome is CancelOutcome.CANCELLED and again.status is JobState.CANCELLED


def test_a_job_cancelled_before_it_starts_frees_its_dedup_key(flow):
    """A re-enqueue with the key of a job cancelled unrun sent nothing and answered with the cancelled
    job for the rest of the dedup window (24 h)."""
    first = flow.client.enqueue("f.ok", Item(name="keyed"), key="item:keyed")
    assert flow.client.enqueue("f.ok", Item(name="keyed"), key="item:keyed").id == first.id  # dedup on
    assert flow.client.cancel(first.id).outcome is CancelOutcome.CANCELLED
    again = flow.client.enqueue("f.ok", Item(name="keyed"), key="item:keyed")
    assert again.id != first.id, "the cancelled job still held its dedup key"
    assert flow.client.status(again.id).status is JobState.QUEUED
    flow.consume("high")
    assert flow_jobs.calls["keyed"] == 1  # the new job ran; the cancelled one did not
    assert flow.client.status(first.id).status is JobState.CANCELLED
    assert flow.client.status(again.id).status is JobState.SUCCEEDED


def test_a_cancelled_job_handed_back_unrun_stays_cancelled(flow):
    """A record released before the cancel check (too little time left in the invocation) writes no
    status: the job reads cancelled throughout, not queued until a later copy is acknowledged."""
    job_id = flow.client.enqueue("f.ok", Item(name="handed-back")).id
    assert flow.client.cancel(job_id).outcome is CancelOutcome.CANCELLED
    records, _ = flow.consume("high", context=FakeLambdaContext(1.0))
    assert len(records) == 1 and [o.outcome for o in flow.outcomes] == ["released"]
    status = flow.client.status(job_id)
    assert status.status is JobState.CANCELLED and status.reason == "cancelled before it started"

    records, _ = flow.consume("high")  # the copy, with time to run: acknowledged unrun
    assert len(records) == 1 and flow_jobs.calls["handed-back"] == 0
    status = flow.client.status(job_id)  # (its reason kept: the consumer had written "cancelled" over it)
    assert status.status is JobState.CANCELLED and status.reason == "cancelled before it started"


def test_a_finished_job_is_not_changed(flow):
    job_id = flow.client.enqueue("f.ok", Item(name="b")).id
    flow.consume("high")
    result = flow.client.cancel(job_id)
    assert result.outcome is CancelOutcome.FINISHED
    status = flow.client.status(job_id)
    assert status.status is JobState.SUCCEEDED and status.cancel_requested_at is None  # nothing asked


def _cancel_once_started(flow: Flow, job_id: str, **consume: Any) -> CancelResult:
    """Consume the default lane in a thread and cancel ``job_id`` once its job has started."""
    consuming = threading.Thread(target=flow.consume, args=("default",), kwargs=consume)
    consuming.start()
    try:
        assert flow_jobs.started.wait(10)
        return flow.client.cancel(job_id)
    finally:
        consuming.join(30)


def test_a_running_job_sees_ctx_cancelled_and_stops(flow):
    job_id = flow.client.enqueue("f.long", Item(name="long")).id
    result = _cancel_once_started(flow, job_id)
    assert result.outcome is CancelOutcome.SIGNALLED and result.status is JobState.RUNNING
    assert flow_jobs.ran == [{"name": "long", "id": job_id, "attempt": 1, "stopped": True}]
    status = flow.client.status(job_id)
    assert status.result == "stopped" and status.status is JobState.SUCCEEDED
    assert status.cancel_requested_at and status.cancel_requested_at >= status.started_at  # it was asked
    shown = invoke(["status", job_id], cli_env(flow.config))
    assert f"cancel asked: {status.cancel_requested_at}" in shown.stdout


def test_jf_cancel_of_a_running_job_says_it_stops_only_where_its_code_checks(flow):
    """An on-call trial read `signalled (status running, was running)` as a cancel; the job ran on and
    succeeded."""
    job_id = flow.client.enqueue("f.long", Item(name="long")).id
    consuming = threading.Thread(target=flow.consume, args=("default",))
    consuming.start()
    try:
        assert flow_jobs.started.wait(10)
        said = invoke(["cancel", job_id], cli_env(flow.config))
    finally:
        consuming.join(30)
    assert said.stdout.strip() == f"{job_id}: signalled (status running, was running)", said.output
    assert "the run stops only where the job's code checks ctx.cancelled" in said.stderr


def test_lists_read_a_running_job_as_running(flow):
    """A trial's bulk-cancel dry run and the console's list read `queued` for a job `jf status` read
    `running` (a run's start is its claim, not a write of its status item); a search for `running`
    found nothing."""
    from jobframework.ui.records import find_jobs

    # Keyed apart from its id: its run's start is its start claim (one keyed by its id starts with its
    # key's claim, which lists read already).
    job_id = flow.client.enqueue("f.long", Item(name="long"), key="long-run").id
    time.sleep(0.05)
    since = datetime.now(UTC)  # after its enqueue (its status item's time), before its start
    time.sleep(0.05)
    consuming = threading.Thread(target=flow.consume, args=("default",))
    consuming.start()
    try:
        assert flow_jobs.started.wait(10)
        listed = invoke(
            ["cancel", "--type", "f.long", "--older-than", "0s", "--dry-run", "--json"], cli_env(flow.config)
        )
        running = [j.id for j in find_jobs(flow.client.state, status=JobState.RUNNING).jobs]
        queued = [j.id for j in find_jobs(flow.client.state, status=JobState.QUEUED).jobs]
        # Its start is recent though its status item is not: "changed since" lists it (a store with no
        # idempotency table to merge left it out).
        state = StateStore(flow.client.state.table, flow.client.state.client)
        recent = [(j.id, j.status) for j in find_jobs(state, updated_since=since).jobs]
        recent_running = find_jobs(state, status=JobState.RUNNING, updated_since=since).jobs
        flow.client.cancel(job_id)  # (it stops at its next check)
    finally:
        consuming.join(30)
    assert [(j["id"], j["status"]) for j in json.loads(listed.stdout)["jobs"]] == [(job_id, "running")]
    assert running == [job_id] and job_id not in queued
    assert recent == [(job_id, JobState.RUNNING)] and [j.id for j in recent_running] == [job_id]


def test_a_running_job_that_stops_on_its_cancel_ends_cancelled_not_retried(flow):
    job_id = flow.client.enqueue("f.stoppable", Item(name="steps")).id
    assert _cancel_once_started(flow, job_id).outcome is CancelOutcome.SIGNALLED
    status = flow.client.status(job_id)
    assert (status.status, status.reason, status.attempts) == (
        JobState.CANCELLED,
        "cancelled while running",
        1,
    )
    assert status.started_at and status.started_at <= status.finished_at  # it did run, until the cancel
    assert flow_jobs.ran == []  # it stopped before its last step
    assert [o.outcome for o in flow.outcomes] == ["skipped"]
    assert receive_all(flow.sqs, flow.url("default"), attempts=1) == []  # acknowledged: no retry


def test_a_job_whose_last_attempt_fails_after_a_cancel_ends_cancelled_not_dead_lettered(flow):
    """A trial cancelled a delivery during its last attempt, which then failed: it ended dead,
    exhausted, its letter one a redrive would send again (earlier attempts ended cancelled)."""
    job_id = flow.client.enqueue("f.fails_late", Item(name="late")).id
    assert _cancel_once_started(flow, job_id).outcome is CancelOutcome.SIGNALLED
    status = flow.client.status(job_id)
    assert (status.status, status.attempts) == (JobState.CANCELLED, 1)
    assert status.reason == (
        "cancelled while running; the attempt then failed: ConnectionError: downstream reset the connection"
    )
    assert [o.outcome for o in flow.outcomes] == ["skipped"]
    assert receive_all(flow.sqs, flow.config.endpoints("default").dlq_url, attempts=1) == []


def test_a_retry_of_a_cancelled_job_does_not_start(flow):
    job_id = flow.client.enqueue("f.flaky", Item(name="f", fail_times=5)).id
    flow.consume("default")  # attempt 1 fails; back in 1 s
    assert flow.client.cancel(job_id).outcome is CancelOutcome.CANCELLED
    # (it had run: "cancelled before it started" misled, until the consumer wrote "cancelled" over it)
    assert flow.client.status(job_id).reason == "cancelled before attempt 2"
    time.sleep(1.2)
    records, _ = flow.consume("default")
    assert len(records) == 1 and flow_jobs.calls["f"] == 1
    status = flow.client.status(job_id)
    assert status.status is JobState.CANCELLED and status.reason == "cancelled before attempt 2"


def test_cancel_racing_the_start_either_stops_it_or_tells_it(flow):
    """Each job is cancelled while consumers start it: a cancelled one never runs; one that ran was
    signalled (or had finished); a signalled one that did not run stopped at its start, cancelled; none
    is lost."""
    ids = [flow.client.enqueue("f.ok", Item(name=f"r{n}")).id for n in range(20)]
    go = threading.Barrier(3)

    def consume() -> None:
        go.wait()
        for _ in range(4):
            flow.consume("high", max_messages=5)

    def cancel_all() -> dict[str, CancelOutcome]:
        go.wait()
        return {job_id: flow.client.cancel(job_id).outcome for job_id in ids}

    with ThreadPoolExecutor(3) as pool:
        consumers = [pool.submit(consume) for _ in range(2)]
        outcomes = pool.submit(cancel_all).result(60)
        for c in consumers:
            c.result(60)
    while receive_all(flow.sqs, flow.url("high"), attempts=1):
        pass  # nothing may be left visible (receive_all would leave it in flight: fail below instead)
    ran = {r["id"] for r in flow_jobs.ran}
    for job_id, outcome in outcomes.items():
        status = flow.client.status(job_id).status
        if outcome is CancelOutcome.CANCELLED:
            assert job_id not in ran and status is JobState.CANCELLED, (job_id, status)
        elif job_id in ran:
            assert status is JobState.SUCCEEDED, (job_id, outcome, status)
        else:  # signalled at its very start: its run read the marker after claiming its key, and stopped
            assert (outcome, status) == (CancelOutcome.SIGNALLED, JobState.CANCELLED), (job_id, outcome)
    assert len(flow_jobs.ran) == len(ran)  # each ran at most once
    assert all(flow_jobs.calls[f"r{n}"] <= 1 for n in range(20))
    assert {o.job_id for o in flow.outcomes} == set(ids)  # every record settled


def test_bulk_cancel_by_type_and_age_with_a_dry_run(flow):
    ids = [flow.client.enqueue("f.ok", Item(name=f"b{n}")).id for n in range(3)]
    other = flow.client.enqueue("f.flaky", Item(name="other")).id
    env = cli_env(flow.config)

    dry = invoke(["cancel", "--type", "f.ok", "--older-than", "0s", "--dry-run", "--json"], env)
    assert dry.exit_code == 0, dry.output
    listed = json.loads(dry.output)
    assert sorted(j["id"] for j in listed["jobs"]) == sorted(ids) and listed["dry_run"] is True
    assert all(flow.client.status(i).status is JobState.QUEUED for i in ids)

    none = invoke(["cancel", "--type", "f.ok", "--older-than", "1h", "--json"], env)
    assert json.loads(none.output)["jobs"] == []
    misspelt = invoke(["cancel", "--type", "f.okk", "--older-than", "0s"], env)
    assert misspelt.exit_code == 0, misspelt.output
    assert "no unfinished tracked job of type f.okk was enqueued more than 0s ago" in misspelt.output
    assert "check the type's spelling" in misspelt.output
    with_catalog = {**env, "JF_TOPOLOGY_PARAMETER": str(flow.config.topology_parameter)}  # (jf dev's)
    suggested = invoke(["cancel", "--type", "f.okk", "--older-than", "0s"], with_catalog)
    assert "(nothing changed); did you mean f.ok? `jf status ID`" in suggested.output, suggested.output
    known = invoke(["cancel", "--type", "f.ok", "--older-than", "1h"], with_catalog)  # (it exists)
    assert "(nothing changed); `jf status ID`" in known.output and "spelling" not in known.output

    done = invoke(["cancel", "--type", "f.ok", "--older-than", "0s"], env)
    assert done.exit_code == 0 and "3 job(s) of f.ok: 3 cancelled" in done.output
    assert all(flow.client.status(i).status is JobState.CANCELLED for i in ids)
    assert flow.client.status(other).status is JobState.QUEUED

    one = invoke(["cancel", ids[0], "--json"], env)
    again = {"id": ids[0], "outcome": "cancelled", "status": "cancelled", "status_before": "cancelled"}
    assert json.loads(one.output) == again


def test_bulk_cancel_takes_one_customers_jobs_by_text_in_their_key(flow):
    """A trial's webhook team, one customer's endpoint disabled: `jf cancel --match` was refused, and
    the dry run listed every customer's deliveries; they cancelled ids one by one."""
    globex = [flow.client.enqueue("f.ok", Item(name=f"g{n}"), key=f"evt:globex-{n}").id for n in range(2)]
    initech = flow.client.enqueue("f.ok", Item(name="i0"), key="evt:initech-0").id
    env = cli_env(flow.config)
    args = ["cancel", "--type", "f.ok", "--older-than", "0s", "--match", "globex"]
    dry = invoke([*args, "--dry-run", "--json"], env)
    assert dry.exit_code == 0, dry.output
    assert sorted(j["id"] for j in json.loads(dry.output)["jobs"]) == sorted(globex)
    listed = invoke([*args, "--dry-run"], env)  # (an on-call trial could not see whose jobs they were)
    assert all(f"key evt:globex-{n}" in listed.output for n in range(2)), listed.output
    done = invoke(args, env)
    assert done.exit_code == 0 and "2 job(s) of f.ok: 2 cancelled" in done.output, done.output
    assert [flow.client.status(i).status for i in (*globex, initech)] == [
        JobState.CANCELLED,
        JobState.CANCELLED,
        JobState.QUEUED,
    ]
    none = invoke(["cancel", "--type", "f.ok", "--older-than", "0s", "--match", "umbrella"], env)
    assert "no unfinished tracked job of type f.ok whose key contains 'umbrella'" in none.output
    assert "has its key= function's key only once it ran" in none.output
    alone = invoke(["cancel", globex[0], "--match", "globex"], env)  # (a bulk cancel's option)
    assert alone.exit_code == 2 and "--match selects among a bulk cancel's jobs" in alone.output


def test_cancel_json_says_the_status_after_the_cancel_and_the_one_before(flow):
    """`status` is what `jf status` says now, as for every other command; `status_before` what it was."""
    queued, finished, bulk = (flow.client.enqueue("f.ok", Item(name=n)).id for n in ("q", "f", "b"))
    env = cli_env(flow.config)
    one = invoke(["cancel", queued, "--json"], env)
    assert json.loads(one.output) == {
        "id": queued,
        "outcome": "cancelled",
        "status": "cancelled",
        "status_before": "queued",
    }
    assert flow.client.status(queued).status is JobState.CANCELLED

    flow.consume("high")  # runs the other two
    done = invoke(["cancel", finished, "--json"], env)
    assert done.exit_code == 1  # not cancelled: `jf cancel ID || ...` in a script sees it
    assert json.loads(done.output)["outcome"] == "finished"
    assert (json.loads(done.output)["status"], json.loads(done.output)["status_before"]) == ("succeeded",) * 2
    text = invoke(["cancel", finished], env)
    assert text.output.strip() == f"{finished}: too late, it had already ended: succeeded (nothing changed)"
    assert text.exit_code == 1
    again = invoke(["cancel", queued], env)  # a second cancel: the first one stands
    assert again.exit_code == 0 and again.output.strip() == f"{queued}: already cancelled (nothing changed)"

    later = flow.client.enqueue("f.ok", Item(name="later")).id
    many = invoke(["cancel", "--type", "f.ok", "--older-than", "0s", "--json"], env)
    [entry] = json.loads(many.output)["jobs"]  # not the two that ran (nor the one cancelled)
    assert entry["id"] == later and flow.client.status(bulk).status is JobState.SUCCEEDED
    assert (entry["outcome"], entry["status"], entry["status_before"]) == ("cancelled", "cancelled", "queued")


def test_cancel_arguments_are_checked(flow):
    env = cli_env(flow.config)
    none = invoke(["cancel"], env)
    assert none.exit_code == 2 and "give a job ID, or --type TYPE --older-than AGE" in none.output
    both = invoke(["cancel", "x", "--type", "f.ok"], env)
    assert both.exit_code == 2 and "either a job ID or --type" in both.output
    assert invoke(["cancel", "--type", "f.ok"], env).exit_code == 2  # --older-than is required
    with pytest.raises(ConfigurationError, match="1 to 128 characters"):
        flow.client.cancel("")


def test_a_second_copy_of_a_first_attempt_does_not_start_after_a_signalled_cancel(flow):
    """Two deliveries of one first attempt (SQS delivers at least once): the first runs and stops on its
    cancel (its key is released), the second claims the key, finds the marker and does not start."""
    job_id = flow.client.enqueue("f.stoppable", Item(name="twice")).id
    send_duplicate(flow.sqs, flow.url("default"))
    assert _cancel_once_started(flow, job_id, max_messages=1).outcome is CancelOutcome.SIGNALLED
    flow_jobs.started.clear()
    records, response = flow.consume("default")  # the other copy, a first attempt too
    assert len(records) == 1 and response == {"batchItemFailures": []}
    assert not flow_jobs.started.is_set()  # it did not start
    assert flow.client.status(job_id).status is JobState.CANCELLED
    assert [o.outcome for o in flow.outcomes] == ["skipped", "skipped"]


def test_cancelling_a_dead_job_says_how_to_keep_its_dead_letter_from_running_again(flow):
    """An operator's `jf cancel` of a dead job said only "too late": its letter stays in the DLQ and
    the next bulk redrive runs it again."""
    from jobframework.state import StateStore

    dead = flow.client.enqueue("f.flaky", Item(name="d")).id
    store = StateStore.of(flow.config, flow.dynamodb)
    store.jobs.set_status(dead, JobState.DEAD, job_type="f.flaky", error="ConnectionError: reset")
    parameter = flow.config.topology_parameter  # (as jf dev's exports: the catalog knows its lane)
    assert parameter
    said = invoke(["cancel", dead], {**cli_env(flow.config), "JF_TOPOLOGY_PARAMETER": parameter})
    assert said.exit_code == 1, said.output
    assert f"{dead}: too late, it had already ended: dead (nothing changed)" in said.stdout
    assert (
        "its dead letter stays in the default DLQ (or its priority's, if it was enqueued with priority=)"
        in (said.stderr)
    )
    assert f"jf dlq purge default --id {dead} --yes" in said.stderr
