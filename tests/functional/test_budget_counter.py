"""One contract, two retry-budget counters: the state table on the embedded AWS (``StateStore``) and the
in-memory one the outage simulation uses. Whatever passes here counts the same in both."""

from __future__ import annotations

import pytest

from jobframework.budget import BudgetCounter, InMemoryBudgetCounter
from jobframework.state import StateStore
from tests.functional.conftest_local import state_table

TTL = 3600


@pytest.fixture(params=["dynamodb", "in-memory"])
def counter(request: pytest.FixtureRequest) -> BudgetCounter:
    if request.param == "in-memory":
        return InMemoryBudgetCounter()
    table, dynamodb = state_table(request.getfixturevalue("jf_aws"))
    return StateStore(table, dynamodb)


def test_a_window_sums_its_buckets_of_one_queue(counter):
    counter.budget_add("q", 100, 10, 1, TTL)
    counter.budget_add("q", 100, 5, 0, TTL)  # adds to the bucket
    counter.budget_add("q", 101, 7, 2, TTL)
    counter.budget_add("q", 99, 50, 50, TTL)  # before the window
    counter.budget_add("other", 100, 1000, 1000, TTL)  # another queue
    assert counter.budget_window("q", 100) == (22, 3)
    assert counter.budget_window("q", 100, before_bucket=101) == (15, 1)
    assert counter.budget_window("q", 101, before_bucket=101) == (0, 0)
    assert counter.budget_window("q", 102) == (0, 0)


def test_a_reservation_takes_one_retry_while_the_bucket_has_room(counter):
    counter.budget_add("q", 7, 0, 1, TTL)
    assert [counter.budget_reserve("q", 7, 3, TTL) for _ in range(4)] == [True, True, False, False]
    assert counter.budget_window("q", 7) == (0, 3)
    assert counter.budget_reserve("q", 8, 1, TTL)  # another bucket has its own room
