"""Tenant fairness: the tenant travels as MessageGroupId on a standard queue (SQS fair queues), and the
emulator serves a queue's groups round-robin, so one tenant's flood does not hold up another's jobs."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from jobframework.errors import ConfigurationError
from jobframework.jobs import Priority
from jobframework.local.emulator import Emulator, QueuePoller, queue_arn_from_url
from jobframework.testing import consume_once, drain, receive_all

from . import flow_jobs
from .flow_jobs import Item


def test_the_tenant_is_the_message_group_of_a_standard_queue(flow):
    """The pinned moto (>= 5.2.5) takes MessageGroupId on a standard queue (getmoto/moto#9146)."""
    flow.client.enqueue("f.ok", Item(name="a"), tenant="acme")
    flow.client.enqueue("f.tenant", Item(name="b", tenant="globex"))  # @job(tenant=lambda p: p.tenant)
    flow.client.enqueue_many([flow.client.job("f.tenant").request(Item(name="c", tenant="initech"))])
    flow.client.enqueue("f.ok", Item(name="d"))  # no tenant: no group
    groups = {
        m["Body"].split('"name":"')[1][0]: m["Attributes"].get("MessageGroupId")
        for lane in ("high", "default")
        for m in receive_all(flow.sqs, flow.url(lane))
    }
    assert groups == {"a": "acme", "b": "globex", "c": "initech", "d": None}


@pytest.mark.parametrize("tenant", ["", "x" * 129, "spaces are not allowed", 7])
def test_a_bad_tenant_is_refused_before_anything_is_sent(flow, tenant):
    with pytest.raises(ConfigurationError, match="MessageGroupId"):
        flow.client.enqueue("f.ok", Item(name="x"), tenant=tenant)


def _poller(url: str) -> QueuePoller:
    return QueuePoller(
        priority=Priority.LOW,
        url=url,
        arn=queue_arn_from_url(url, "us-east-1"),
        batch_size=10,
        batching_window=0.0,
        max_concurrency=1,
        weight=1,
        function_name="jf-test",
        timeout=30.0,
    )


def _served_order(sqs: Any, url: str, lookahead: int, total: int) -> list[str]:
    served: list[str] = []
    lock = threading.Lock()

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        with lock:
            served.extend(r["body"] for r in event["Records"])
        return {"batchItemFailures": []}

    emulator = Emulator([_poller(url)], handler, sqs, workers=1, fair_lookahead=lookahead).start()
    try:
        deadline = time.monotonic() + 60
        while len(served) < total and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        emulator.stop(5)
    return served


def _flood(sqs: Any, url: str) -> None:
    """60 jobs of tenant big, then 10 of tenant small."""
    for n in range(0, 60, 10):
        sqs.send_message_batch(
            QueueUrl=url,
            Entries=[
                {"Id": str(i), "MessageBody": f"big-{n + i}", "MessageGroupId": "big"} for i in range(10)
            ],
        )
    sqs.send_message_batch(
        QueueUrl=url,
        Entries=[{"Id": str(i), "MessageBody": f"small-{i}", "MessageGroupId": "small"} for i in range(10)],
    )


def test_a_flood_of_one_tenant_does_not_hold_up_another(flow):
    url = flow.url("low")
    _flood(flow.sqs, url)
    served = _served_order(flow.sqs, url, lookahead=100, total=70)
    assert len(served) == 70 and len(set(served)) == 70
    small = [n for n, body in enumerate(served) if body.startswith("small")]
    assert max(small) < 20  # within the first two batches, interleaved with the flood
    assert [b for b in served if b.startswith("big")] == [f"big-{n}" for n in range(60)]  # order kept


def test_without_the_look_ahead_the_flood_comes_first(flow):
    url = flow.url("low")
    _flood(flow.sqs, url)
    served = _served_order(flow.sqs, url, lookahead=0, total=70)
    assert min(n for n, body in enumerate(served) if body.startswith("small")) >= 60


def _groups_arriving(flow, url: str, count: int, seconds: float = 8) -> list[str | None]:
    """The MessageGroupId of the next ``count`` messages of ``url`` (hand-backs come back delayed)."""
    got: list[dict[str, Any]] = []
    deadline = time.monotonic() + seconds
    while len(got) < count and time.monotonic() < deadline:
        got.extend(receive_all(flow.sqs, url, attempts=1))
        time.sleep(0.2)
    return [m["Attributes"].get("MessageGroupId") for m in got]


def test_a_job_handed_back_over_its_limit_keeps_its_tenant(flow, monkeypatch):
    """A webhook trial's flood: the copies handed back over a per-customer cap lost their group, so the
    overflow of one customer no longer counted as that customer's in the fair queue."""
    monkeypatch.setenv("JF_LIMIT_WAIT", "0")  # (handed back, not waiting in the process for the lease)
    for n in range(4):
        flow.client.enqueue("f.per-tenant", Item(name=f"h{n}", tenant="acme"), tenant="acme")
    records, _ = consume_once(flow.handler, flow.sqs, flow.url("default"))
    assert len(records) == 4
    released = [o for o in flow.outcomes if o.outcome == "released"]
    assert len(released) == 3  # (concurrency=1 a tenant: one ran)
    assert _groups_arriving(flow, flow.url("default"), 3) == ["acme"] * 3


def test_a_dead_letter_and_its_redrive_keep_the_tenant(flow):
    from jobframework.dlq import DeadLetters

    flow.client.enqueue("f.flaky", Item(name="dead", fail_times=9), tenant="globex")
    flow.client.enqueue("f.flaky", Item(name="dead2", fail_times=9))
    drain(flow.handler, flow.sqs, flow.url("default"))  # (3 attempts each, then the DLQ)
    letters = DeadLetters(flow.config, flow.sqs, wait_time_seconds=0)
    found = letters.peek("default", limit=None)
    assert sorted((d.summary()["tenant"] or "-") for d in found) == ["-", "globex"]
    [chosen] = letters.peek("default", limit=None, matching="globex")  # (--match finds the tenant)
    assert chosen.tenant == "globex"
    letters.redrive("default")
    assert sorted(g or "-" for g in _groups_arriving(flow, flow.url("default"), 2)) == ["-", "globex"]


def test_drain_waits_for_the_copies_released_over_a_limit(flow, monkeypatch):
    """A review found drain() returning with three of four capped jobs still delayed in the queue."""
    monkeypatch.setenv("JF_LIMIT_WAIT", "0")  # (handed back, not waiting in the process for the lease)
    for n in range(4):
        flow.client.enqueue("f.per-tenant", Item(name=f"d{n}", tenant="acme"), tenant="acme")
    drain(flow.handler, flow.sqs, flow.url("default"), timeout=60)
    assert sorted(r["name"] for r in flow_jobs.ran) == ["d0", "d1", "d2", "d3"]
    assert any(o.outcome == "released" for o in flow.outcomes)  # (they were released, and came back)
