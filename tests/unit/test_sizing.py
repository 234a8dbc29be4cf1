"""A consumer's timeout is sized for how its lanes run a batch (:mod:`jobframework.sizing`), which is how
:func:`jobframework.concurrency.run_all` runs it: the rounds the sizing counts are the rounds run."""

from __future__ import annotations

import threading
import time

import pytest
from pydantic import BaseModel, ValidationError

from jobframework.concurrency import lane_limit, run_all
from jobframework.errors import ConfigurationError, TopologyWarning
from jobframework.jobs import JobRegistry, job
from jobframework.sizing import rounds
from jobframework.topology import Topology
from jobframework.topology_settings import TopologySettings


def _chain(spans: list[tuple[float, float]]) -> int:
    """The longest run of items each started after the one before it ended (how many rounds ran)."""
    longest: list[int] = []
    for i, (start, _) in enumerate(spans):
        before = [longest[j] for j, (_, end) in enumerate(spans[:i]) if start >= end - 0.02]
        longest.append(1 + max(before, default=0))
    return max(longest)


@pytest.mark.parametrize(
    ("lane", "concurrency"), [("t-size", None), ("t-size", 2), ("t-size", 4), ("t-size-cpu", None)]
)
def test_a_batch_of_long_records_runs_in_the_rounds_the_timeout_is_sized_for(lane, concurrency):
    n = 6
    limit = lane_limit(lane, n, concurrency)
    run_all([0, 1], lambda x: x, limit, lane=lane)  # a quick batch first: the worst case follows it
    spans: list[tuple[float, float]] = [(0.0, 0.0)] * n
    lock = threading.Lock()

    def long_record(i: int) -> None:
        started = time.monotonic()
        time.sleep(0.1)
        with lock:
            spans[i] = (started, time.monotonic())

    run_all(list(range(n)), long_record, limit, lane=lane)
    spans.sort()
    assert _chain(spans) == rounds(lane, n, concurrency)


class Order(BaseModel):
    id: str


def _order(order: Order) -> None: ...


def test_a_consumer_of_concurrent_lanes_runs_two_rounds_so_a_crashed_batch_is_back_in_13_minutes():
    reg = JobRegistry()
    job("orders.send", registry=reg, priority="high")(_order)  # the default 60 s timeout
    job("orders.render", registry=reg, priority="low", profile="cpu")(_order)
    topology = Topology.from_registry(reg)
    shared, cpu = topology.consumer("shared"), topology.consumer("cpu")
    assert shared.timeout == 2 * 60 + 10  # not a batch of ten one after the other (610 s)
    assert topology.queue("high").visibility_timeout == 6 * 130  # 13 minutes, not an hour
    assert cpu.timeout == 10 * 60 + 10  # a cpu lane runs one record at a time


def test_a_lanes_record_concurrency_sizes_its_consumer_and_is_kept_for_its_environment():
    reg = JobRegistry()
    job("orders.send", registry=reg, priority="high")(_order)
    topology = Topology.from_registry(reg, TopologySettings(record_concurrency={"high": 4}))
    assert topology.consumer("shared").timeout == 4 * 60 + 10  # ceil(10/4) rounds, and the first alone
    assert topology.queue("high").record_concurrency == 4
    assert topology.queue("default").record_concurrency is None


def test_record_concurrency_refuses_a_lane_no_job_uses_and_a_number_under_one():
    reg = JobRegistry()
    job("orders.send", registry=reg, priority="high")(_order)
    with pytest.raises(ConfigurationError, match=r"record_concurrency names lane\(s\) hihg .*high"):
        Topology.from_registry(reg, TopologySettings(record_concurrency={"hihg": 4}))
    with pytest.raises(ValidationError, match=r"record_concurrency\['high'\]=0: .*1 or more"):
        TopologySettings(record_concurrency={"high": 0})


def test_a_lanes_plain_jobs_are_sized_for_the_batches_its_batched_job_makes_it_take():
    """A batched job of 100 a call makes its lane's event source take batches of 100: the plain jobs
    of that lane come 100 at a time too (in turns of the 65 the pool runs at once)."""
    from jobframework import BatchOptions

    reg = JobRegistry()
    job("orders.send", registry=reg, priority="low", timeout=30)(_order)

    def _many(orders: list[Order]) -> None: ...

    job("orders.bulk", registry=reg, priority="low", timeout=30, batch=BatchOptions(max_size=100))(_many)
    topology = Topology.from_registry(reg)
    assert topology.queue("low").batch_size == 100
    assert topology.consumer("shared").timeout == 30 * rounds("low", 100) + 10 == 30 * 3 + 10


class _Sync(BaseModel):
    day: str


def _nightly(s: _Sync) -> None: ...


def _email(s: _Sync) -> None: ...


def test_one_long_job_on_a_shared_consumer_is_warned_of_and_not_on_a_function_of_its_own():
    """A trial's nightly sync (timeout=600) on the default lane made the shared consumer 900 s: the
    high queue hid a crashed batch's records 90 minutes, and nothing said so."""
    import warnings

    shared, own = JobRegistry(), JobRegistry()

    job("w.nightly", registry=shared, timeout=600)(_nightly)
    job("w.email", registry=shared, priority="high")(_email)
    job("w.nightly", registry=own, timeout=600, profile="io")(_nightly)
    job("w.email", registry=own, priority="high")(_email)
    with pytest.warns(
        TopologyWarning,
        match=r"the default lane \(w\.nightly, timeout=600\) sizes the shared consumer at 900 s",
    ):
        Topology.from_registry(shared)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Topology.from_registry(own)


def test_a_cpu_lane_whose_batch_cannot_run_in_one_invocation_is_warned_of():
    """A platform trial's cpu job (timeout=300) had batches of 10 run one at a time: 3,000 s of a
    900 s function, so each invocation ran two and handed the rest back, and synth said nothing."""
    import warnings

    long_cpu, short_cpu, spread = JobRegistry(), JobRegistry(), JobRegistry()
    job("w.render", registry=long_cpu, profile="cpu", timeout=300)(_nightly)
    job("w.render", registry=short_cpu, profile="cpu", timeout=60)(_nightly)  # 10 x 60 s fits
    job("w.render", registry=spread, profile="cpu", timeout=300)(_nightly)
    with pytest.warns(
        TopologyWarning,
        match=r"the default-cpu lane \(w\.render, timeout=300\) runs a batch of 10 records one at a time: "
        r"up to 3,000 s, .* runs 2 of them at worst .* batch_size 2 .* "
        r"record_concurrency=\{'default-cpu': 5\}",
    ):
        Topology.from_registry(long_cpu)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Topology.from_registry(short_cpu)
        Topology.from_registry(spread, TopologySettings(record_concurrency={"default-cpu": 5}))
        Topology.from_registry(long_cpu, container_lanes=["default-cpu"])  # (no Lambda limit there)


def test_an_overlong_batchs_advice_fits_its_lane():
    """From the review: a FIFO lane's group runs in order whatever record_concurrency says (no such
    advice), and a lane running records four at a time fits eight records, not two."""
    from jobframework.sizing import overlong_batches

    ordered, four = JobRegistry(), JobRegistry()
    job("w.post", registry=ordered, timeout=120, ordered_by=lambda p: "one")(_nightly)
    [fifo] = overlong_batches({"default-fifo": list(ordered)}, 10, {})
    assert "runs a batch of 10 records one at a time: up to 1,200 s" in fifo
    assert "runs 7 of them" in fifo and "batch_size 7" in fifo and "record_concurrency" not in fifo
    job("w.sync", registry=four, timeout=300)(_nightly)
    [plain] = overlong_batches({"default": list(four)}, 20, {"default": 4})
    assert "runs a batch of 20 records 4 at a time" in plain and "batch_size 8" in plain, plain
    assert "record_concurrency={'default': 10}" in plain
    assert overlong_batches({"default": list(four)}, 20, {}) == []  # (the whole batch at once: fits)
