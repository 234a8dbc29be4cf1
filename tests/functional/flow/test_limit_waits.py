"""A record over its concurrency cap waits in its process for a lease held there (flow/limits.py).

A trial's 300 jobs of 0.2 s on ``concurrency=3`` ran at 3.75 jobs/s where 15 were possible: a lease
was held until its batch settled, and every record over the cap went round the queue, 1 to 30 s.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from jobframework.consumer import consumer
from jobframework.errors import ConfigurationError
from jobframework.state import JobState

from . import flow_jobs
from .flow_jobs import Item, ledger


@pytest.fixture(autouse=True)
def _fresh():
    ledger.clear()
    flow_jobs.hold.clear()
    yield
    flow_jobs.hold.set()  # (a run still held ends)


def _lease_item(flow, pk: str) -> dict[str, Any]:
    item: dict[str, Any] = flow.dynamodb.get_item(
        TableName=flow.config.state_table,
        Key={"pk": {"S": pk}, "sk": {"S": "concurrency"}},
        ConsistentRead=True,
    )["Item"]
    return item


def test_records_over_the_cap_wait_in_their_process_and_are_handed_the_lease(flow):
    """Four consumers of one process, eight jobs on concurrency=2: never more than two at once, and
    none goes round the queue; each run that ends hands its lease on in one write."""
    ids = [flow.client.enqueue("f.capped", Item(name=f"c{n}")).id for n in range(8)]
    stop = time.monotonic() + 30

    def poll() -> None:
        while len(flow_jobs.ran) < 8 and time.monotonic() < stop:
            flow.consume("default", max_messages=3)

    threads = [threading.Thread(target=poll) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(40)
    assert ledger.peak["all"] == 2
    assert sorted(r["name"] for r in flow_jobs.ran) == sorted(f"c{n}" for n in range(8))
    assert [o for o in flow.outcomes if o.outcome == "released"] == []
    assert all(flow.client.status(i).status is JobState.SUCCEEDED for i in ids)
    item = _lease_item(flow, "limit#f.capped")
    assert item["leases"]["M"] == {}
    # Each write adds one to the item's version: a take and a free a job would be 16; a hand-over is
    # both in one write.
    assert int(item["version"]["N"]) <= 12, item


def test_a_lease_is_freed_when_its_run_ends_not_when_its_batch_settles(flow):
    """Records run one at a time (a cpu lane's way): each takes the lease the one before it freed."""
    serial = consumer(
        flow_jobs.registry,
        config=flow.config,
        sqs_client=flow.sqs,
        concurrency=1,
        listeners=[flow.outcomes.append],
    )
    for n in range(4):
        flow.client.enqueue("f.capped_one", Item(name=f"s{n}"))
    from jobframework.testing import consume_once

    started = time.monotonic()
    records, response = consume_once(serial, flow.sqs, flow.url("default"), max_messages=4)
    assert len(records) == 4 and response == {"batchItemFailures": []}
    assert [o.outcome for o in flow.outcomes] == ["succeeded"] * 4
    assert time.monotonic() - started < 5  # (no record waited out JF_LIMIT_WAIT)


def test_a_wait_that_runs_out_hands_the_record_back(flow, monkeypatch):
    """JF_LIMIT_WAIT bounds the wait: past it, the record is handed back with the back-off."""
    monkeypatch.setenv("JF_LIMIT_WAIT", "0.3")
    for n in range(2):
        flow.client.enqueue("f.capped_one", Item(name=f"hold{n}"))
    threading.Timer(1.5, flow_jobs.hold.set).start()
    started = time.monotonic()
    records, response = flow.consume("default", max_messages=2)
    assert len(records) == 2 and response == {"batchItemFailures": []}
    assert sorted((o.outcome, o.reason) for o in flow.outcomes) == [
        ("released", "concurrency limit"),
        ("succeeded", None),
    ]
    assert time.monotonic() - started >= 1.4  # (the batch settled once the held run ended)
    assert ledger.peak["one"] == 1


def test_a_record_whose_cap_is_held_by_another_process_is_handed_back_at_once(flow):
    """Nothing in its process would tell it of a lease freed elsewhere: it goes round the queue, with
    no attempt used."""
    other = consumer(
        flow_jobs.registry, config=flow.config, sqs_client=flow.sqs, listeners=[flow.outcomes.append]
    )
    from jobframework.testing import consume_once

    flow.client.enqueue("f.capped_one", Item(name="hold-elsewhere"))
    elsewhere = threading.Thread(target=consume_once, args=(other, flow.sqs, flow.url("default")))
    elsewhere.start()
    deadline = time.monotonic() + 10
    while ledger.peak["one"] == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    waiting = flow.client.enqueue("f.capped_one", Item(name="here")).id
    started = time.monotonic()
    flow.consume("default")
    assert time.monotonic() - started < 3
    assert [(o.job_id, o.outcome, o.reason) for o in flow.outcomes] == [
        (waiting, "released", "concurrency limit")
    ]
    flow_jobs.hold.set()
    elsewhere.join(10)
    deadline = time.monotonic() + 15
    while not any(r["name"] == "here" for r in flow_jobs.ran) and time.monotonic() < deadline:
        flow.consume("default")
    assert [r["attempt"] for r in flow_jobs.ran if r["name"] == "here"] == [1]


def test_a_lease_that_lapsed_before_its_hand_over_is_taken_anew(flow):
    """The run's lease was pruned as expired by another writer: the waiter takes one itself."""
    from jobframework.envelope import Envelope
    from jobframework.flow.limits import LimitGate
    from jobframework.flow.outcome import RateInputs
    from jobframework.state import StateStore

    gate = LimitGate(StateStore(str(flow.config.state_table), flow.dynamodb))
    job = flow_jobs.registry.find("f.capped_one")
    assert job is not None
    first, second = (Envelope.new("f.capped_one", {"name": n}) for n in ("a", "b"))
    may_wait = RateInputs(may_wait=5)
    assert gate(first, job, Item(name="a"), 1, time.time(), rate=may_wait) is None
    result: list[Any] = []
    waiter = threading.Thread(
        target=lambda: result.append(gate(second, job, Item(name="b"), 1, time.time(), rate=may_wait))
    )
    waiter.start()
    time.sleep(0.3)
    assert waiter.is_alive()  # waiting for the lease its process holds
    flow.dynamodb.update_item(  # another writer pruned the first run's lease as lapsed
        TableName=flow.config.state_table,
        Key={"pk": {"S": "limit#f.capped_one"}, "sk": {"S": "concurrency"}},
        UpdateExpression="REMOVE leases.#a ADD version :one",
        ExpressionAttributeNames={"#a": first.id},
        ExpressionAttributeValues={":one": {"N": "1"}},
    )
    gate.release(first.id)
    waiter.join(5)
    assert result == [None]  # it took a lease
    assert set(_lease_item(flow, "limit#f.capped_one")["leases"]["M"]) == {second.id}


def test_a_batched_jobs_items_over_the_cap_do_not_wait(flow):
    """A batched job's items wait for no lease: the leases are its own call's, which runs after."""
    for n in range(4):
        flow.client.enqueue("f.capped_batch", Item(name=f"b{n}"))
    started = time.monotonic()
    flow.consume("default", max_messages=4)
    assert time.monotonic() - started < 5
    assert len(flow_jobs.ran) == 2
    assert sorted(o.outcome for o in flow.outcomes) == ["released", "released", "succeeded", "succeeded"]


@pytest.mark.parametrize("raw", ["soon", "-1", "901", "nan"])
def test_a_bad_limit_wait_is_refused_when_the_consumer_is_made(flow, monkeypatch, raw):
    monkeypatch.setenv("JF_LIMIT_WAIT", raw)
    with pytest.raises(
        ConfigurationError, match=r"JF_LIMIT_WAIT must be the seconds .* 0 \(hand it back at once\) to 900"
    ):
        consumer(flow_jobs.registry, config=flow.config, sqs_client=flow.sqs)
