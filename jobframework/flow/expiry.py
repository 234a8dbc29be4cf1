"""Expiry: a job not started by its deadline is dropped with status ``expired``.

The deadline travels in the envelope (``deadline``, UTC): ``enqueue(..., expires_in=...)`` or the
job's ``@job(expires_after=...)``, counted from the enqueue. A retry after a run has started is not
dropped: expiry is about work that waited too long to begin, not about work in progress.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from jobframework.flow.outcome import Drop
from jobframework.state import JobState

if TYPE_CHECKING:
    from jobframework.envelope import Envelope
    from jobframework.jobs import Job

log = logging.getLogger(__name__)


def deadline_of(enqueued_at: datetime, expires_in: float | None) -> datetime | None:
    return None if expires_in is None else enqueued_at + timedelta(seconds=expires_in)


def expiry_gate(env: Envelope, job: Job[Any], payload: Any, attempt: int, now: float) -> Drop | None:
    """Drop a job whose first run has not started by its deadline."""
    if env.deadline is None or attempt > 1 or now <= env.deadline.timestamp():
        return None
    late = now - env.deadline.timestamp()
    log.warning("job %s (%s) expired %.1fs ago without starting; dropped", env.id, env.type, late)
    return Drop(JobState.EXPIRED, f"not started by its deadline {env.deadline.isoformat()}", "Expired")
