"""A tracked job's outcome is written soon after it ends, not only when its whole batch has.

The statuses of a batch are written together when it ends (one ``BatchWriteItem``): for a batch of
quick jobs, one request. But a batch can run long: a neighbour that waits on a slow downstream, or a
``cpu`` lane that runs its records one after the other. Its finished jobs would read ``queued`` (or
``running``, then ``queued`` once the start claim's lease lapses) until the last record ended, and a
cancel in that time would answer ``cancelled`` for a job that had run.

So once a batch has run :data:`EARLY_SECONDS`, the statuses of the records that have ended are written
then, and each one that ends later is written as it ends. A batch that ends sooner writes once, as
before. Only verdicts that the settler will not change are written early: a success or a retry of a
job outside a saga (a saga is told first, and its telling may turn the verdict into a retry), never a
dead letter (its send may fail, and the record then comes back). A write that fails is left to the
batch's own write at the end (and logged there if it fails again).
"""

from __future__ import annotations

import logging
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


class EarlyStatuses:
    """The statuses a batch writes before it ends (one per batch; thread-safe: records end on the
    pool's threads, and a timer thread writes those that ended while the others run)."""

    def __init__(self, state: StateStore, *, after: float = EARLY_SECONDS) -> None:
        self._state = state
        self._after = after
        self._started = time.monotonic()
        self._lock = threading.Condition()
        self._pending: list[Verdict] = []
        self._timer: threading.Timer | None = None
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
                left = self._after - (time.monotonic() - self._started)
                if left > 0:
                    if self._timer is None:
                        self._timer = threading.Timer(left, self._on_time)
                        self._timer.daemon = True
                        self._timer.start()
                    return
                self._late = True
            taken = self._take()
        self._write(taken)

    def close(self) -> None:
        """The batch's records have all ended: stop writing early, and wait for a write under way (the
        settler then notes what is left, for the batch's one write)."""
        with self._lock:
            self._closed = True
            timer, self._timer = self._timer, None
            while self._writing:
                self._lock.wait()
        if timer is not None:
            timer.cancel()

    def _on_time(self) -> None:
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
