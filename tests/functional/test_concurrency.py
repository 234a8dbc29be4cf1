"""Records of a batch run concurrently, bounded per lane, on the embedded AWS.

The jobs meet at barriers: a batch run one record after the other could never get them all past
one (each wait ends, broken, after a few seconds), so passing it is the proof of concurrency; no
timing is asserted.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections import Counter
from typing import Any

import pytest
from pydantic import BaseModel

from jobframework import BatchOptions, job
from jobframework.client import JobClient
from jobframework.consumer import consumer
from jobframework.delivery import RecordOutcome
from jobframework.jobs import JobRegistry, Priority
from jobframework.retry import RetryPolicy
from jobframework.testing import consume_once, provision_fresh

registry = JobRegistry()
ran: Counter[str] = Counter()
running = {"now": 0, "most": 0}
_lock = threading.Lock()
BATCH = 10
barrier = threading.Barrier(BATCH, timeout=20)  # (generous: a loaded machine starts threads late)
async_barrier: dict[str, Any] = {}


class Item(BaseModel):
    n: int


@job("c.meet", registry=registry, priority="high")
def meet(item: Item) -> None:
    """Waits until the whole batch is running (a downstream that answers only when all have asked)."""
    barrier.wait()
    ran["meet"] += 1


@job("c.meet_async", registry=registry, priority="high")
async def meet_async(item: Item) -> None:
    await asyncio.wait_for(async_barrier["now"].wait(), timeout=20)
    ran["meet_async"] += 1


@job(
    "c.overrun_async",
    registry=registry,
    priority="high",
    track=True,
    timeout=0.5,
    retry=RetryPolicy(max_attempts=3, base_delay=30, jitter="none"),
)
async def overrun_async(item: Item) -> None:
    await asyncio.sleep(5)  # past its timeout: cancelled there
    ran["overrun_async"] += 1


def _count_running() -> None:
    with _lock:
        running["now"] += 1
        running["most"] = max(running["most"], running["now"])


def _done_running() -> None:
    with _lock:
        running["now"] -= 1


@job("c.nap", registry=registry, priority="high")
def nap(item: Item) -> None:
    """Sleeps ``n`` tenths of a second: records of a batch end in another order than they came."""
    threading.Event().wait(item.n / 10)


started_at: list[float] = []


@job("c.stamp", registry=registry, priority="high", retry=RetryPolicy(max_attempts=2, base_delay=30))
def stamp(item: Item) -> None:
    """Notes when it started, then fails (retried): its failure is logged before its outcome is made."""
    started_at.append(time.time())
    raise ConnectionError("downstream reset the connection")


call_started: list[float] = []


@job("c.stamp_batch", registry=registry, priority="high", batch=BatchOptions(max_size=10, max_wait=0))
def stamp_batch(items: list[Item]) -> None:
    """A batched job's one call, 0.3 s: notes when it started."""
    call_started.append(time.time())
    threading.Event().wait(0.3)


@job("c.crunch", registry=registry, profile="cpu")
def crunch(item: Item) -> None:
    _count_running()
    try:
        threading.Event().wait(0.02)
        ran["crunch"] += 1
    finally:
        _done_running()


@job("c.bounded", registry=registry, priority="low")
def bounded(item: Item) -> None:
    _count_running()
    try:
        threading.Event().wait(0.05)
        ran["bounded"] += 1
    finally:
        _done_running()


@pytest.fixture
def world(jf_aws: Any) -> Any:
    ran.clear()
    running.update(now=0, most=0)
    barrier.reset()
    _topology, config = provision_fresh(jf_aws.endpoint_url, registry)
    sqs = jf_aws.client("sqs")
    return config, sqs, JobClient(config, registry=registry, sqs_client=sqs)


def _consume_all(handler: Any, sqs: Any, url: str, expected: int) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    for _ in range(20):
        got, response = consume_once(handler, sqs, url)
        assert response == {"batchItemFailures": []}
        records.extend(got)
        if len(records) >= expected:
            break
    return records


def test_an_io_batch_runs_its_records_at_once(world):
    config, sqs, client = world
    client.enqueue_many([meet.request(Item(n=n)) for n in range(BATCH)])
    handler = consumer(registry, config=config, sqs_client=sqs)
    records, response = consume_once(handler, sqs, config.endpoints("high").url)
    assert len(records) == BATCH  # one batch of ten: all ten must be running together to pass
    assert response == {"batchItemFailures": []}
    assert ran["meet"] == BATCH


def test_async_jobs_of_a_batch_wait_together_on_the_one_event_loop(world):
    from jobframework.running import event_loop

    config, sqs, client = world
    loop = event_loop()

    async def make() -> asyncio.Barrier:
        return asyncio.Barrier(BATCH)

    async_barrier["now"] = asyncio.run_coroutine_threadsafe(make(), loop).result()
    client.enqueue_many([meet_async.request(Item(n=n)) for n in range(BATCH)])
    handler = consumer(registry, config=config, sqs_client=sqs)
    records, response = consume_once(handler, sqs, config.endpoints("high").url)
    assert len(records) == BATCH and response == {"batchItemFailures": []}
    assert ran["meet_async"] == BATCH


def test_an_async_job_past_its_timeout_is_stopped_and_retried_and_its_neighbour_succeeds(world):
    config, sqs, client = world
    over = client.enqueue(overrun_async, Item(n=1))
    client.enqueue_many([meet_async.request(Item(n=2))])
    from jobframework.running import event_loop

    loop = event_loop()

    async def make() -> asyncio.Barrier:
        return asyncio.Barrier(1)

    async_barrier["now"] = asyncio.run_coroutine_threadsafe(make(), loop).result()
    handler = consumer(registry, config=config, sqs_client=sqs)
    records, response = consume_once(handler, sqs, config.endpoints("high").url)
    assert len(records) == 2 and ran["meet_async"] == 1
    status = client.status(over.id)
    assert status is not None and status.status.value == "retrying", status
    assert "ran past its timeout=0.5 s" in (status.error or "") and ran["overrun_async"] == 0
    assert len(response["batchItemFailures"]) <= 1  # (a retry: the message stays, hidden 30 s)


def test_a_cpu_lane_runs_one_record_at_a_time(world):
    config, sqs, client = world
    client.enqueue_many([crunch.request(Item(n=n)) for n in range(6)])
    handler = consumer(registry, config=config, sqs_client=sqs)
    _consume_all(handler, sqs, config.endpoints(crunch.lane).url, 6)
    assert ran["crunch"] == 6
    assert running["most"] == 1


def test_a_lanes_concurrency_bounds_its_batch(world):
    config, sqs, client = world
    client.enqueue_many([bounded.request(Item(n=n)) for n in range(8)])
    handler = consumer(registry, config=config, sqs_client=sqs, concurrency={"low": 2})
    _consume_all(handler, sqs, config.endpoints("low").url, 8)
    assert ran["bounded"] == 8
    assert 1 <= running["most"] <= 2


def test_a_barrier_job_fails_alone_when_the_lane_runs_one_at_a_time(world):
    # The counter-proof: with concurrency 1 the barrier breaks, so the test above is not vacuous.
    global barrier
    config, sqs, client = world
    saved, barrier = barrier, threading.Barrier(2, timeout=0.5)
    try:
        client.enqueue_many([meet.request(Item(n=n)) for n in range(2)])
        handler = consumer(registry, config=config, sqs_client=sqs, concurrency=1)
        records, response = consume_once(handler, sqs, config.endpoints("high").url)
    finally:
        barrier = saved
    assert len(records) == 2
    assert len(response["batchItemFailures"]) == 2  # neither could pass: they ran one after the other


def test_the_emulator_runs_a_batchs_records_at_once_as_jf_worker_does(world):
    from jobframework.local.emulator import Emulator, QueuePoller, queue_arn_from_url
    from jobframework.topology import POLL_WEIGHT

    config, sqs, client = world
    url = config.endpoints("high").url
    client.enqueue_many([meet.request(Item(n=n)) for n in range(BATCH)])
    poller = QueuePoller(
        priority=Priority.HIGH,
        url=url,
        arn=queue_arn_from_url(url, "us-east-1"),
        batch_size=BATCH,
        batching_window=0.5,
        max_concurrency=1,
        weight=POLL_WEIGHT[Priority.HIGH],
        function_name="jf-test-consumer",
        timeout=120.0,  # room for the job's 60 s timeout
    )
    emulator = Emulator([poller], consumer(registry, config=config, sqs_client=sqs), sqs)
    messages = emulator._collect(poller)
    assert len(messages) == BATCH  # one invocation: the barrier needs all ten running together
    assert len(emulator.invoke(poller, messages)) == BATCH  # all succeeded and were deleted
    assert ran["meet"] == BATCH


def test_listeners_are_told_a_batchs_outcomes_in_the_order_the_jobs_ended(world):
    """jf dev prints its outcome lines when a batch settles, each stamped when its job ended: in the
    records' order, an operator's trial saw the times go back within a batch."""
    config, sqs, client = world
    client.enqueue_many([nap.request(Item(n=n)) for n in (3, 0, 2)])  # they end 0, 2, 3
    told: list[tuple[float, str]] = []

    def listener(o: RecordOutcome) -> None:
        assert o.started_at is not None and o.processing_ms is not None
        told.append((o.started_at + o.processing_ms / 1000, str(o.job_id)))

    handler = consumer(registry, config=config, sqs_client=sqs, listeners=[listener])
    records, _ = consume_once(handler, sqs, config.endpoints("high").url)
    assert len(records) == len(told) == 3
    assert [t for t, _ in told] == sorted(t for t, _ in told), told
    came = [json.loads(r["body"])["id"] for r in records]
    assert [i for _, i in told] != came  # (the records came in another order than their jobs ended)


def test_an_outcome_and_a_status_start_when_the_job_started(world):
    """A workflow trial's status read started_at .742 while running and .807 once retrying, one attempt:
    the start was counted back from when the outcome was made, after the failure's log line."""
    config, sqs, client = world
    started_at.clear()
    client.enqueue(stamp, Item(n=1))
    told: list[RecordOutcome] = []
    handler = consumer(registry, config=config, sqs_client=sqs, listeners=[told.append])
    slow = logging.Handler()  # (a console that takes its time over the failure's line, as jf dev's)
    slow.emit = lambda record: time.sleep(0.3)  # type: ignore[method-assign]
    log = logging.getLogger("jobframework.consumer")
    log.addHandler(slow)
    try:
        consume_once(handler, sqs, config.endpoints("high").url)
    finally:
        log.removeHandler(slow)
    [outcome] = told
    assert outcome.outcome == "retried" and outcome.started_at is not None
    assert outcome.started_at <= started_at[0] < outcome.started_at + 0.5  # (before the job's first line)


def test_a_batched_jobs_items_start_when_its_call_started(world):
    """From a review: a batched job's items counted their start back from the call's end by their
    share of its time (0.1 s each of a 0.3 s call of three), not from when the call started."""
    config, sqs, client = world
    call_started.clear()
    client.enqueue_many([stamp_batch.request(Item(n=n)) for n in range(3)])
    told: list[RecordOutcome] = []
    handler = consumer(registry, config=config, sqs_client=sqs, listeners=[told.append])
    consume_once(handler, sqs, config.endpoints("high").url)
    assert len(told) == 3 and len(call_started) == 1
    assert all(o.started_at is not None and o.started_at <= call_started[0] for o in told), told
