"""The records of a batch that fail at once ask the retry budget at once: a budget's window is read once
a batch, and no record waits on another's request (a reservation is the counter's own atomic write), so
a batch failing against several downstreams (named budgets) is not made to queue behind one of them."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from jobframework.budget import BatchBudget, InMemoryBudgetCounter, RetryBudget

WAIT = 5.0
"""Seconds a request waits for its neighbour's: far more than they take when they run together."""


class Rendezvous(InMemoryBudgetCounter):
    """A counter whose requests of ``stage`` ("read" or "reserve") each wait for one of another
    record's to start: they meet only when they are made at the same time."""

    def __init__(self, stage: str) -> None:
        super().__init__()
        self.stage = stage
        self.barrier = threading.Barrier(2, timeout=WAIT)
        self.reads: list[str] = []
        self.missed: list[str] = []
        """The requests that waited in vain: their neighbour's came only after they gave up."""

    def _meet(self, queue: str) -> None:
        try:
            self.barrier.wait()
        except threading.BrokenBarrierError:
            self.missed.append(queue)
            raise

    def budget_window(
        self, queue: str, since_bucket: int, before_bucket: int | None = None
    ) -> tuple[int, int]:
        self.reads.append(queue)
        if self.stage == "read" and before_bucket is None:  # (the first of a read's two queries)
            self._meet(queue)
        return super().budget_window(queue, since_bucket, before_bucket)

    def budget_reserve(self, queue: str, bucket: int, limit: int, ttl: int) -> bool:
        if self.stage == "reserve":
            self._meet(queue)
        return super().budget_reserve(queue, bucket, limit, ttl)


def _ask_together(counter: Rendezvous, queues: list[str]) -> list[bool]:
    budget = BatchBudget(RetryBudget(), counter, clock=lambda: 1_000_040.0)
    with ThreadPoolExecutor(len(queues)) as pool:
        return list(pool.map(budget.allow_retry, queues))


def test_two_budgets_are_read_at_once():
    counter = Rendezvous("read")
    assert _ask_together(counter, ["smtp", "webhooks"]) == [True, True]
    assert counter.missed == []


def test_reservations_of_one_budget_are_made_at_once_after_one_read():
    counter = Rendezvous("reserve")
    assert _ask_together(counter, ["smtp", "smtp"]) == [True, True]
    assert counter.missed == []
    assert counter.reads == ["smtp", "smtp"]  # one read of the window (its two queries) for both


def test_reservations_of_two_budgets_are_made_at_once():
    counter = Rendezvous("reserve")
    assert _ask_together(counter, ["smtp", "webhooks"]) == [True, True]
    assert counter.missed == []


def test_a_spent_budget_says_so_to_every_record_without_another_request():
    counter = InMemoryBudgetCounter()
    budget = BatchBudget(RetryBudget(floor=1, fraction=0), counter, clock=lambda: 1_000_040.0)
    assert [budget.allow_retry("smtp") for _ in range(3)] == [True, False, False]
    assert counter.buckets[("smtp", 16667)] == [0, 1]  # one reservation taken; the refusals wrote none
