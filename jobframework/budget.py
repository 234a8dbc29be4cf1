"""The retry budget: retries may be at most a fraction of a queue's first attempts.

During an outage every job fails; without a budget each failure multiplies into
``max_attempts`` requests against the struggling downstream. With it, retries in a
rolling window are capped at ``fraction`` (20 %) of the first attempts in that
window, plus a small ``floor`` so that a quiet queue can still retry. Past the
budget a failing job is dead-lettered with reason ``budget`` (and can be redriven
once the downstream is back).

Counters live in the state table in one-minute buckets; the consumer reads the
window at most once per batch (on its first retry) and writes at most once per
batch.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RetryBudget:
    """Settings of the retry budget.

    Args:
        fraction: retries allowed per first attempt in the window (0.2 = 20 %).
        window: seconds of the rolling window.
        floor: retries always allowed in a window, however quiet the queue.
        bucket: seconds per counter bucket (the window's resolution).
    """

    fraction: float = 0.2
    window: float = 300.0
    floor: int = 10
    bucket: float = 60.0

    def __post_init__(self) -> None:
        if not 0 <= self.fraction <= 10:
            raise ValueError(f"retry budget fraction must be within 0..10, got {self.fraction}")
        if self.window < self.bucket or self.bucket <= 0:
            raise ValueError("retry budget window must be at least one bucket long")
        if self.floor < 0:
            raise ValueError("retry budget floor must be >= 0")


def retries_allowed(first_attempts: int, retries: int, budget: RetryBudget) -> int:
    """How many more retries the window allows (never negative).

    Example:
        >>> retries_allowed(1000, 150, RetryBudget())
        50
        >>> retries_allowed(0, 3, RetryBudget())   # a quiet queue keeps its floor
        7
    """
    return max(0, max(budget.floor, int(budget.fraction * first_attempts)) - retries)


class BudgetCounter(Protocol):
    """Where counts are kept: the state table in production, memory in simulations."""

    def budget_window(self, queue: str, since_bucket: int) -> tuple[int, int]: ...

    def budget_add(self, queue: str, bucket: int, first_attempts: int, retries: int, ttl: int) -> None: ...


@dataclass
class InMemoryBudgetCounter:
    """A :class:`BudgetCounter` in a dict (the outage simulation and tests)."""

    buckets: dict[tuple[str, int], list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))

    def budget_window(self, queue: str, since_bucket: int) -> tuple[int, int]:
        first = retries = 0
        for (q, bucket), (f, r) in self.buckets.items():
            if q == queue and bucket >= since_bucket:
                first += f
                retries += r
        return first, retries

    def budget_add(self, queue: str, bucket: int, first_attempts: int, retries: int, ttl: int) -> None:
        counts = self.buckets[(queue, bucket)]
        counts[0] += first_attempts
        counts[1] += retries


class BatchBudget:
    """The budget as one batch sees it: one read (lazily, on the first retry) and one write per queue."""

    def __init__(
        self, budget: RetryBudget, counter: BudgetCounter, clock: Callable[[], float] = time.time
    ) -> None:
        self.budget = budget
        self.counter = counter
        self.clock = clock
        self._first: dict[str, int] = defaultdict(int)
        self._retries: dict[str, int] = defaultdict(int)
        self._window: dict[str, tuple[int, int] | None] = {}

    def _bucket(self, now: float) -> int:
        return int(now // self.budget.bucket)

    def first_attempt(self, queue: str) -> None:
        self._first[queue] += 1

    def allow_retry(self, queue: str) -> bool:
        """Take one retry from the budget; ``False`` when it is spent (dead-letter with ``budget``)."""
        if queue not in self._window:
            now = self.clock()
            since = self._bucket(now - self.budget.window) + 1
            try:
                self._window[queue] = self.counter.budget_window(queue, since)
            except Exception:
                # Fail open: an unreadable budget must not dead-letter work.
                log.warning("reading the retry budget of %s failed; allowing retries", queue, exc_info=True)
                self._window[queue] = None
        window = self._window[queue]
        if window is None:
            self._retries[queue] += 1
            return True
        first, retries = window
        if retries_allowed(first + self._first[queue], retries + self._retries[queue], self.budget) <= 0:
            return False
        self._retries[queue] += 1
        return True

    def flush(self) -> None:
        """Write this batch's counts: one update per queue."""
        bucket = self._bucket(self.clock())
        ttl = int(self.budget.window * 2)
        for queue in set(self._first) | set(self._retries):
            try:
                self.counter.budget_add(queue, bucket, self._first[queue], self._retries[queue], ttl)
            except Exception:
                log.warning("writing the retry budget of %s failed", queue, exc_info=True)
        self._first.clear()
        self._retries.clear()
        self._window.clear()
