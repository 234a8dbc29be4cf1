"""The retry budget: retries may be at most a fraction of a queue's first attempts.

During an outage every job fails; without a budget each failure multiplies into
``max_attempts`` requests against the struggling downstream. With it, retries in a
rolling window are capped at ``fraction`` (20 %) of the first attempts in that
window, plus a ``floor`` so that a quiet queue can still retry. Past the
budget a failing job is dead-lettered with reason ``budget`` (and can be redriven
once the downstream is back).

Counters live in the state table in one-minute buckets. A retry is taken by an atomic reservation:
one conditional ``ADD`` on the current bucket's retry count that succeeds only while the count is
under what the window still allows (:meth:`BudgetCounter.budget_reserve`). Concurrent consumers
therefore cannot spend the same room twice: the budget holds however many batches run at once (the
window's earlier buckets are read once per batch). A batch that finds the budget spent asks no more
in that bucket.

First attempts are tallied per process (:class:`FirstAttempts`) and written at the end of a batch
that asked for a retry, when the oldest unwritten count is ``every`` seconds old (10 by default on a
consumer), or when the bucket turns: a healthy queue pays one counter write per process every few
seconds instead of one per batch, and a failing one keeps the count exact where it matters. Counts a
process had not written when it stopped are lost; that only makes the budget stricter (fewer
first attempts, fewer retries), never looser.
"""

from __future__ import annotations

import logging
import threading
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
        floor: retries always allowed in a window, however quiet the queue: 100 in 5 minutes by
            default (one every 3 s), so a quiet queue's jobs ride out a short outage on their backoff
            (20 jobs of 5 attempts retry 80 times). It was 10, which two trials running a flaky job
            under ``jf dev`` spent within minutes; the references allow more (Finagle's RetryBudget at
            least 10 retries a second, the AWS SDKs' standard mode a burst of about 100).
        bucket: seconds per counter bucket (the window's resolution).
    """

    fraction: float = 0.2
    window: float = 300.0
    floor: int = 100
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
        >>> retries_allowed(1000, 150, RetryBudget(floor=10))
        50
        >>> retries_allowed(0, 3, RetryBudget())   # a quiet queue keeps its floor
        97
    """
    return max(0, max(budget.floor, int(budget.fraction * first_attempts)) - retries)


@dataclass(frozen=True, slots=True)
class BudgetState:
    """Where a budget stands in its window now (what ``jf queue ls`` shows)."""

    first_attempts: int
    retries: int
    allowed: int
    """Retries the window allows in all (its floor, or its fraction of the first attempts)."""

    @property
    def spent(self) -> bool:
        return self.retries >= self.allowed


def budget_state(
    counter: BudgetCounter | None, key: str, fraction: float | None, now: float
) -> BudgetState | None:
    """The window's counts of the budget ``key`` (a queue's name) as the counter holds them (first
    attempts a process has not written yet are not there: it reads a little stricter than it is);
    ``None`` with no counter (no state table) or no ``fraction`` (the budget is off). What
    ``jf queue ls`` and the console's overview show.

    Example:
        >>> counter = InMemoryBudgetCounter()
        >>> counter.budget_add("q", int(1000 // 60), 600, 118, ttl=600)
        >>> state = budget_state(counter, "q", 0.2, now=1000)
        >>> state.allowed, state.spent
        (120, False)
    """
    if counter is None or fraction is None:
        return None
    budget = RetryBudget(fraction=fraction)
    since = int((now - budget.window) // budget.bucket) + 1
    first, retries = counter.budget_window(key, since)
    return BudgetState(first, retries, retries_allowed(first, 0, budget))


class BudgetCounter(Protocol):
    """Where counts are kept: the state table in production, memory in simulations."""

    def budget_window(
        self, queue: str, since_bucket: int, before_bucket: int | None = None
    ) -> tuple[int, int]:
        """First attempts and retries counted in buckets ``>= since_bucket`` (``< before_bucket``)."""
        ...

    def budget_add(self, queue: str, bucket: int, first_attempts: int, retries: int, ttl: int) -> None:
        """Add counts to a bucket."""
        ...

    def budget_reserve(self, queue: str, bucket: int, limit: int, ttl: int) -> bool:
        """Atomically add one retry to ``bucket`` if it holds fewer than ``limit``; ``False`` if not."""
        ...


@dataclass
class InMemoryBudgetCounter:
    """A :class:`BudgetCounter` in a dict (the outage simulation and tests)."""

    buckets: dict[tuple[str, int], list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def budget_window(
        self, queue: str, since_bucket: int, before_bucket: int | None = None
    ) -> tuple[int, int]:
        first = retries = 0
        with self.lock:
            for (q, bucket), (f, r) in self.buckets.items():
                if (
                    q == queue
                    and bucket >= since_bucket
                    and (before_bucket is None or bucket < before_bucket)
                ):
                    first += f
                    retries += r
        return first, retries

    def budget_add(self, queue: str, bucket: int, first_attempts: int, retries: int, ttl: int) -> None:
        with self.lock:
            counts = self.buckets[(queue, bucket)]
            counts[0] += first_attempts
            counts[1] += retries

    def budget_reserve(self, queue: str, bucket: int, limit: int, ttl: int) -> bool:
        with self.lock:
            counts = self.buckets[(queue, bucket)]
            if counts[1] >= limit:
                return False
            counts[1] += 1
            return True


class FirstAttempts:
    """A process's first attempts not yet written to the counter, by (queue, bucket). Thread-safe.

    Args:
        every: seconds an unwritten count may wait; ``0`` writes at the end of every batch.
    """

    def __init__(self, every: float = 0.0) -> None:
        if every < 0:
            raise ValueError(f"FirstAttempts(every=) must be >= 0 seconds, got {every}")
        self.every = every
        self._pending: dict[tuple[str, int], int] = defaultdict(int)
        self._oldest: float | None = None
        self._lock = threading.Lock()

    def add(self, queue: str, bucket: int, now: float) -> None:
        with self._lock:
            self._pending[(queue, bucket)] += 1
            if self._oldest is None:
                self._oldest = now

    def unwritten(self, queue: str) -> int:
        """First attempts of ``queue`` this process counted and has not written yet."""
        with self._lock:
            return sum(n for (q, _), n in self._pending.items() if q == queue)

    def take(self, now: float, bucket: int, *, force: bool) -> dict[tuple[str, int], int]:
        """The counts to write now (and forget), or nothing when none is due."""
        with self._lock:
            due = force or (
                self._oldest is not None
                and (now - self._oldest >= self.every or any(b != bucket for _, b in self._pending))
            )
            if not due or not self._pending:
                return {}
            taken = dict(self._pending)
            self._pending.clear()
            self._oldest = None
            return taken


@dataclass(frozen=True, slots=True)
class _Window:
    bucket: int
    """The current bucket when the window was read."""
    first: int
    """First attempts in the whole window (earlier buckets and the current one, as read)."""
    earlier_retries: int
    """Retries in the window's buckets before the current one (they no longer change)."""


class BatchBudget:
    """The budget as one batch sees it: one read of the window per budget, one atomic reservation per
    retry, one write of the first attempts per budget.

    Thread-safe: the records of a batch may run concurrently (see :meth:`allow_retry`).
    """

    def __init__(
        self,
        budget: RetryBudget,
        counter: BudgetCounter,
        clock: Callable[[], float] = time.time,
        first_attempts: FirstAttempts | None = None,
    ) -> None:
        self.budget = budget
        self.counter = counter
        self.clock = clock
        self._first = first_attempts if first_attempts is not None else FirstAttempts()
        """The process's tally (shared by its batches); a fresh one writes at every batch's end."""
        self._asked = False
        self._unreserved: dict[str, int] = defaultdict(int)
        """Retries allowed without a reservation (the counter was unreachable): written at flush."""
        self._window: dict[str, _Window | None] = {}
        self._spent: set[tuple[str, int]] = set()
        self._lock = threading.Lock()
        self._reading: dict[str, threading.Lock] = {}
        """A lock per budget, held while its window is read (once a batch)."""

    def _bucket(self, now: float) -> int:
        return int(now // self.budget.bucket)

    def first_attempt(self, queue: str) -> None:
        now = self.clock()
        self._first.add(queue, self._bucket(now), now)

    def _read(self, queue: str, bucket: int) -> _Window | None:
        window = self._window.get(queue)
        if queue in self._window and (window is None or window.bucket == bucket):
            return window
        since = self._bucket(self.clock() - self.budget.window) + 1
        try:
            first, _ = self.counter.budget_window(queue, since)
            # Earlier buckets only: their retries no longer change (reservations go to the current one).
            _, earlier = self.counter.budget_window(queue, since, bucket)
        except Exception:
            # Fail open: an unreadable budget must not dead-letter work.
            log.warning("reading the retry budget of %s failed; allowing retries", queue, exc_info=True)
            self._window[queue] = None
            return None
        self._window[queue] = _Window(bucket, first, earlier)
        return self._window[queue]

    def allow_retry(self, queue: str) -> bool:
        """Take one retry from the budget; ``False`` when it is spent (dead-letter with ``budget``).

        The batch's records may ask at once: the first to ask of a budget reads its window while the
        others of that budget wait for it (one read a batch); the reservation is the counter's own
        atomic write, made outside any lock, so records of other budgets, or of this one once read,
        never wait on each other's requests.
        """
        with self._lock:
            self._asked = True
            bucket = self._bucket(self.clock())
            if (queue, bucket) in self._spent:
                return False
            reading = self._reading.setdefault(queue, threading.Lock())
        with reading:
            window = self._read(queue, bucket)
        if window is None:
            return self._unreserved_retry(queue)
        # What the current bucket may hold in all: the window's room less the earlier buckets' use.
        limit = retries_allowed(
            window.first + self._first.unwritten(queue), window.earlier_retries, self.budget
        )
        taken = False
        if limit > 0:
            try:
                taken = self.counter.budget_reserve(queue, bucket, limit, int(self.budget.window * 2))
            except Exception:
                log.warning("reserving a retry of %s failed; allowing it", queue, exc_info=True)
                return self._unreserved_retry(queue)
        if not taken:
            with self._lock:
                self._spent.add((queue, bucket))
        return taken

    def _unreserved_retry(self, queue: str) -> bool:
        """Allow a retry the counter could not reserve (fail open), to be written at :meth:`flush`."""
        with self._lock:
            self._unreserved[queue] += 1
        return True

    def flush(self) -> None:
        """At a batch's end: write the retries it could not reserve, and the process's first attempts
        when they are due (this batch asked for a retry, the oldest is ``every`` seconds old, or the
        bucket turned); one update per (queue, bucket)."""
        with self._lock:
            now = self.clock()
            bucket = self._bucket(now)
            ttl = int(self.budget.window * 2)
            writes: dict[tuple[str, int], list[int]] = defaultdict(lambda: [0, 0])
            for key, n in self._first.take(now, bucket, force=self._asked).items():
                writes[key][0] += n
            for queue, n in self._unreserved.items():
                writes[(queue, bucket)][1] += n
            for (queue, at), (first, retries) in writes.items():
                try:
                    self.counter.budget_add(queue, at, first, retries, ttl)
                except Exception:
                    log.warning("writing the retry budget of %s failed", queue, exc_info=True)
            self._unreserved.clear()
            self._window.clear()
            self._spent.clear()
            self._asked = False
