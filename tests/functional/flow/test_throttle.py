"""A job that raises Throttled (a 429 and its Retry-After) is handed back, not failed: no attempt,
no retry budget, its status says so, and a job with rate= holds its rate's other runs until then."""

from __future__ import annotations

import time
from typing import Any

from jobframework.budget import budget_state
from jobframework.budget_keys import budget_key
from jobframework.delivery import Outcome
from jobframework.envelope import ATTR_RATE_SLOT, Envelope
from jobframework.flow.rate_bucket import RateLimit
from jobframework.state import JobState, StateStore
from jobframework.testing import receive_all, sqs_record
from jobframework.throttle import ATTR_THROTTLED, THROTTLE_WINDOW_SECONDS

from . import flow_jobs
from .flow_jobs import Item


def _until(flow: Any, done: Any, lane: str = "default", seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, [(o.outcome, o.reason) for o in flow.outcomes]
        flow.consume(lane, wait_seconds=1)


def test_a_throttled_job_comes_back_after_its_delay_with_no_attempt_spent(flow):
    result = flow.client.enqueue(flow_jobs.throttled, Item(name="acme", fail_times=2))
    flow.consume("default")
    status = flow.client.status(result.id)
    assert status.status is JobState.RETRYING and status.attempts == 0
    assert status.error is not None and status.error.startswith("throttled: "), status.error
    assert "429 Too Many Requests from the CRM" in status.error

    _until(flow, lambda: any(o.outcome == Outcome.SUCCEEDED for o in flow.outcomes))
    assert [(o.outcome, o.reason) for o in flow.outcomes] == [
        (Outcome.RELEASED, "throttled"),
        (Outcome.RELEASED, "throttled"),
        (Outcome.SUCCEEDED, None),
    ]
    assert [o.delay for o in flow.outcomes[:2]] == [1, 1]
    assert [r["attempt"] for r in flow_jobs.ran] == [1, 1, 1]  # max_attempts=1, and it got through
    done = flow.client.status(result.id)
    assert done.status is JobState.SUCCEEDED and done.attempts == 1 and done.result == "synced"
    assert receive_all(flow.sqs, flow.url("default"), attempts=1) == []


def test_a_throttle_spends_no_retry_budget(flow):
    flow.client.enqueue(flow_jobs.throttled, Item(name="globex", fail_times=2))
    _until(flow, lambda: any(o.outcome == Outcome.SUCCEEDED for o in flow.outcomes))
    flow.client.enqueue(flow_jobs.flaky, Item(name="control", fail_times=1))  # a retry does spend
    _until(flow, lambda: sum(o.outcome == Outcome.SUCCEEDED for o in flow.outcomes) == 2)
    now = time.time()
    named = budget_state(flow.handler.state, str(budget_key("crm-api", None, "")), 0.2, now)
    queue = budget_state(flow.handler.state, flow.config.endpoints("default").name, 0.2, now)
    assert named is not None and queue is not None
    assert (named.retries, queue.retries) == (0, 1)


def test_throttles_past_the_window_are_failures_again(flow):
    """A downstream that never recovers: an hour after the first throttle, one is an attempt."""
    env = Envelope.new("f.throttled", {"name": "initech", "fail_times": 99}, track=False)
    since = time.time() - THROTTLE_WINDOW_SECONDS - 60
    record = sqs_record(
        env,
        queue_arn=flow.sqs.get_queue_attributes(QueueUrl=flow.url("default"), AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"],
        message_attributes={ATTR_THROTTLED: f"40:{since:.3f}"},
    )
    response = flow.handler({"Records": [record]}, None)
    assert response == {"batchItemFailures": []}
    [outcome] = flow.outcomes
    assert outcome.outcome == Outcome.DEAD_LETTERED and outcome.reason == "exhausted"  # max_attempts=1
    assert "429" in (outcome.error or "")


def test_a_throttle_holds_the_rate_of_its_group_until_its_retry_after(flow):
    flow.client.enqueue(flow_jobs.throttled_rated, Item(name="first", fail_times=1))
    flow.consume("default")
    thrown_at = time.time()
    [(outcome, reason)] = [(o.outcome, o.reason) for o in flow.outcomes]
    assert (outcome, reason) == (Outcome.RELEASED, "throttled")

    flow.client.enqueue_many([flow_jobs.throttled_rated.request(Item(name=f"next{n}")) for n in range(3)])
    flow.consume("default")  # they would run at 10/second: the hold hands them back instead
    assert {"next0", "next1", "next2"}.isdisjoint(flow_jobs.calls)
    later = [o for o in flow.outcomes[1:]]
    assert [o.reason for o in later] == ["rate limit"] * 3
    assert all(thrown_at + 4 - 2 <= time.time() + o.delay <= thrown_at + 4 + 3 for o in later), [
        o.delay for o in later
    ]


def test_a_hold_gives_the_first_token_at_its_end_and_the_next_an_interval_apart(flow):
    rate = RateLimit(StateStore(str(flow.config.state_table), flow.dynamodb))
    now = time.time()
    rate.hold("limit#held", now + 5, 10, 1)
    assert 4.9 <= rate.acquire("limit#held", 10, 1, now) <= 5.0
    assert 4.9 + 0.1 <= rate.acquire("limit#held", 10, 1, now) <= 5.1
    rate.hold("limit#held", now + 2, 10, 1)  # a shorter hold changes nothing
    other = RateLimit(StateStore(str(flow.config.state_table), flow.dynamodb))  # another consumer
    assert 5.0 <= other.acquire("limit#held", 10, 1, now) <= 5.3


def test_turns_reserved_before_a_hold_do_not_start_within_it(flow):
    """A trial's 20 jobs at 4/second had reserved their turns before the 429: each started at its turn,
    and a throttled job's copy kept its spent turn and started again at once: 34 calls told 429."""
    arn = flow.sqs.get_queue_attributes(QueueUrl=flow.url("default"), AttributeNames=["QueueArn"])
    sent: list[dict[str, Any]] = []
    flow.sqs.meta.events.register(
        "provide-client-params.sqs.SendMessageBatch", lambda params, **_: sent.extend(params["Entries"])
    )

    def with_turn(name: str, turn: float, fail_times: int = 0) -> dict[str, Any]:
        env = Envelope.new("f.throttled_rated", {"name": name, "fail_times": fail_times})
        return sqs_record(
            env,
            queue_arn=arn["Attributes"]["QueueArn"],
            message_attributes={ATTR_RATE_SLOT: f"{turn:.3f}:1"},
        )

    now = time.time()
    flow.handler({"Records": [with_turn("first", now, fail_times=1)]}, None)  # its turn: it runs, 429
    [copy] = sent
    assert ATTR_RATE_SLOT not in copy["MessageAttributes"]  # its spent turn is not carried
    assert copy["MessageAttributes"][ATTR_THROTTLED]["StringValue"].startswith("1:")
    flow.handler({"Records": [with_turn("second", now + 0.3)]}, None)  # reserved before the hold
    assert "second" not in flow_jobs.calls
    later = flow.outcomes[-1]
    assert (later.outcome, later.reason) == (Outcome.RELEASED, "rate limit")
    turn = float(sent[-1]["MessageAttributes"][ATTR_RATE_SLOT]["StringValue"].split(":")[0])
    assert turn >= now + 4 - 0.5, turn - now  # a turn anew, at the hold's end


def test_a_throttled_job_that_claimed_its_start_reads_retrying_and_a_cancel_cancels_it(flow):
    """A review's probe: a tracked job that is not idempotent (its start is the cancel gate's claim)
    read `running` after its throttle, and `jf cancel` answered `signalled`."""
    result = flow.client.enqueue(flow_jobs.throttled_long, Item(name="claimed", fail_times=1))
    flow.consume("default")
    status = flow.client.status(result.id)
    assert status is not None and status.status is JobState.RETRYING, status
    assert flow.client.cancel(result.id).outcome.value == "cancelled"


def test_a_retry_after_over_15_minutes_is_waited_out_and_a_fifo_lanes_throttle_is_a_retry(flow):
    arn = flow.sqs.get_queue_attributes(QueueUrl=flow.url("default"), AttributeNames=["QueueArn"])
    queue_arn = arn["Attributes"]["QueueArn"]
    sent: list[dict[str, Any]] = []
    flow.sqs.meta.events.register(
        "provide-client-params.sqs.SendMessageBatch", lambda params, **_: sent.extend(params["Entries"])
    )
    env = Envelope.new("f.throttled_long", {"name": "hour", "fail_times": 1})
    before = time.time()
    flow.handler({"Records": [sqs_record(env, queue_arn=queue_arn)]}, None)
    [copy] = sent
    assert copy["DelaySeconds"] == 900  # SQS's longest delay
    count, _, until = copy["MessageAttributes"][ATTR_THROTTLED]["StringValue"].split(":")
    assert count == "1" and before + 3599 <= float(until) <= time.time() + 3601
    assert flow.outcomes[-1].delay == 3600

    back = sqs_record(
        env, queue_arn=queue_arn, message_attributes={ATTR_THROTTLED: f"1:{before:.3f}:{until}"}
    )
    flow.handler({"Records": [back]}, None)  # 15 minutes later, 45 before its Retry-After ends
    assert flow_jobs.calls["hour"] == 1  # not run again
    assert (flow.outcomes[-1].outcome, flow.outcomes[-1].reason) == (Outcome.RELEASED, "throttled")
    assert sent[-1]["DelaySeconds"] == 900

    fifo = sqs_record(
        Envelope.new("f.throttled_long", {"name": "ordered", "fail_times": 1}), queue_arn=queue_arn + ".fifo"
    )
    flow.handler({"Records": [fifo]}, None)
    assert flow.outcomes[-1].outcome == Outcome.RETRIED  # (an attempt: in place, carrying nothing)
