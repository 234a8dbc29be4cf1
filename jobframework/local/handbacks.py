"""``jf dev``'s console without the flood of routine hand-backs.

A record over a concurrency or rate limit, held back behind its FIFO group, or waiting for its
debounce window is handed back unrun, not as an attempt, and comes back by itself: 20 jobs held by
``concurrency=1`` make dozens of such ``released`` lines. :class:`QuietHandBacks` lets the first of
each job type and reason through, with a note, then one line per :data:`SUMMARY_SECONDS` at most
that counts them; ``jf dev -v`` (and ``--json``) print every one. So are the dead letters of a spent
retry budget (an outage's hundreds alike). Any other outcome, a hand-back for lack of time or because
the limits could not be read included, is always printed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from jobframework.classification import Reason
from jobframework.delivery import Outcome
from jobframework.fifo import HELD_BACK
from jobframework.throttle import THROTTLED

ROUTINE_REASONS = frozenset(
    {"concurrency limit", "rate limit", "debounce window still open", HELD_BACK, THROTTLED}
)
"""The reasons of the hand-backs that are the limits doing their work (``jobframework.flow.limits``,
``jobframework.flow.debounce``, ``jobframework.fifo``), and a downstream's throttles
(``jobframework.throttle``: an outage's hundreds alike)."""
SUMMARY_SECONDS = 30.0
"""At most one line per job type and reason in this many seconds, after the first."""


@dataclass(slots=True)
class _Count:
    since: float
    count: int = 0


class QuietHandBacks(logging.Filter):
    """Drops the outcome records of routine hand-backs but the first and one per ``every`` seconds
    (per job type and reason), which get a ``note`` key that the console prints at the line's end.

    Example:
        >>> now = [0.0]
        >>> quiet = QuietHandBacks(every=30, clock=lambda: now[0])
        >>> def released():
        ...     return logging.makeLogRecord({"outcome": "released", "job_type": "crm.sync",
        ...                                   "reason": "concurrency limit"})
        >>> first = released(); quiet.filter(first)
        True
        >>> first.note
        'more hand-backs of crm.sync (concurrency limit): one line per 30 s; jf dev -v shows each'
        >>> quiet.filter(released())
        False
        >>> now[0] = 31.0
        >>> later = released(); quiet.filter(later), later.note
        (True, '2 hand-backs of crm.sync (concurrency limit) in the last 31 s')
        >>> def spent():  # (an outage past the retry budget)
        ...     return logging.makeLogRecord({"outcome": "dead_lettered", "job_type": "inventory.sync",
        ...                                   "reason": "budget", "lane": "default"})
        >>> first = spent(); quiet.filter(first), quiet.filter(spent())
        (True, False)
        >>> first.note.split("; ")[-1]
        'jf dlq peek default --reason budget lists them'
        >>> quiet.filter(logging.makeLogRecord({"outcome": "dead_lettered", "job_type": "inventory.sync",
        ...                                     "reason": "exhausted"}))
        True
    """

    def __init__(self, every: float = SUMMARY_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.every = every
        self._clock = clock
        self._counts: dict[tuple[str, str], _Count] = {}
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        reason = getattr(record, "reason", None)
        outcome = getattr(record, "outcome", None)
        if outcome == Outcome.RELEASED and reason in ROUTINE_REASONS:
            what = "hand-backs"
        elif outcome == Outcome.DEAD_LETTERED and reason == Reason.BUDGET:  # (an outage's many)
            what = "dead letters"  # (an outage past the retry budget: hundreds alike, an on-call trial)
        else:
            return True
        job_type = str(getattr(record, "job_type", None) or "(no job type)")
        now = self._clock()
        with self._lock:
            seen = self._counts.get((job_type, str(reason)))
            if seen is None:
                self._counts[(job_type, str(reason))] = _Count(now)
                lane = getattr(record, "lane", None) or getattr(record, "priority", None)
                listed = f"; jf dlq peek {lane} --reason budget lists them" if what == "dead letters" else ""
                record.note = (
                    f"more {what} of {job_type} ({reason}): one line per {self.every:g} s; "
                    f"jf dev -v shows each{listed}"
                )
                return True
            seen.count += 1
            if now - seen.since < self.every:
                return False
            record.note = f"{seen.count} {what} of {job_type} ({reason}) in the last {now - seen.since:.0f} s"
            seen.since, seen.count = now, 0
            return True
