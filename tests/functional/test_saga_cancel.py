"""Cancelling a running saga: at a wait it rolls back at once; a step that is queued or running ends
first and is compensated too; steps not reached never run; a saga that ended does not take it."""

from __future__ import annotations

from jobframework.saga import SagaStatus

from . import saga_jobs
from .test_saga import drive, ended


def test_a_saga_cancelled_at_its_wait_compensates_at_once_and_never_runs_what_follows(srt):
    saga_id = saga_jobs.approval_later_saga.start({"order_id": "c-1"}, client=srt.client)
    drive(srt, saga_id, lambda r: r.steps[1].state.value == "waiting")

    assert saga_jobs.approval_later_saga.cancel(saga_id, "customer withdrew", client=srt.client)
    record = drive(srt, saga_id, ended)

    assert record.status is SagaStatus.COMPENSATED
    assert record.reason == "cancelled: customer withdrew" and record.cancel_requested_at
    charge_, approval, notify_ = record.steps
    assert approval.state.value == "cancelled" and notify_.state.value == "pending"
    assert charge_.compensation_state.value == "compensated"
    assert saga_jobs.events == ["charge:c-1", "refund ch-c-1:c-1"]  # notify never ran
    # A signal, or a second cancel, is not taken by a saga that was cancelled.
    assert not saga_jobs.approval_later_saga.signal(saga_id, "approval", client=srt.client)
    assert not saga_jobs.approval_later_saga.cancel(saga_id, client=srt.client)


def test_a_saga_cancelled_while_a_step_is_queued_lets_it_end_then_undoes_it_too(srt):
    saga_id = saga_jobs.order_saga.start({"order_id": "c-2"}, client=srt.client)
    drive(srt, saga_id, lambda r: r.steps[1].state.value == "queued")  # charge done, reserve queued

    assert saga_jobs.order_saga.cancel(saga_id, client=srt.client)
    waiting = srt.client.saga_status(saga_id)
    assert waiting.status is SagaStatus.RUNNING and waiting.cancel_requested_at  # reserve may be running
    record = drive(srt, saga_id, ended)

    assert record.status is SagaStatus.COMPENSATED and record.reason == "cancelled"
    assert saga_jobs.events == ["charge:c-2", "reserve:c-2", "release rs-sku-1:c-2", "refund ch-c-2:c-2"]
    assert record.steps[2].state.value == "pending"  # notify never ran


def test_a_saga_whose_queued_step_fails_after_the_cancel_says_both(srt):
    saga_id = saga_jobs.order_saga.start({"order_id": "c-3", "fail_at": "reserve"}, client=srt.client)
    drive(srt, saga_id, lambda r: r.steps[1].state.value == "queued")
    assert saga_jobs.order_saga.cancel(saga_id, "duplicate order", client=srt.client)
    record = drive(srt, saga_id, ended)
    assert record.status is SagaStatus.COMPENSATED
    assert record.reason == "cancelled: duplicate order, then step s.reserve failed (permanent)"
    assert saga_jobs.events == ["charge:c-3", "reserve:c-3", "refund ch-c-3:c-3"]


def test_jf_saga_cancel_cancels_and_exits_1_when_the_saga_does_not_take_it(srt):
    from tests.functional.conftest_local import cli_env, invoke

    env = {**cli_env(srt.config), "JF_JOBS": "tests.functional.saga_jobs"}
    saga_id = saga_jobs.approval_later_saga.start({"order_id": "c-4"}, client=srt.client)
    drive(srt, saga_id, lambda r: r.steps[1].state.value == "waiting")

    taken = invoke(["saga", "cancel", saga_id, "--reason", "ops asked"], env)
    again = invoke(["saga", "cancel", saga_id, "--json"], env)
    unknown = invoke(["saga", "cancel", "nope"], env)

    assert taken.exit_code == 0 and f"saga {saga_id} is cancelled" in taken.output, taken.output
    assert again.exit_code == 1 and '"cancelled": false' in again.output
    assert "did not take the cancel" in again.output
    assert unknown.exit_code == 1 and "no saga nope" in unknown.output
    record = drive(srt, saga_id, ended)
    assert record.status is SagaStatus.COMPENSATED and record.reason == "cancelled: ops asked"
