"""What a running job knows about itself: :class:`JobContext`, its function's second parameter."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from jobframework.core import Priority


@dataclass(slots=True)
class JobContext:
    """What a running job knows about itself.

    Durations are seconds; ``remaining_time`` is what is left of the Lambda invocation.
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
    _remaining: Callable[[], float] = field(default=lambda: float("inf"), repr=False)

    @property
    def remaining_time(self) -> float:
        """Seconds left before the Lambda invocation is cut off (``inf`` outside Lambda)."""
        return self._remaining()

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
