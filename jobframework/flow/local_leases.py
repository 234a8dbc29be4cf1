"""The concurrency leases this process's runs hold, and the records waiting here for one of them.

A lease is held by a delivery: its entry in the lease item is named by the job id and a digest of
the delivery's receipt (:func:`lease_name`), so two deliveries of one job at once (SQS delivers at
least once) are two runs under the cap, and the end of one frees its own entry only. A record over
its cap waits while a run of this process holds one of the cap's leases, in line, until its deadline
(``JF_LIMIT_WAIT`` seconds, else its job's timeout, within the invocation's time to spare). It does
not wait where the last run of its cap here took longer than it could wait: that run's lease would
not come in time.

The run that ends hands its lease to the first in line in one write
(:meth:`~jobframework.flow.limits.ConcurrencyLimit.transfer`); a free that a record missed between its
refused take and joining the line is seen (a count of frees per cap), and it takes again at once. A
hand-over that outlasts the waiter's patience is given back by the run that made it.

A record whose cap is full with no lease of it held here (the runs of other processes, or other
Lambda invocations, hold them all) looks again, for 5 s unless ``JF_LIMIT_WAIT`` says otherwise
(``poll_until``; a Lambda invocation waiting is billed, and every invocation on a capped backlog
would wait): one read after 0.05 s, the pause doubling up to 0.5 s (:func:`poll_pause`). One record
a cap polls in a process; the others wait in line behind it and are handed its lease when its run
ends. So processes sharing a capped backlog keep the cap full between them; a record used to be
handed back at once, and two processes ran at about half their cap (``bench/concurrency_cap.py``'s
two-process row).

A process with records waiting keeps its cap's leases while it has them: a record of another process
takes one when the line here is empty (see README "Choices").
"""

from __future__ import annotations

import hashlib
import logging
import random
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jobframework.flow.limits import ConcurrencyLimit

log = logging.getLogger("jobframework.flow.limits")

MAX_IDLE_CAPS = 10_000
"""Caps (job types and keys) whose counts this process keeps before it forgets the idle ones."""
POLL_FIRST_SECONDS = 0.05
POLL_MAX_SECONDS = 0.5
"""A record whose cap is full with no lease of it held here looks again (one read) after the first,
the pause doubling up to the second: one record a cap and process polls, the rest wait in line."""
POLL_REST_SECONDS = 5.0
"""After a look-again here ran out with no record in line behind it, a record of its cap held elsewhere
is handed back after one read for this long (a lane that runs one record at a time had looked 5 s a
record: 50 s of a batch of ten, billed). Not after one with a line: two jf worker processes made four
times the hand-backs, for no more jobs a second."""
HANDOVER_WAIT_SECONDS = 1.0
"""How long a waiter taken out of the line as its own wait ran out waits for the hand-over's one
write, at most (past it, the run gives the lease back)."""


def poll_pause(polls: int, left: float, rand: Callable[[float, float], float] = random.uniform) -> float:
    """Seconds until a record whose cap is held in other processes looks again, after ``polls`` looks:
    from :data:`POLL_FIRST_SECONDS`, doubling up to :data:`POLL_MAX_SECONDS`, jittered down to half
    (so processes polling one cap spread out), never past ``left``.

    Example:
        >>> [poll_pause(n, 60.0, rand=lambda low, high: high) for n in range(6)]
        [0.05, 0.1, 0.2, 0.4, 0.5, 0.5]
        >>> poll_pause(3, 0.25, rand=lambda low, high: high)
        0.25
    """
    high = min(POLL_MAX_SECONDS, POLL_FIRST_SECONDS * 2 ** min(polls, 16))
    return min(left, rand(high / 2, high))


def lease_name(job_id: str, holder: str) -> str:
    """The lease entry of ``job_id``'s delivery ``holder`` (the job id alone when they are the same).

    Example:
        >>> lease_name("j-1", "AQEBwJnKyrHigUMZj6rYigCgxlaS3SLy0a"), lease_name("j-1", "j-1")
        ('j-1@e91e0f6c8452', 'j-1')
    """
    if holder == job_id:
        return job_id
    return f"{job_id}@{hashlib.blake2b(holder.encode(), digest_size=6).hexdigest()}"


@dataclass(slots=True)
class _Hold:
    pk: str
    lease: str
    since: float
    """When it was taken (monotonic seconds)."""
    until: float
    """When its lease expires (monotonic seconds): a hold left past it (a run that never ended here)
    is waited for by none."""


@dataclass(slots=True, eq=False)
class _Waiter:
    lease: str
    holder: str
    lease_seconds: float
    cap: int
    granted: bool = False
    """Set, under the lock, by the run that handed it its lease (before ``woken``)."""
    abandoned: bool = False
    """Set, under the lock, by a waiter that gave up on a hand-over under way: the run gives it back."""
    unheld: bool = False
    """Set, under the lock, when it is woken because nothing here holds a lease or takes one."""
    woken: threading.Event = field(default_factory=threading.Event)


class LocalLeases:
    """This process's holds of ``limit``'s leases, and its waiting lines (see the module docstring)."""

    def __init__(self, limit: ConcurrencyLimit) -> None:
        self.limit = limit
        self._held: dict[str, _Hold] = {}
        self._lines: dict[str, deque[_Waiter]] = {}
        self._frees: Counter[str] = Counter()
        self._taking: Counter[str] = Counter()
        self._last_run: dict[str, float] = {}
        """Per cap: how long the last run that ended here held its lease (seconds)."""
        self._looking: set[str] = set()
        """Caps whose first in line is looking at the lease item now (one look a cap at a time)."""
        self._gave_up: dict[str, float] = {}
        """Per cap: when a look-again here last ran out (monotonic seconds)."""
        self._lock = threading.Lock()

    def waiting(self, pk: str) -> int:
        """How many records wait here for a lease of ``pk``."""
        with self._lock:
            return len(self._lines.get(pk, ()))

    def caps_kept(self) -> int:
        """How many caps this process keeps counts of (at most about :data:`MAX_IDLE_CAPS` idle)."""
        with self._lock:
            return len(
                self._frees.keys() | self._taking.keys() | self._last_run.keys() | self._gave_up.keys()
            )

    def take(
        self,
        pk: str,
        job_id: str,
        *,
        holder: str,
        cap: int,
        lease_seconds: float,
        deadline: float,
        poll_until: float | None = None,
    ) -> bool:
        """Take a lease of ``pk`` for ``job_id`` (held by ``holder``, its delivery), waiting until
        ``deadline`` (monotonic seconds) for one that a run here holds, or looking again until
        ``poll_until`` (at most ``deadline``) while other processes hold them all; ``False`` when
        none came."""
        lease = lease_name(job_id, holder)
        polls = 0
        poll_end = deadline if poll_until is None else min(deadline, poll_until)
        counted = False  # (a poll's take is counted from its pause on)
        while True:
            with self._lock:
                frees = self._frees[pk]
                if not counted:
                    self._taking[pk] += 1  # (a take under way here is a run to wait for, if it wins)
            counted = False
            taken = self._counted_acquire(pk, lease, cap, lease_seconds)
            with self._lock:
                self._taking[pk] -= 1
                if taken:
                    self._hold(holder, pk, lease, lease_seconds)
            if taken:
                return True
            waiter = _Waiter(lease, holder, lease_seconds, cap)
            poll = 0.0
            with self._lock:
                missed = self._frees[pk] != frees
                if not missed:
                    now_m = time.monotonic()
                    left = deadline - now_m
                    if left <= 0 or self._last_run.get(pk, 0.0) > left:
                        self._wake_unheld(pk)
                        return False  # not in time
                    if self._held_here(pk) or self._taking[pk] > 0:
                        self._lines.setdefault(pk, deque()).append(waiter)
                    else:  # held elsewhere: look again shortly (the records here wait in line behind)
                        if poll_end <= now_m or (not polls and self._resting(pk, now_m)):
                            if poll_end <= now_m and not self._lines.get(pk):
                                # (no line behind it: records come one at a time here, each would
                                # look its 5 s, billed; with a line, they are a batch's, which rest not)
                                self._gave_up[pk] = now_m
                            self._wake_unheld(pk)
                            return False
                        poll = poll_pause(polls, poll_end - now_m)
                        self._taking[pk] += 1
            if missed:
                continue  # a run here freed a lease since the take was refused: take again
            if poll:
                try:
                    time.sleep(poll)
                except BaseException:
                    with self._lock:
                        self._taking[pk] -= 1
                        self._wake_unheld(pk)
                    raise
                polls += 1
                counted = True
                continue
            if not self._wait(pk, waiter, deadline):
                return False
            if waiter.granted:
                return True
            if waiter.unheld:  # the look-again it waited behind gave up: so does it, if it is to rest
                with self._lock:
                    now_m = time.monotonic()
                    if poll_end <= now_m or self._resting(pk, now_m):
                        return False
            # (woken to take one itself: the lease it was to be handed had lapsed, or the write failed,
            # or nothing here holds one any more)

    def release(self, holder: str) -> None:
        """Free the lease ``holder`` holds, if any, or hand it to the first record waiting here for
        one (one write either way; a failure is logged: the lease expires)."""
        with self._lock:
            hold = self._held.pop(holder, None)
            if hold is None:
                return
            self._last_run[hold.pk] = time.monotonic() - hold.since
            if len(self._frees) > MAX_IDLE_CAPS:
                self._forget_idle()
            line = self._lines.get(hold.pk)
            waiter = line.popleft() if line else None
            if line is not None and not line:
                del self._lines[hold.pk]
        try:
            if waiter is None:
                self.limit.release(hold.pk, hold.lease)
                self._freed(hold.pk)
            elif self.limit.transfer(hold.pk, hold.lease, waiter.lease, time.time() + waiter.lease_seconds):
                with self._lock:
                    given_up = waiter.abandoned
                    if not given_up:
                        self._hold(waiter.holder, hold.pk, waiter.lease, waiter.lease_seconds)
                        waiter.granted = True
                if given_up:
                    self.limit.release(hold.pk, waiter.lease)
                    self._freed(hold.pk)
            else:  # its lease had lapsed, or the waiter's entry is there already: free its own entry
                self.limit.release(hold.pk, hold.lease)  # (it had stayed, a slot, until it expired)
                self._freed(hold.pk)
        except Exception:
            log.warning("releasing the lease %s failed; it expires by itself", hold.lease, exc_info=True)
        finally:
            if waiter is not None:
                waiter.woken.set()

    def _counted_acquire(
        self, pk: str, lease: str, cap: int, lease_seconds: float, *, looking: bool = False
    ) -> bool:
        """The conditional write of a take the caller counted in ``_taking``; called without the lock
        (it takes it), the caller counts the take out under the lock afterwards, with what it makes of
        the answer. One that raises is counted out here, ends the head of the line's look
        (``looking``) and wakes the records in line behind it, which must not wait on it."""
        try:
            now = time.time()
            return self.limit.acquire(pk, lease, cap, now + lease_seconds, now)
        except BaseException:
            with self._lock:
                self._taking[pk] -= 1
                if looking:
                    self._looking.discard(pk)
                self._wake_unheld(pk)
            raise

    def _resting(self, pk: str, now: float) -> bool:
        """Under the lock: whether a look-again of ``pk`` ran out here less than
        :data:`POLL_REST_SECONDS` before ``now`` (monotonic): a record of it is handed back after one
        read, not looking again."""
        return now - self._gave_up.get(pk, float("-inf")) < POLL_REST_SECONDS

    def _freed(self, pk: str) -> None:
        """A lease of ``pk`` was freed to the item (written; a hand-over is no free): a take refused
        just before sees it and takes again, and so does a look at the head of the line."""
        with self._lock:
            self._frees[pk] += 1

    def _hold(self, holder: str, pk: str, lease: str, lease_seconds: float) -> None:
        """Under the lock: ``holder`` holds ``lease``."""
        now = time.monotonic()
        self._held[holder] = _Hold(pk, lease, now, now + lease_seconds)

    def _forget_idle(self) -> None:
        """Under the lock: drop what is kept of the caps with no hold, take or line here (a per-key cap,
        a customer's, would otherwise keep an entry a key for the process's life)."""
        busy = (
            {h.pk for h in self._held.values()} | set(self._lines) | {k for k, n in self._taking.items() if n}
        )
        for kept in (self._frees, self._taking, self._last_run, self._gave_up):
            for pk in [k for k in kept if k not in busy]:
                del kept[pk]

    def _wake_unheld(self, pk: str) -> None:
        """Under the lock: with no run here holding a lease of ``pk`` nor a take of one under way, the
        records in its line (come for a take that then lost) are woken to take one themselves."""
        if self._held_here(pk) or self._taking[pk] > 0:
            return
        for waiter in self._lines.pop(pk, ()):
            waiter.unheld = True
            waiter.woken.set()

    def _look_at_head(self, pk: str, waiter: _Waiter) -> bool:
        """The first in line takes a lease of ``pk`` that another process freed, if there is one
        (one read); ``True`` when it holds one, or when a run here freed one meanwhile (it is woken to
        take it). A line had waited for its own process's runs only, while leases freed elsewhere
        went unused."""
        with self._lock:
            line = self._lines.get(pk)
            if not line or line[0] is not waiter or pk in self._looking:  # (one look a cap at a time)
                return False
            line.popleft()  # (out of line while it looks: no run hands it a lease meanwhile)
            if not line:
                del self._lines[pk]
            self._looking.add(pk)
            frees = self._frees[pk]
            self._taking[pk] += 1
        taken = self._counted_acquire(pk, waiter.lease, waiter.cap, waiter.lease_seconds, looking=True)
        with self._lock:
            self._taking[pk] -= 1
            self._looking.discard(pk)
            if taken:
                self._hold(waiter.holder, pk, waiter.lease, waiter.lease_seconds)
                waiter.granted = True
            elif self._frees[pk] != frees:  # a run here freed one while it looked: take it
                waiter.woken.set()
            elif self._held_here(pk) or self._taking[pk] > 0:
                self._lines.setdefault(pk, deque()).appendleft(waiter)  # (its place kept)
            else:  # nothing here to wait for any more: the line looks again as any record would
                waiter.unheld = True
                waiter.woken.set()
                self._wake_unheld(pk)
        return taken or waiter.woken.is_set()

    def _held_here(self, pk: str) -> bool:
        now = time.monotonic()
        return any(h.pk == pk and h.until > now for h in self._held.values())

    def _wait(self, pk: str, waiter: _Waiter, deadline: float) -> bool:
        """Wait in ``pk``'s line until a run hands over its lease (or says to take one); ``False``
        when the wait ran out first (the waiter has left the line). The first in line looks at the
        lease item every :data:`POLL_MAX_SECONDS` too, for a lease freed by another process."""
        while (left := deadline - time.monotonic()) > 0:
            if waiter.woken.wait(min(left, POLL_MAX_SECONDS)):
                return True
            if deadline > time.monotonic() and self._look_at_head(pk, waiter):
                return True
        if waiter.woken.is_set():
            return True
        with self._lock:
            line = self._lines.get(pk)
            if line is not None and waiter in line:
                line.remove(waiter)
                if not line:
                    del self._lines[pk]
                return False
        # A run that ended took it out of the line just now: the hand-over's write is under way.
        if waiter.woken.wait(HANDOVER_WAIT_SECONDS):
            return True
        with self._lock:
            if waiter.granted:
                return True
            waiter.abandoned = True  # (the run gives the lease back when its write returns)
        return False
