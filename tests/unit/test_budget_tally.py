"""The retry budget's first attempts are written per process every few seconds, not per batch, and at
once when a batch asks for a retry (issue 13: a healthy queue pays no counter write per batch)."""

from __future__ import annotations

from jobframework.budget import BatchBudget, FirstAttempts, InMemoryBudgetCounter, RetryBudget


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_040.0  # 20 s into a one-minute bucket

    def __call__(self) -> float:
        return self.now


class CountingCounter(InMemoryBudgetCounter):
    def __init__(self) -> None:
        super().__init__()
        self.adds = 0

    def budget_add(self, queue: str, bucket: int, first_attempts: int, retries: int, ttl: int) -> None:
        self.adds += 1
        super().budget_add(queue, bucket, first_attempts, retries, ttl)


def _batch(
    counter: CountingCounter, clock: Clock, tally: FirstAttempts, *, firsts: int, floor: int = 10
) -> BatchBudget:
    budget = BatchBudget(RetryBudget(floor=floor), counter, clock=clock, first_attempts=tally)
    for _ in range(firsts):
        budget.first_attempt("q")
    return budget


def test_healthy_batches_write_their_first_attempts_once_every_interval() -> None:
    counter, clock, tally = CountingCounter(), Clock(), FirstAttempts(every=10)
    for _ in range(5):  # five batches within 10 s: nothing written yet
        _batch(counter, clock, tally, firsts=10).flush()
        clock.now += 1
    assert counter.adds == 0
    assert tally.unwritten("q") == 50
    clock.now += 6  # the oldest count is now 10 s old
    _batch(counter, clock, tally, firsts=10).flush()
    assert counter.adds == 1
    assert counter.budget_window("q", 0) == (60, 0)  # every first attempt, in one write
    assert tally.unwritten("q") == 0


def test_a_batch_that_asks_for_a_retry_writes_at_once_and_counts_unwritten_attempts() -> None:
    counter, clock, tally = CountingCounter(), Clock(), FirstAttempts(every=10)
    _batch(counter, clock, tally, firsts=100).flush()  # 100 first attempts, unwritten
    budget = _batch(counter, clock, tally, firsts=0)
    allowed = sum(budget.allow_retry("q") for _ in range(30))
    assert allowed == 20  # 20 % of the 100 this process has not written yet, not the floor of 10
    budget.flush()
    assert counter.budget_window("q", 0) == (100, 20)


def test_counts_go_to_the_bucket_they_were_made_in_when_the_bucket_turns() -> None:
    counter, clock, tally = CountingCounter(), Clock(), FirstAttempts(every=600)
    _batch(counter, clock, tally, firsts=3).flush()
    bucket = int(clock.now // 60)
    clock.now += 45  # the next bucket
    _batch(counter, clock, tally, firsts=2).flush()
    assert counter.budget_window("q", bucket, bucket + 1) == (3, 0)
    assert counter.budget_window("q", bucket + 1) == (2, 0)


def test_without_a_shared_tally_every_batch_writes_its_first_attempts() -> None:
    counter, clock = CountingCounter(), Clock()
    for _ in range(3):
        budget = BatchBudget(RetryBudget(), counter, clock=clock)
        budget.first_attempt("q")
        budget.flush()
    assert counter.adds == 3


def test_the_default_budget_lets_a_quiet_queues_jobs_ride_out_an_outage() -> None:
    """20 jobs of 5 attempts on a quiet queue, all failing for a few minutes: every retry is allowed
    (the default floor; it was 10, which dead-lettered most of them `budget` within a minute)."""
    counter, clock = CountingCounter(), Clock()
    budget = BatchBudget(RetryBudget(), counter, clock=clock)
    for _ in range(20):
        budget.first_attempt("q")
    assert sum(budget.allow_retry("q") for _ in range(20 * 4)) == 80
    budget.flush()
    clock.now += 60  # a minute on, in the same window: a retry storm of a busy queue is still capped
    later = BatchBudget(RetryBudget(), counter, clock=clock)
    assert sum(later.allow_retry("q") for _ in range(100)) == 20  # 100 a window, 80 spent
