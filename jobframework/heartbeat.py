"""While a job runs, its idempotency key and its message stay held, however long it takes.

A job's in-progress record first expires at its ``timeout`` (plus a second) or with the invocation,
whichever is first. One daemon thread per process beats for every running job whose hold is about to
lapse: each beat moves the in-progress record's expiry and the message's visibility a ``lease`` ahead
(half the job's timeout, between 0.5 and 30 s, twice over). So a job that overruns its timeout keeps
its key (a duplicate delivery waits, handed back) and its message (it does not reappear), and the
overrun is logged and counted (the ``Overrun`` metric). The consumer's jobs are watched, not held
(:meth:`Heartbeat.watch`): the thread makes a job's :class:`Hold` only when its first beat is
:data:`PROMOTE_AHEAD` away, so a job that ends before, as most do, costs a dict entry, not a hold.

Where a hold ends:

* on Lambda, at the invocation's hard end: beats never push the key past the remaining time the
  context reported, so a killed invocation's job can run again as soon as Lambda has stopped it;
  the message stays hidden at least to that end (the visibility covers the rest of the invocation,
  so a finished job's message is never received again while its batch still runs);
* on ``jf worker``, whose context has no hard end (nothing stops a job when it runs out), beats go on
  while the job runs; when the worker's drain time runs out and the process exits, the beats stop
  and the hold lapses within one lease.

A beat that fails is logged and tried again at the next one; it is never fatal to the job.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

from jobframework.core import SQS_MAX_VISIBILITY_SECONDS

log = logging.getLogger(__name__)

OVERRUN_GRACE_SECONDS = 1.0
"""How far past its timeout a job runs before it counts as overrunning: an async job is cancelled at its
timeout (it ends within it, unless its code blocks the loop); a plain one cannot be stopped."""
MIN_PERIOD = 0.5
MAX_PERIOD = 30.0
MAX_VISIBILITY = SQS_MAX_VISIBILITY_SECONDS
IDLE_SECONDS = 1.0
"""The longest the thread sleeps (with no job held, or none due sooner). A new hold wakes it only
when it is due before then: quick jobs come and go without waking it (a wake a record was a thread
switch each)."""
PROMOTE_AHEAD = 2 * IDLE_SECONDS
"""A watched job (:meth:`Heartbeat.watch`) due this soon is held at once; the thread holds the others
this long before they are due (it looks at them at least every :data:`IDLE_SECONDS`)."""
THREAD_CHECK_SECONDS = 0.1
"""A hold after an idle spell checks that the beating thread still runs at most this often (a forked
child checks at its first hold: a fork leaves no thread)."""


def period_for(timeout: float) -> float:
    """Seconds between beats for a job of ``timeout`` seconds (half of it, within 0.5..30).

    Example:
        >>> period_for(2), period_for(900)
        (1.0, 30.0)
    """
    return min(MAX_PERIOD, max(MIN_PERIOD, timeout / 2))


@dataclass(slots=True)
class Hold:
    """One running job's hold (made by :meth:`Heartbeat.hold`)."""

    label: str
    timeout: float
    started: float
    hard_end: float
    """Monotonic time of the invocation's end (``inf`` when unknown)."""
    key_expires: float
    """Monotonic time the in-progress record lapses (as last set)."""
    extend_key: Callable[[float], None] | None
    """Sets the in-progress record's expiry to the given wall-clock epoch seconds."""
    extend_visibility: Callable[[int], None] | None
    """Sets the message's visibility to the given seconds from now."""
    beats: int = 0
    overran: bool = False
    past_end: bool = False

    @property
    def period(self) -> float:
        return period_for(self.timeout)

    def due(self) -> float:
        return self.key_expires - self.period

    def beat(self, now: float) -> None:
        lease = 2 * self.period
        self.beats += 1
        if not self.overran and now - self.started > self.timeout + OVERRUN_GRACE_SECONDS:
            self.overran = True
            log.warning(
                "job %s has run %.1fs, past its timeout of %gs; its key and message stay held while it runs",
                self.label,
                now - self.started,
                self.timeout,
            )
        self.past_end = now >= self.hard_end
        # Before the hard end the key never outlives it; after it (no Lambda stopped us) leases go on.
        until = now + lease if self.past_end else min(now + lease, self.hard_end)
        if self.extend_key is not None and until > self.key_expires:
            try:
                self.extend_key(time.time() + (until - now))
                self.key_expires = until
            except Exception:
                log.warning(
                    "extending the key of job %s failed; next beat retries", self.label, exc_info=True
                )
                self.key_expires = max(self.key_expires, now + self.period / 2)
        else:
            self.key_expires = max(self.key_expires, until)
        if self.extend_visibility is not None:
            # (no hard end, as without a Lambda context: a lease at a time, as after it)
            rest = self.hard_end - now if not self.past_end and math.isfinite(self.hard_end) else 0.0
            seconds = min(MAX_VISIBILITY, math.ceil(max(rest, lease) + self.period))
            try:
                self.extend_visibility(seconds)
            except Exception:
                log.warning("extending the visibility of job %s failed", self.label, exc_info=True)


class HoldSource(Protocol):
    """A running job :meth:`Heartbeat.watch` holds only once its hold would be due: what makes it."""

    def hold(self) -> Hold:
        """The job's hold, as if made when it started."""
        ...


class Heartbeat:
    """The beating thread (one per process: :data:`heartbeat`), started with the first hold."""

    def __init__(self) -> None:
        self._holds: dict[int, Hold] = {}
        self._pending: dict[int, tuple[HoldSource, float]] = {}
        """Watched jobs not held yet, with when their hold would be due (monotonic), by ``id``."""
        self._lock = threading.Lock()
        """Guards :attr:`_holds` (a plain lock: a hold takes it twice, and a ``Condition`` is Python)."""
        self._wake = threading.Condition(threading.Lock())
        self._thread: threading.Thread | None = None
        self._wakes_at = -math.inf
        """When the waiting thread wakes by itself (``-inf`` while it is not waiting: it looks at every
        hold before it waits again, so a new hold only wakes it when it is due earlier)."""
        self._thread_seen = -math.inf
        """When the thread was last seen alive (looked at again after :data:`THREAD_CHECK_SECONDS`)."""
        os.register_at_fork(after_in_child=self._forked)

    def _forked(self) -> None:
        # A forked child has no thread, and the parent's holds are of jobs that do not run here (kept,
        # they stopped its first hold from starting the thread); the lock may have been taken by a
        # parent's thread that is gone.
        self._holds = {}
        self._pending = {}
        self._lock = threading.Lock()
        self._wake = threading.Condition(threading.Lock())
        self._thread = None
        self._wakes_at = -math.inf
        self._thread_seen = -math.inf

    @contextmanager
    def hold(
        self,
        label: str,
        *,
        timeout: float,
        key_lapses_in: float,
        remaining: float,
        extend_key: Callable[[float], None] | None,
        extend_visibility: Callable[[int], None] | None,
    ) -> Iterator[Hold]:
        """Hold a job's key and message while the ``with`` block runs (:meth:`enter` and :meth:`leave`).

        Args:
            label: names the job in log lines (``"<id> (<type>)"``).
            timeout: the job's timeout, seconds.
            key_lapses_in: seconds until the in-progress record lapses as first written.
            remaining: seconds left in the invocation (``inf`` outside Lambda).
            extend_key: moves the in-progress record's expiry (``None``: no key to hold).
            extend_visibility: moves the message's visibility.
        """
        held = self.enter(
            label,
            timeout=timeout,
            key_lapses_in=key_lapses_in,
            remaining=remaining,
            extend_key=extend_key,
            extend_visibility=extend_visibility,
        )
        try:
            yield held
        finally:
            self.leave(held)

    def enter(
        self,
        label: str,
        *,
        timeout: float,
        key_lapses_in: float,
        remaining: float,
        extend_key: Callable[[float], None] | None,
        extend_visibility: Callable[[int], None] | None,
    ) -> Hold:
        """Start holding a job's key and message (the arguments of :meth:`hold`); end with :meth:`leave`.

        The consumer's path: no generator per record."""
        now = time.monotonic()
        held = Hold(
            label,
            timeout,
            now,
            now + remaining if math.isfinite(remaining) else math.inf,
            now + max(0.0, key_lapses_in),
            extend_key,
            extend_visibility,
        )
        self._add(id(held), held, now)
        return held

    def leave(self, held: Hold) -> None:
        """Stop holding (the job ended)."""
        with self._lock:
            self._holds.pop(id(held), None)

    def watch(self, source: HoldSource, due: float) -> None:
        """Hold a running job from ``due`` (monotonic: when its first beat would be due) on; end with
        :meth:`unwatch`. A job that ends before then, as most do, was never held: a dict entry, no lock
        and no :class:`Hold` (the consumer's path, once a record). One due within
        :data:`PROMOTE_AHEAD` is held at once."""
        now = time.monotonic()
        if due - now <= PROMOTE_AHEAD:
            self._add(id(source), source.hold(), now)
            return
        self._check_thread(now)
        self._pending[id(source)] = (source, due)

    def unwatch(self, source: HoldSource) -> None:
        """Stop watching or holding a job :meth:`watch` was given (it ended)."""
        key = id(source)
        if self._pending.pop(key, None) is None:  # held (by the thread, under the lock, or at once)
            with self._lock:
                self._holds.pop(key, None)

    def _add(self, key: int, held: Hold, now: float) -> None:
        if not self._holds:
            self._check_thread(now)
        with self._lock:
            self._holds[key] = held
        # The thread never sleeps past IDLE_SECONDS, so it is woken only for a hold due before then
        # (when it looks at the holds under ``_wake``, a notify waits for its wait: none is lost).
        if held.due() < self._wakes_at:
            with self._wake:
                self._wake.notify()

    def _check_thread(self, now: float) -> None:
        if now - self._thread_seen > THREAD_CHECK_SECONDS:
            with self._wake:  # the first hold after an idle spell: is the thread still there?
                self._ensure_thread()
                self._thread_seen = now

    def _promote(self, now: float) -> None:
        """Hold the watched jobs due within :data:`PROMOTE_AHEAD` (the thread's, each time it looks).
        A job's :meth:`unwatch` pops its entry first, or finds it gone and takes the lock this holds
        while it makes the hold, so no hold outlives its job."""
        for key, (source, due) in list(self._pending.items()):
            if due - now <= PROMOTE_AHEAD:
                with self._lock:
                    if self._pending.pop(key, None) is not None:
                        self._holds[key] = source.hold()

    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="jf-heartbeat", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._wake:
                now = time.monotonic()
                self._wakes_at = now + IDLE_SECONDS  # (a hold made while it looks: due before this?)
                if self._pending:
                    self._promote(now)
                with self._lock:
                    holds = list(self._holds.values())
                due = [h for h in holds if h.due() <= now]
                if not due:
                    nearest = min((h.due() for h in holds), default=now + IDLE_SECONDS)
                    wait = max(0.05, min(IDLE_SECONDS, nearest - now))
                    self._wakes_at = now + wait
                    self._wake.wait(wait)
                    self._wakes_at = -math.inf
                    continue
                self._wakes_at = -math.inf
            for held in due:  # outside the lock: beats call AWS
                try:
                    held.beat(time.monotonic())
                except Exception:
                    log.warning("heartbeat of job %s failed", held.label, exc_info=True)


heartbeat = Heartbeat()
"""The process's heartbeat."""
