"""A tracked job's outcome is written soon after it ends, not only when its whole batch has.

The statuses of a batch are written together when it ends (one ``BatchWriteItem``): for a batch of
quick jobs, one request. But a batch can run long: a neighbour that waits on a slow downstream, or a
``cpu`` lane that runs its records one after the other. Its finished jobs would read ``queued`` (or
``running``, then ``queued`` once the start claim's lease lapses) until the last record ended, and a
cancel in that time would answer ``cancelled`` for a job that had run.

So once a batch has run :data:`EARLY_SECONDS`, the statuses of the records that have ended are written
then (by one daemon thread a process, :class:`_Flusher`: a thread a batch cost 150 us to start), and
each one that ends later is written as it ends (a batched job's items end before the batch's other
records run: they are offered then). A batch that ends sooner writes once, as before. Only verdicts
that the settler will not change are written early: a success or a retry of a job outside a saga (a
saga is told first, and its telling may turn the verdict into a retry), never a dead letter (its send
may fail, and the record then comes back). A write that fails is left to the batch's own write at the
end (and logged there if it fails again).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Any

from jobframework.settler import status_of
from jobframework.verdict import Kind, Verdict

if TYPE_CHECKING:
    from jobframework.state import StateStore

log = logging.getLogger("jobframework.consumer")

EARLY_SECONDS = 1.0
"""How long a batch runs before its ended records' statuses are written without waiting for it."""


MIN_WAKE_SECONDS = 0.1
"""The flusher wakes at most this often (a quick batch's deadline passes after it ended: nothing to do)."""


class _Flusher:
    """One daemon thread a process that writes, once each batch's deadline has passed, the statuses
    its ended records hold (a batch closed by then is dropped unread)."""

    def __init__(self) -> None:
        self._due: list[tuple[float, EarlyStatuses]] = []
        self._wake = threading.Condition(threading.Lock())
        self._thread: threading.Thread | None = None
        os.register_at_fork(after_in_child=self._forked)

    def _forked(self) -> None:  # a forked child has no thread, and its parent's batches are not its own
        self._due = []
        self._wake = threading.Condition(threading.Lock())
        self._thread = None

    def watch(self, batch: EarlyStatuses, deadline: float) -> None:
        with self._wake:
            earliest = min((d for d, _ in self._due), default=None)
            self._due.append((deadline, batch))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="jf-early-status", daemon=True)
                self._thread.start()
            elif earliest is None or deadline < earliest:  # (it waits for no deadline, or a later one)
                self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._wake:
                now = time.monotonic()
                ready = [b for d, b in self._due if d <= now]
                if not ready:
                    first = min((d for d, _ in self._due), default=None)
                    self._wake.wait(None if first is None else max(MIN_WAKE_SECONDS, first - now))
                    continue
                self._due = [(d, b) for d, b in self._due if d > now]
            for batch in ready:
                batch.on_time()


_flusher = _Flusher()


class EarlyStatuses:
    """The statuses a batch writes before it ends (one per batch; thread-safe: records end on the
    pool's threads, and the flusher's thread writes those that ended while the others run)."""

    def __init__(self, state: StateStore, *, after: float | None = None) -> None:
        self._state = state
        self._after = EARLY_SECONDS if after is None else after  # (read now: a test may set it)
        self._started = time.monotonic()
        self._lock = threading.Condition()
        self._pending: list[Verdict] = []
        self._watched = False
        self._late = False
        """The batch has run ``after`` seconds: each verdict is written as it comes."""
        self._writing = 0
        self._closed = False

    def offer(self, v: Verdict) -> None:
        """A record's verdict, as it ends: written now if the batch is late, else held until it is."""
        if v.status is None or v.saga is not None or v.kind not in (Kind.SUCCEEDED, Kind.RETRY):
            return
        env = v.delivery.envelope
        if env is None or not env.track:
            return
        with self._lock:
            if self._closed:
                return
            self._pending.append(v)
            if not self._late:
                if time.monotonic() - self._started < self._after:
                    if not self._watched:
                        self._watched = True
                        _flusher.watch(self, self._started + self._after)
                    return
                self._late = True
            taken = self._take()
        self._write(taken)

    def close(self) -> None:
        """The batch's records have all ended: stop writing early, and wait for a write under way (the
        settler then notes what is left, for the batch's one write)."""
        with self._lock:
            self._closed = True
            while self._writing:
                self._lock.wait()

    def on_time(self) -> None:
        """The batch has run :data:`EARLY_SECONDS` (the flusher calls it): write what has ended."""
        with self._lock:
            if self._closed:
                return
            self._late = True
            taken = self._take()
        self._write(taken)

    def _take(self) -> list[tuple[Verdict, Any]]:
        """The pending verdicts and their statuses, taken from the settler (under the lock)."""
        taken = [(v, v.status) for v in self._pending]
        self._pending.clear()
        for v, _ in taken:
            v.status = None
        if taken:
            self._writing += 1
        return taken

    def _write(self, taken: list[tuple[Verdict, Any]]) -> None:
        if not taken:
            return
        items: dict[str, dict[str, Any]] = {}
        try:
            for v, status in taken:
                status_of(v, items, status)
            self._state.put_statuses(list(items.values()))
        except Exception:
            log.debug(
                "writing %d statuses before the batch ends failed; left to its end", len(taken), exc_info=True
            )
            for v, status in taken:
                v.status = status
        finally:
            with self._lock:
                self._writing -= 1
                self._lock.notify_all()
