"""A running job's progress on its status (``ctx.set_progress``), as BullMQ's ``job.updateProgress``.

A tracked job's status item takes the latest percent and note, at most once a second (a job that
reports every item of a loop costs a write a second, not one an item; 100 is always written), so
that ``client.status``, ``jf status`` and the console's job page show how far it is while it runs
(an ``async def`` job's write runs on the loop's executor, so that its loop goes on).
An untracked job has no status to show it on: its progress goes nowhere. Writing it never fails the
job: a failed write is logged once a run, and the job goes on.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jobframework.stores.job_records import JobRecords

log = logging.getLogger(__name__)

MIN_INTERVAL_SECONDS = 1.0
"""The least time between two writes of one run's progress (a later report waits for the next)."""
MAX_NOTE_CHARS = 200


def checked_progress(percent: object, note: object) -> tuple[float, str | None]:
    """``percent`` as a number from 0 to 100 and ``note`` as text (cut to 200 characters).

    Raises:
        ValueError: ``percent`` is not a number from 0 to 100, or ``note`` not text.

    Example:
        >>> checked_progress(40, "page 4 of 10")
        (40.0, 'page 4 of 10')
        >>> checked_progress(0.4, None)
        (0.4, None)
    """
    if isinstance(percent, bool) or not isinstance(percent, int | float) or not 0 <= percent <= 100:
        raise ValueError(
            f"set_progress takes a percent from 0 to 100, got {percent!r} (for 4 of 10 done, "
            "ctx.set_progress(40) or ctx.set_progress(100 * done / total))"
        )
    if note is not None and not isinstance(note, str):
        raise ValueError(f"set_progress's note is text, got {type(note).__name__}")
    return float(percent), (note[:MAX_NOTE_CHARS] if note else None)


class ProgressWriter:
    """Writes one run's progress to its job's status item, at most once a second."""

    def __init__(self, records: JobRecords, job_id: str) -> None:
        self.records = records
        self.job_id = job_id
        self._last = -MIN_INTERVAL_SECONDS
        self._failed = False

    def __call__(self, percent: float, note: str | None) -> None:
        now = time.monotonic()
        if percent < 100 and now - self._last < MIN_INTERVAL_SECONDS:
            return
        self._last = now
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # (a plain def job, on its worker thread: written here)
            self._write(percent, note)
            return
        loop.run_in_executor(None, self._write, percent, note)  # (an async job's loop is not blocked)

    def _write(self, percent: float, note: str | None) -> None:
        try:
            self.records.set_progress(self.job_id, percent, note)
        except Exception as exc:  # (progress is told, not kept: the job goes on)
            if not self._failed:
                self._failed = True
                log.warning("job %s: its progress could not be written: %s", self.job_id, exc)
