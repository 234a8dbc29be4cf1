"""What a running job knows about itself: :class:`JobContext`, its function's second parameter."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from jobframework.core import Priority


@dataclass(slots=True)
class JobContext:
    """What a running job knows about itself.

    Durations are seconds; ``remaining_time`` is what is left of the Lambda invocation (or of the
    emulated one: ``jf dev``'s is its shared function's timeout, ``run_inline``'s the job's timeout and
    5 s), ``time_left`` what is left of the job's own ``timeout`` within it: the same in every one.
    """

    job_id: str
    job_type: str
    key: str
    attempt: int
    max_attempts: int
    priority: Priority
    enqueued_at: datetime
    trace_id: str | None = None
    traceparent: str | None = None
    xray_trace_header: str | None = None
    saga: dict[str, Any] | None = None
    logger: Any = field(default_factory=lambda: logging.getLogger("jobframework.job"))
    """Powertools Logger in the consumer (job id, type and trace id on every line); inline
    (``run_inline``) a standard logger whose records carry the same keys (``record.job_id``, ...)."""
    timeout: float = math.inf
    """The job's ``timeout=``: what this attempt may take. It is not enforced (Python cannot stop a
    running thread): past it the job's key and message stay held and the overrun is logged and
    counted. A job that must stop in time checks :attr:`time_left` (Celery's soft time limit)."""
    _remaining: Callable[[], float] = field(default=lambda: float("inf"), repr=False)
    _started: float = field(default_factory=time.monotonic, repr=False)
    _progress_sink: Callable[[float, str | None], None] | None = field(default=None, repr=False)
    progress: tuple[float, str | None] | None = None
    """The last :meth:`set_progress` of this run (percent, note): what a test asserts on."""

    def set_progress(self, percent: float, note: str | None = None) -> None:
        """Say how far the job is, 0 to 100, with an optional note (BullMQ's ``updateProgress``).

        A tracked job's status shows it while it runs (``client.status(id).progress``, ``jf
        status``, the console's job page), written at most once a second (100 always); an untracked
        job's goes nowhere. A failed write never fails the job.

        Raises:
            ValueError: ``percent`` is not a number from 0 to 100.

        Example:
            >>> for n, page in enumerate(pages, 1):       # doctest: +SKIP
            ...     render(page)
            ...     ctx.set_progress(100 * n / len(pages), f"page {n} of {len(pages)}")
        """
        from jobframework.progress import checked_progress

        self.progress = checked_progress(percent, note)
        if self._progress_sink is not None:
            self._progress_sink(*self.progress)

    @property
    def remaining_time(self) -> float:
        """Seconds left before the Lambda invocation is cut off (the emulated one's under ``jf dev``
        and ``run_inline``; ``inf`` without one)."""
        return self._remaining()

    @property
    def time_left(self) -> float:
        """Seconds left of the job's ``timeout`` since this attempt started, never more than
        :attr:`remaining_time` (0 once it is past).

        Example:
            >>> from datetime import UTC, datetime
            >>> ctx = JobContext("j-1", "a.job", "j-1", 1, 3, Priority.DEFAULT, datetime.now(UTC), timeout=30)
            >>> 29 < ctx.time_left <= 30
            True
        """
        left = self.timeout - (time.monotonic() - self._started)
        return max(0.0, min(left, self.remaining_time))

    @property
    def is_last_attempt(self) -> bool:
        return self.attempt >= self.max_attempts

    @property
    def cancelled(self) -> bool:
        """``True`` once ``client.cancel(job_id)`` asked this job to stop (read at most once a second).

        A long job checks it between steps and returns (or raises) to stop early; see
        :mod:`jobframework.flow.cancel`. Always ``False`` outside the consumer.
        """
        from jobframework.flow.cancel import cancel_requested

        return cancel_requested(self.job_id)

    def stop_if_cancelled(self) -> None:
        """Raise :class:`~jobframework.errors.JobCancelled` once the job was cancelled: the run ends
        there, with status ``cancelled`` (no retry). Call it between steps of a long job.

        Example:
            >>> for chunk in chunks:              # doctest: +SKIP
            ...     ctx.stop_if_cancelled()
            ...     upload(chunk)
        """
        if self.cancelled:
            from jobframework.errors import JobCancelled

            raise JobCancelled(f"job {self.job_id} was cancelled while running")
