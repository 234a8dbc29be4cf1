"""The concurrency leases this process's runs hold, and the records waiting here for one of them.

A lease is held by a delivery (its receipt: a second delivery of the same job is another holder, and
the lease item's entry, named by the job id, is freed when the last of them ends). A record over its
cap waits while a run of this process holds one of the cap's leases, in line, until its deadline
(:func:`~jobframework.concurrency.limit_wait` seconds, within the invocation's time to spare). It does
not wait where the last run of its cap here took longer than it could wait: that run's lease would
not come in time.

The run that ends hands its lease to the first in line in one write
(:meth:`~jobframework.flow.limits.ConcurrencyLimit.transfer`); a free that a record missed between its
refused take and joining the line is seen (a count of frees per cap), and it takes again at once. A
hand-over that outlasts the waiter's patience is given back by the run that made it.

A process with records waiting keeps its cap's leases while it has them: the records of other
processes go round the queue with the back-off until its line is empty (see README "Choices").
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jobframework.flow.limits import ConcurrencyLimit

log = logging.getLogger("jobframework.flow.limits")

HANDOVER_WAIT_SECONDS = 1.0
"""How long a waiter taken out of the line as its own wait ran out waits for the hand-over's one
write, at most (past it, the run gives the lease back)."""


@dataclass(slots=True)
class _Hold:
    pk: str
    job_id: str
    since: float
    """When it was taken (monotonic seconds)."""
    until: float
    """When its lease expires (monotonic seconds): a hold left past it (a run that never ended here)
    is waited for by none."""


@dataclass(slots=True, eq=False)
class _Waiter:
    job_id: str
    holder: str
    lease_seconds: float
    granted: bool = False
    """Set, under the lock, by the run that handed it its lease (before ``woken``)."""
    abandoned: bool = False
    """Set, under the lock, by a waiter that gave up on a hand-over under way: the run gives it back."""
    woken: threading.Event = field(default_factory=threading.Event)


class LocalLeases:
    """This process's holds of ``limit``'s leases, and its waiting lines (see the module docstring)."""

    def __init__(self, limit: ConcurrencyLimit) -> None:
        self.limit = limit
        self._held: dict[str, _Hold] = {}
        self._lines: dict[str, deque[_Waiter]] = {}
        self._frees: Counter[str] = Counter()
        self._last_run: dict[str, float] = {}
        """Per cap: how long the last run that ended here held its lease (seconds)."""
        self._lock = threading.Lock()

    def waiting(self, pk: str) -> int:
        """How many records wait here for a lease of ``pk``."""
        with self._lock:
            return len(self._lines.get(pk, ()))

    def take(
        self, pk: str, job_id: str, *, holder: str, cap: int, lease_seconds: float, deadline: float
    ) -> bool:
        """Take a lease of ``pk`` for ``job_id`` (held by ``holder``, its delivery), waiting until
        ``deadline`` (monotonic seconds) for one that a run here holds; ``False`` when none came."""
        while True:
            with self._lock:
                frees = self._frees[pk]
            now = time.time()
            if self.limit.acquire(pk, job_id, cap, now + lease_seconds, now):
                self._hold(holder, pk, job_id, lease_seconds)
                return True
            waiter = _Waiter(job_id, holder, lease_seconds)
            with self._lock:
                missed = self._frees[pk] != frees
                if not missed:
                    left = deadline - time.monotonic()
                    if left <= 0 or not self._held_here(pk) or self._last_run.get(pk, 0.0) > left:
                        return False  # nothing here to wait for, or not in time
                    self._lines.setdefault(pk, deque()).append(waiter)
            if missed:
                continue  # a run here freed a lease since the take was refused: take again
            if not self._wait(pk, waiter, deadline):
                return False
            if waiter.granted:
                return True
            # (woken to take one itself: the lease it was to be handed had lapsed, or the write failed)

    def release(self, holder: str) -> None:
        """Free the lease ``holder`` holds, if any, or hand it to the first record waiting here for
        one (one write either way; a failure is logged: the lease expires)."""
        with self._lock:
            hold = self._held.pop(holder, None)
            if hold is None:
                return
            self._frees[hold.pk] += 1
            self._last_run[hold.pk] = time.monotonic() - hold.since
            if any(h.job_id == hold.job_id and h.pk == hold.pk for h in self._held.values()):
                return  # another delivery of the job runs here under the same entry: it frees it
            line = self._lines.get(hold.pk)
            waiter = line.popleft() if line else None
            if line is not None and not line:
                del self._lines[hold.pk]
        try:
            if waiter is None or waiter.job_id == hold.job_id:
                self.limit.release(hold.pk, hold.job_id)  # (a waiter of the same job takes it anew)
            elif self.limit.transfer(hold.pk, hold.job_id, waiter.job_id, time.time() + waiter.lease_seconds):
                with self._lock:
                    given_up = waiter.abandoned
                    if not given_up:
                        self._hold(waiter.holder, hold.pk, waiter.job_id, waiter.lease_seconds, locked=True)
                        waiter.granted = True
                if given_up:
                    self.limit.release(hold.pk, waiter.job_id)
        except Exception:
            log.warning(
                "releasing the lease of job %s failed; it expires by itself", hold.job_id, exc_info=True
            )
        finally:
            if waiter is not None:
                waiter.woken.set()

    def _hold(self, holder: str, pk: str, job_id: str, lease_seconds: float, *, locked: bool = False) -> None:
        now = time.monotonic()
        hold = _Hold(pk, job_id, now, now + lease_seconds)
        if locked:
            self._held[holder] = hold
            return
        with self._lock:
            self._held[holder] = hold

    def _held_here(self, pk: str) -> bool:
        now = time.monotonic()
        return any(h.pk == pk and h.until > now for h in self._held.values())

    def _wait(self, pk: str, waiter: _Waiter, deadline: float) -> bool:
        """Wait in ``pk``'s line until a run hands over its lease (or says to take one); ``False``
        when the wait ran out first (the waiter has left the line)."""
        if waiter.woken.wait(max(0.0, deadline - time.monotonic())):
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
