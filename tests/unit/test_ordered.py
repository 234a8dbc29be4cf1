"""@job(ordered_by=...): checked when applied; an ordered job's lane, queue names and limits."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from jobframework.catalog_schema import route_of
from jobframework.errors import ConfigurationError
from jobframework.jobs import BatchOptions, JobRegistry, is_fifo_lane, job, lane_profile
from jobframework.topology import Topology, TopologySettings


class Posting(BaseModel):
    account_id: str
    amount: int = 1


@pytest.fixture
def reg() -> JobRegistry:
    return JobRegistry()


def test_an_ordered_job_goes_to_its_priority_fifo_lane(reg):
    @job("ledger.post", registry=reg, priority="high", ordered_by=lambda p: p.account_id)
    def post(p: Posting) -> None: ...

    @job("ledger.crunch", registry=reg, profile="cpu", ordered_by=lambda p: p.account_id)
    def crunch(p: Posting) -> None: ...

    assert (post.lane, post.ordered) == ("high-fifo", True)
    assert crunch.lane == "default-cpu-fifo"
    assert is_fifo_lane(crunch.lane) and lane_profile(crunch.lane) == "cpu"


def test_ordered_by_must_be_a_function(reg):
    with pytest.raises(ConfigurationError, match="ordered_by= must be a function of the payload"):
        job("ledger.post", registry=reg, ordered_by="account_id")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"batch": BatchOptions()}, "cannot go with batch="),
        ({"schedule": "rate(1 hour)"}, "cannot go with schedule="),
        ({"tenant": lambda p: p.account_id}, "drop tenant="),
    ],
)
def test_ordered_by_refuses_options_a_fifo_lane_cannot_keep(reg, options, says):
    with pytest.raises(ConfigurationError, match=says):
        job("ledger.post", registry=reg, ordered_by=lambda p: p.account_id, **options)


def test_the_topology_gives_a_fifo_lane_fifo_queues_batches_of_ten_and_room_for_hand_backs(reg):
    @job("ledger.post", registry=reg, ordered_by=lambda p: p.account_id)
    def post(p: Posting) -> None: ...

    topology = Topology.from_registry(reg, TopologySettings(batch_size=100, batching_window=5))
    fifo, plain = topology.queue("default-fifo"), topology.queue("default")
    assert (fifo.name, fifo.dlq_name, fifo.fifo) == ("jf-dev-default.fifo", "jf-dev-default-dlq.fifo", True)
    assert (fifo.batch_size, fifo.batching_window) == (10, 0)
    assert (plain.batch_size, plain.batching_window, plain.fifo) == (100, 5, False)
    assert fifo.consumer == plain.consumer == "shared"
    assert fifo.max_receive_count > plain.max_receive_count
    assert topology.catalog["ledger.post"].fifo is True
    assert route_of(post, fifo=True).lane == "default-fifo"
