"""Rate tokens taken for a batch's records together: one conditional update for a batch of one job
type (up to the bucket's burst), none lost when a record of the batch does not reach the gate."""

from __future__ import annotations

import time
from typing import Any

import pytest

from jobframework.flow.rate_bucket import POOL_SECONDS, RateLimit
from jobframework.state import StateStore

from . import flow_jobs
from .flow_jobs import Item


@pytest.fixture
def rate_updates(flow) -> list[str]:
    """The keys of the consumer's conditional updates of rate buckets (``limit#<job>[#<key>]``)."""
    seen: list[str] = []

    def note(params: dict[str, Any], **_: Any) -> None:
        if params.get("Key", {}).get("sk", {}).get("S") == "rate":
            seen.append(params["Key"]["pk"]["S"])

    hooks = flow.handler.aws.client("dynamodb").meta.events
    hooks.register("before-parameter-build.dynamodb.UpdateItem", note)
    return seen


def test_a_batch_of_one_job_type_takes_its_tokens_in_one_update(flow, rate_updates):
    flow.client.enqueue_many([flow_jobs.fast.request(Item(name=f"f{n}")) for n in range(10)])
    records, response = flow.consume("default", max_messages=10)
    assert len(records) == 10 and response == {"batchItemFailures": []}
    assert sorted(r["name"] for r in flow_jobs.ran) == sorted(f"f{n}" for n in range(10))
    assert rate_updates == ["limit#f.fast"]  # ten tokens, one request


def test_the_tokens_taken_together_are_the_batchs_records_only(flow, rate_updates):
    """The bucket moves by ten intervals for ten records: the limit counts every start, once."""
    before = time.time()
    flow.client.enqueue_many([flow_jobs.fast.request(Item(name=f"f{n}")) for n in range(10)])
    flow.consume("default", max_messages=10)
    item = flow.dynamodb.get_item(
        TableName=flow.config.state_table,
        Key={"pk": {"S": "limit#f.fast"}, "sk": {"S": "rate"}},
        ConsistentRead=True,
    )["Item"]
    tat = float(item["tat"]["N"])
    interval = 60 / 600
    assert before + 10 * interval <= tat <= time.time() + 10 * interval


def test_a_job_with_a_rate_key_takes_one_token_a_record(flow, rate_updates):
    flow.client.enqueue_many(
        [flow_jobs.fast_keyed.request(Item(name=f"k{n}", tenant=f"t{n % 2}")) for n in range(6)]
    )
    records, _ = flow.consume("default", max_messages=10)
    assert len(records) == 6 and len(flow_jobs.ran) == 6
    assert sorted(rate_updates) == ["limit#f.fast_keyed#t0"] * 3 + ["limit#f.fast_keyed#t1"] * 3


def test_tokens_a_batch_did_not_use_go_back_in_the_next_update(flow):
    """6000/hour (one token each 0.6 s, a burst of 300): five tokens taken for five records, three
    used; once the pool's time is up, the next update gives the two back."""
    limit = RateLimit(StateStore(flow.config.state_table, flow.dynamodb))
    pk, interval = "limit#surplus", 3600 / 6000
    now = time.time()
    assert [limit.acquire(pk, 6000, 3600, now, want=5) for _ in range(3)] == [0.0, 0.0, 0.0]
    later = now + POOL_SECONDS  # the pool's two tokens are no longer handed out
    assert limit.acquire(pk, 6000, 3600, later, want=1) == 0.0
    item = flow.dynamodb.get_item(
        TableName=flow.config.state_table,
        Key={"pk": {"S": pk}, "sk": {"S": "rate"}},
        ConsistentRead=True,
    )["Item"]
    # Four tokens used: the bucket is four intervals past the first take (five plus one would be six).
    assert float(item["tat"]["N"]) == pytest.approx(now + 4 * interval, abs=1e-5)


def test_a_bucket_short_of_the_batch_gives_what_it_has_and_a_wait_for_the_rest(flow):
    """600/minute has a burst of 30: a batch asking 40 gets 30, the 31st waits about an interval."""
    limit = RateLimit(StateStore(flow.config.state_table, flow.dynamodb))
    now = time.time()
    got = [limit.acquire("limit#short", 600, 60, now, want=40) for _ in range(31)]
    assert got[:30] == [0.0] * 30
    assert got[30] == pytest.approx(60 / 600, abs=1e-3)


def _gate_and_job(flow, rate: str) -> tuple[Any, Any]:
    from jobframework import job
    from jobframework.flow.limits import LimitGate
    from jobframework.jobs import JobRegistry

    @job("r.turns", registry=JobRegistry(), idempotent=False, rate=rate)
    def turns(item: Item) -> None: ...

    return LimitGate(StateStore(flow.config.state_table, flow.dynamodb)), turns


def _tat(flow, pk: str) -> float:
    item = flow.dynamodb.get_item(
        TableName=flow.config.state_table, Key={"pk": {"S": pk}, "sk": {"S": "rate"}}, ConsistentRead=True
    )["Item"]
    return float(item["tat"]["N"])


def test_a_record_that_cannot_carry_a_turn_reserves_none(flow):
    """A FIFO lane hands back in place (no attribute): a refusal there must not move the bucket, or
    each hand-back would push its own turn further off and it would never run (10/minute: burst 1)."""
    from jobframework.envelope import Envelope
    from jobframework.flow.outcome import RateInputs

    gate, job = _gate_and_job(flow, "10/minute")
    env, payload, now = Envelope.new("r.turns", {"name": "a"}), Item(name="a"), time.time()
    assert gate(env, job, payload, 1, now) is None  # the burst's token
    before = _tat(flow, "limit#r.turns")
    waits = [gate(env, job, payload, 1, now + t, rate=RateInputs(can_carry=False)) for t in (0, 1, 2)]
    assert all(w is not None and w.rate_slot is None for w in waits), waits
    assert [w.delay for w in waits if w is not None] == [6, 5, 4]  # the next token, nearer each time
    assert _tat(flow, "limit#r.turns") == before  # nothing reserved


def test_a_record_back_late_starts_on_its_turn_and_takes_no_token_again(flow):
    """A turn missed because its consumers were busy (or a batching window held the record) is still
    its token: it starts, the bucket does not move, and a second late record does the same (taking a
    new token, or the back of the queue, would waste the reserved one and starve the job type)."""
    from jobframework.envelope import Envelope
    from jobframework.flow.outcome import RateInputs

    gate, job = _gate_and_job(flow, "10/minute")
    env, payload, now = Envelope.new("r.turns", {"name": "a"}), Item(name="a"), time.time()
    assert gate(env, job, payload, 1, now) is None  # the burst's token
    tat = _tat(flow, "limit#r.turns")
    for late in (now - 30, now - 6):
        assert gate(env, job, payload, 1, now, rate=RateInputs(reserved=late)) is None
    assert _tat(flow, "limit#r.turns") == tat
    future = gate(env, job, payload, 1, now, rate=RateInputs(reserved=now + 20))
    assert future is not None and future.rate_slot == now + 20 and future.delay == 19  # not yet


def test_a_carried_turn_that_is_no_time_is_ignored():
    from jobframework.flow.limits import rate_slot

    assert rate_slot("1700000000.250:2", 2) == 1700000000.25
    assert rate_slot("1700000000.250:2", 3) is None  # taken for another attempt
    for forged in ("nan:1", "inf:1", "-inf:1", "x:1", "1.0", ""):
        assert rate_slot(forged, 1) is None, forged


def test_a_token_taken_with_no_time_to_wait_is_not_handed_back(flow):
    """With no time to spare (may_wait < 0) a record waits for no turn, but one it holds now runs."""
    from jobframework.envelope import Envelope
    from jobframework.flow.outcome import RateInputs

    gate, job = _gate_and_job(flow, "10/minute")
    env, payload = Envelope.new("r.turns", {"name": "a"}), Item(name="a")
    assert gate(env, job, payload, 1, time.time(), rate=RateInputs(may_wait=-0.5)) is None
