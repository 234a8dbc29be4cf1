"""One contract, two implementations of a job's records: the state table on the embedded AWS and the
in-memory twin the pipeline's unit tests use. Whatever passes here behaves the same in both."""

from __future__ import annotations

import json
import time

import pytest

from jobframework.status import JobState
from jobframework.stores.job_records import JobRecords, StartCheck, StartClaim
from jobframework.stores.job_records_dynamodb import DynamoJobRecords
from jobframework.stores.job_records_memory import InMemoryJobRecords
from tests.functional.conftest_local import state_table


@pytest.fixture(params=["dynamodb", "in-memory"])
def records(request: pytest.FixtureRequest) -> JobRecords:
    if request.param == "in-memory":
        return InMemoryJobRecords()
    table, dynamodb = state_table(request.getfixturevalue("jf_aws"))
    return DynamoJobRecords(table, dynamodb)


def test_an_id_without_records_has_no_status(records):
    assert records.get_status("nope") is None


def test_queued_then_outcomes(records):
    records.set_status(
        "j1", JobState.QUEUED, job_type="t.a", attempts=0, key="k1", enqueued_at="2026-12-04T00:00"
    )
    queued = records.get_status("j1")
    assert queued is not None
    assert (queued.status, queued.type, queued.attempts, queued.key) == (JobState.QUEUED, "t.a", 0, "k1")
    assert queued.finished_at is None
    records.set_status("j1", JobState.RETRYING, attempts=1, error="ConnectionError: reset")
    records.set_status("j1", JobState.SUCCEEDED, attempts=2, result=json.dumps({"rows": 3}))
    done = records.get_status("j1")
    assert done is not None
    assert (done.status, done.attempts, done.result, done.error) == (JobState.SUCCEEDED, 2, {"rows": 3}, None)
    assert done.finished_at is not None and done.enqueued_at == "2026-12-04T00:00" and done.type == "t.a"


@pytest.mark.parametrize("later", [JobState.RUNNING, JobState.SUCCEEDED, JobState.DEAD])
def test_a_late_queued_does_not_move_a_job_back(records, later):
    records.set_status("j2", later, attempts=1)
    records.set_status("j2", JobState.QUEUED, job_type="t.a", attempts=0)
    status = records.get_status("j2")
    assert status is not None and status.status is later


def test_started_at_is_set_once(records):
    records.set_status("j3", JobState.RUNNING, attempts=1)
    first = records.get_status("j3")
    time.sleep(0.01)
    records.set_status("j3", JobState.RUNNING, attempts=2)
    again = records.get_status("j3")
    assert first is not None and again is not None
    assert again.started_at == first.started_at and again.attempts == 2


def test_whole_records_written_together(records):
    records.put_statuses(
        [
            {"id": "a", "status": JobState.SUCCEEDED, "type": "t.a", "attempts": 1, "result": '"ok"'},
            {"id": "b", "status": JobState.DEAD, "type": "t.b", "attempts": 3, "reason": "exhausted"},
            {"id": "c", "status": JobState.RETRYING, "attempts": 1, "error": "boom", "trace_id": "ab" * 16},
        ]
    )
    a, b, c = (records.get_status(i) for i in "abc")
    assert a is not None and (a.status, a.type, a.attempts, a.result) == (JobState.SUCCEEDED, "t.a", 1, "ok")
    assert b is not None and (b.status, b.reason, b.attempts) == (JobState.DEAD, "exhausted", 3)
    assert c is not None and (c.status, c.error, c.trace_id) == (JobState.RETRYING, "boom", "ab" * 16)


def test_a_claimed_run_reads_as_running_until_its_deadline(records):
    now = time.time()
    records.set_status("j4", JobState.QUEUED, job_type="t.a", attempts=0)
    time.sleep(0.005)  # the start comes later than the enqueue
    assert records.claim_start("j4", attempt=1, runs_until=now + 30, now=now)
    running = records.get_status("j4")
    assert running is not None and (running.status, running.attempts) == (JobState.RUNNING, 1)
    assert running.started_at is not None
    assert running.updated_at == running.started_at  # the start is its latest change, not the enqueue
    assert records.claim_start("j4", attempt=2, runs_until=now - 1, now=now)  # its deadline has passed
    after = records.get_status("j4")
    assert after is not None and after.status is JobState.QUEUED
    # A run cut off (its worker killed) says so: it read `queued, attempts 0` as if nothing had run.
    assert after.attempts == 2 and after.reason is not None
    assert after.reason.startswith("attempt 2, started at ") and "ended without an outcome" in after.reason
    records.lapse_claim("j4", died_at="9999")  # a redrive's lapse: its own status reason stands
    assert records.get_status("j4").reason is None  # type: ignore[union-attr]


def test_a_retrying_job_is_running_only_once_a_later_attempt_claims_its_start(records):
    now = time.time()
    records.set_status("j5", JobState.RUNNING, attempts=1)
    assert records.claim_start("j5", attempt=1, runs_until=now + 30, now=now)
    records.set_status("j5", JobState.RETRYING, attempts=1, error="boom")
    retrying = records.get_status("j5")
    assert retrying is not None and retrying.status is JobState.RETRYING  # attempt 1 ended
    assert records.claim_start("j5", attempt=2, runs_until=now + 30, now=now)
    second = records.get_status("j5")
    assert second is not None and (second.status, second.attempts) == (JobState.RUNNING, 2)


def test_a_cancel_marker_refuses_every_later_start(records):
    now = time.time()
    assert not records.cancel_marked("j6")
    assert records.mark_cancelled("j6", now) == StartClaim(0.0, 0)
    assert records.cancel_marked("j6")
    assert not records.claim_start("j6", attempt=1, runs_until=now + 30, now=now)
    assert records.mark_cancelled("j6", now) == StartClaim(0.0, 0)  # again: nothing changes


def test_a_start_check_reads_the_cancel_marker_and_whether_a_status_item_exists(records):
    now = time.time()
    assert records.start_check("j9") == StartCheck(cancelled=False, has_status=False)
    records.set_status("j9", JobState.QUEUED, job_type="t.nap")
    assert records.start_check("j9") == StartCheck(cancelled=False, has_status=True)
    records.mark_cancelled("j9", now)
    assert records.start_check("j9") == StartCheck(cancelled=True, has_status=True)
    records.mark_cancelled("j10", now)  # a cancel of a job with no status item
    assert records.start_check("j10") == StartCheck(cancelled=True, has_status=False)


def test_a_cancel_after_a_start_sees_the_claim(records):
    now = time.time()
    assert records.claim_start("j7", attempt=2, runs_until=now + 30, now=now)
    claim = records.mark_cancelled("j7", now)
    assert claim.started_attempt == 2 and claim.runs_until == pytest.approx(now + 30, abs=1e-3)


def test_finishing_a_cancel_does_not_undo_another_final_state(records):
    records.set_status("j8", JobState.SUCCEEDED, attempts=1)
    records.finish_cancelled("j8", "cancelled before it started")
    done = records.get_status("j8")
    assert done is not None and done.status is JobState.SUCCEEDED
    records.set_status("j9", JobState.QUEUED, job_type="t.a", attempts=0)
    records.finish_cancelled("j9", "cancelled before it started")
    cancelled = records.get_status("j9")
    assert cancelled is not None
    assert (cancelled.status, cancelled.reason, cancelled.type) == (
        JobState.CANCELLED,
        "cancelled before it started",
        "t.a",
    )
    assert cancelled.finished_at is not None


def test_a_status_and_its_cancel_last_as_long_as_asked(records):
    now = time.time()
    month = 30 * 24 * 3600
    due = "2027-01-03T00:00:00+00:00"
    records.set_status(
        "j10", JobState.SCHEDULED, job_type="t.a", attempts=0, run_at=due, ttl=7 * 24 * 3600 + month
    )
    scheduled = records.get_status("j10")
    assert scheduled is not None and scheduled.expires_at is not None and scheduled.run_at == due
    assert abs(scheduled.expires_at - (now + 7 * 24 * 3600 + month)) < 5
    records.finish_cancelled("j10", "cancelled before it started", keep_until=scheduled.expires_at)
    cancelled = records.get_status("j10")
    assert cancelled is not None and cancelled.expires_at == scheduled.expires_at
    records.set_status("j11", JobState.QUEUED, job_type="t.a", attempts=0)
    records.finish_cancelled("j11", "cancelled before it started", keep_until=now)  # earlier: 7 days
    soon = records.get_status("j11")
    assert soon is not None and soon.expires_at is not None
    assert abs(soon.expires_at - (now + 7 * 24 * 3600)) < 5


def test_a_start_claim_undone_reads_queued_again_and_only_its_own_claim_is_undone(records):
    """A run that did not start (its key held by another job's run) undoes its start claim: the job
    reads queued, not running, and a later cancel finds no run to signal."""
    records.set_status("j-u", JobState.QUEUED, job_type="t.a", attempts=0)
    now = time.time()
    assert records.claim_start("j-u", attempt=1, runs_until=now + 60, now=now, claimant="waiter")
    running = records.get_status("j-u")
    assert running is not None and (running.status, running.attempts) == (JobState.RUNNING, 1)
    records.unclaim_start("j-u", claimant="someone-else")  # not its claim: nothing changes
    still = records.get_status("j-u")
    assert still is not None and still.status is JobState.RUNNING
    records.unclaim_start("j-u", claimant="waiter")
    queued = records.get_status("j-u")
    assert queued is not None and (queued.status, queued.attempts, queued.started_at) == (
        JobState.QUEUED,
        0,
        None,
    )
    assert records.mark_cancelled("j-u", time.time()) == StartClaim(0.0, 0)
    records.unclaim_start("never-claimed", claimant="waiter")  # no record at all: nothing made
    assert records.get_status("never-claimed") is None


def test_a_second_delivery_of_a_running_job_neither_takes_nor_undoes_its_claim(records):
    """Review: two deliveries of one job (an SQS duplicate, a copy whose original's delete failed): the
    second finds the key held and undid the claim, so the running job read queued and a cancel said
    cancelled, not signalled."""
    records.set_status("j-d", JobState.QUEUED, job_type="t.a", attempts=0)
    now = time.time()
    assert records.claim_start("j-d", attempt=1, runs_until=now + 60, now=now, claimant="first")
    assert records.claim_start("j-d", attempt=1, runs_until=now + 61, now=now + 1, claimant="second")
    records.unclaim_start("j-d", claimant="second")
    status = records.get_status("j-d")
    assert status is not None and (status.status, status.attempts) == (JobState.RUNNING, 1)
    claim = records.mark_cancelled("j-d", time.time())  # the first delivery's claim: a run to signal
    assert claim.started_attempt == 1 and claim.runs_until == pytest.approx(now + 60, abs=0.01)


def test_a_later_attempt_or_a_lapsed_claim_is_claimed_anew(records):
    now = time.time()
    assert records.claim_start("j-l", attempt=1, runs_until=now + 60, now=now, claimant="crashed")
    assert records.claim_start("j-l", attempt=2, runs_until=now + 60, now=now, claimant="retry")
    records.unclaim_start("j-l", claimant="retry")  # its own: the job reads as before any claim
    assert records.mark_cancelled("j-l", time.time()) == StartClaim(0.0, 0)


def test_a_repeated_cancel_changes_nothing(records):
    """A trial's second `jf cancel` said "already cancelled (nothing changed)" and moved the job's
    finished_at and updated_at."""
    records.set_status("j-c", JobState.QUEUED, job_type="t.a", attempts=0)
    records.finish_cancelled("j-c", "cancelled before it started")
    first = records.get_status("j-c")
    time.sleep(0.01)
    records.finish_cancelled("j-c", "cancelled again")
    again = records.get_status("j-c")
    assert first is not None and again is not None and first.status is JobState.CANCELLED
    assert (again.finished_at, again.updated_at, again.reason) == (
        first.finished_at,
        first.updated_at,
        first.reason,
    )


def test_a_redrive_requeues_a_dead_job_only(records):
    records.set_status("r1", JobState.QUEUED, job_type="t.a", attempts=0)
    records.set_status("r1", JobState.DEAD, attempts=3, error="RuntimeError: boom", reason="exhausted")
    assert records.requeue("r1", "redriven from the high DLQ (it died: exhausted)") is True
    back = records.get_status("r1")
    assert back is not None and back.status is JobState.QUEUED
    assert (back.reason, back.error, back.attempts, back.finished_at) == (
        "redriven from the high DLQ (it died: exhausted)",
        "RuntimeError: boom",
        3,
        None,
    )
    records.set_status("r2", JobState.SUCCEEDED, attempts=1)  # run again already: left as it is
    assert records.requeue("r2", "redriven") is False
    assert records.requeue("never-seen", "redriven") is False and records.get_status("never-seen") is None
    assert records.get_status("r2").status is JobState.SUCCEEDED  # type: ignore[union-attr]


def test_a_requeued_job_does_not_read_running_on_its_dead_runs_claim(records):
    """A trial redrove a job a minute after it died: it read running (its dead run's claim was still
    within its deadline), and a cancel answered "signalled"."""
    from jobframework.status import now_iso

    now = time.time()
    records.set_status("r3", JobState.QUEUED, job_type="t.a", attempts=0)
    assert records.claim_start("r3", attempt=1, runs_until=now + 60, now=now, claimant="dead-run")
    records.set_status("r3", JobState.DEAD, attempts=1, reason="permanent")
    time.sleep(0.01)
    died = now_iso()
    records.lapse_claim("r3", died_at=died)
    assert records.requeue("r3", "redriven") is True
    assert records.get_status("r3").status is JobState.QUEUED  # type: ignore[union-attr]
    assert records.claim_start("r3", attempt=1, runs_until=time.time() + 60, now=time.time(), claimant="new")
    assert records.get_status("r3").status is JobState.RUNNING  # type: ignore[union-attr]


def test_claims_gives_the_flow_items_of_the_jobs_that_have_one(records):
    now = time.time()
    records.set_status("c1", JobState.QUEUED, job_type="t.a", attempts=0)
    records.set_status("c2", JobState.QUEUED, job_type="t.a", attempts=0)
    assert records.claim_start("c1", attempt=1, runs_until=now + 60, now=now, claimant="x")
    claims = records.claims(["c1", "c2", "c1"])
    assert list(claims) == ["c1"] and float(claims["c1"]["runs_until"]) == pytest.approx(now + 60)
    assert records.claims([]) == {}
