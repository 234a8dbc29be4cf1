"""Job status is opt-in (issue 13, item 3): a tracked job's status is readable by id, an untracked
job's success path writes nothing to DynamoDB, and ``enqueue(..., track=)`` decides per job."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from jobframework.errors import ConfigurationError, EnqueueOptionError, UnknownJobError
from jobframework.jobs import JobRegistry, Schedule, job
from jobframework.scheduling import schedule_input
from jobframework.testing import FakeLambdaContext, receive_all
from jobframework.topology import ScheduleSpec

from .jobs_under_test import Work, calls, lean, ok


def _bodies(rt: Any) -> list[dict[str, Any]]:
    """The bodies on the high queue, left there (visible again) for the consumer."""
    messages = receive_all(rt.sqs, rt.url("high"))
    for m in messages:
        rt.sqs.change_message_visibility(
            QueueUrl=rt.url("high"), ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0
        )
    return [json.loads(m["Body"]) for m in messages]


def _dynamodb_calls(rt: Any) -> Counter[str]:
    """Every DynamoDB request the consumer makes from now on, by operation."""
    rt.handler._features()
    made: Counter[str] = Counter()
    assert rt.handler.state is not None
    rt.handler.state.client.meta.events.register(
        "before-call.dynamodb.*", lambda event_name, **_: made.update([event_name.rsplit(".", 1)[-1]])
    )
    return made


def test_an_untracked_job_runs_without_a_status_or_any_dynamodb_write(rt):
    made = _dynamodb_calls(rt)
    result = rt.client.enqueue(lean, Work(name="quiet"))
    assert "track" not in _bodies(rt)[0]  # nothing on the wire for the default
    assert rt.client.status(result.id) is None
    rt.consume("high")
    assert calls["quiet"] == 1
    assert rt.client.status(result.id) is None
    assert not made, made  # no status, no cancel claim, no budget write per batch


def test_a_tracked_job_reports_its_outcome(rt):
    result = rt.client.enqueue(ok, Work(name="seen"))
    before = rt.client.status(result.id)
    assert before is not None and before.status == "queued"
    rt.consume("high")
    after = rt.client.status(result.id)
    assert after is not None and after.status == "succeeded" and after.attempts == 1
    assert after.started_at and after.finished_at


def test_track_per_enqueue_overrides_the_jobs_option_both_ways(rt):
    tracked = rt.client.enqueue(lean, Work(name="asked"), track=True)
    untracked = rt.client.enqueue(ok, Work(name="not-asked"), track=False)
    assert {b["payload"]["name"]: b.get("track") for b in _bodies(rt)} == {"asked": True, "not-asked": None}
    rt.consume("high")
    status = rt.client.status(tracked.id)
    assert status is not None and status.status == "succeeded"
    assert rt.client.status(untracked.id) is None
    assert calls["asked"] == calls["not-asked"] == 1


def test_cancel_of_an_untracked_job_says_that_it_needs_tracking(rt):
    result = rt.client.enqueue(lean, Work(name="uncancellable"))
    with pytest.raises(
        UnknownJobError,
        match=r"not tracked.*track=True.*cancel works on tracked jobs only.*purge LANE --id \S+ --yes",
    ):
        rt.client.cancel(result.id)
    rt.consume("high")
    assert calls["uncancellable"] == 1  # the refused cancel changed nothing


def test_track_must_be_a_bool_on_the_decorator_and_per_enqueue(rt):
    with pytest.raises(ConfigurationError, match=r"job t\.bad: track must be True or False, got 'yes'"):

        @job("t.bad", registry=JobRegistry(), track="yes")  # type: ignore[arg-type]
        def bad(work: Work) -> None: ...

    with pytest.raises(EnqueueOptionError, match=r"track must be True or False, got 1"):
        rt.client.enqueue(ok, Work(name="x"), track=1)  # type: ignore[arg-type]
    assert _bodies(rt) == []


def test_a_bad_priority_or_key_of_an_enqueue_is_an_option_error_and_sends_nothing(rt):
    with pytest.raises(EnqueueOptionError, match=r"unknown priority 'urgent'; use one of"):
        rt.client.enqueue(ok, Work(name="x"), priority="urgent")
    with pytest.raises(EnqueueOptionError, match=r"key must be a non-empty str"):
        rt.client.enqueue(ok, Work(name="x"), key="")
    assert _bodies(rt) == []


def test_a_tracked_schedule_sends_track_with_every_firing_and_an_untracked_one_does_not():
    spec = ScheduleSpec(
        job="t.ok", name="n", expression="rate(1 hour)", timezone="UTC", payload={}, priority="high"
    )
    assert "track" not in json.loads(schedule_input(spec))
    assert json.loads(schedule_input(spec.model_copy(update={"track": True})))["track"] is True


def test_a_lean_batch_of_ten_makes_no_dynamodb_request(rt):
    made = _dynamodb_calls(rt)
    rt.client.enqueue_many([lean.request(Work(name=f"n{i}")) for i in range(10)])
    records, response = rt.consume("high")
    assert len(records) == 10 and response == {"batchItemFailures": []}
    assert not made, made
    assert rt.handler({"Records": []}, FakeLambdaContext()) == {"batchItemFailures": []}


NIGHTLY = Schedule("rate(1 day)", payload={"name": "nightly"})


def test_scheduled_jobs_are_tracked_unless_told_otherwise() -> None:
    registry = JobRegistry()

    @job("t.nightly", registry=registry, schedule=NIGHTLY)
    def nightly(work: Work) -> None: ...

    @job("t.quiet_nightly", registry=registry, schedule=NIGHTLY, track=False)
    def quiet_nightly(work: Work) -> None: ...

    @job("t.plain", registry=registry)
    def plain(work: Work) -> None: ...

    # The console's last-run, heartbeat and missed-run views read a schedule's statuses.
    assert (nightly.track, quiet_nightly.track, plain.track) == (True, False, False)
