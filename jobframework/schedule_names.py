"""The name of a job's EventBridge schedule, which the stack, ``jf dev`` and the console share."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from jobframework.errors import ConfigurationError

MAX_SCHEDULE_NAME = 64
"""EventBridge Scheduler's longest schedule name."""


def schedule_name(prefix: str, job_name: str) -> str:
    """The EventBridge schedule of ``job_name``: ``<app>-<stage>-<job, dots as hyphens>``; a name over
    64 characters keeps its first 55 and ends in 8 hex digits of the job name's SHA-256, so that two
    long names that begin alike stay apart.

    >>> schedule_name("jf-dev", "reports.nightly")
    'jf-dev-reports-nightly'
    >>> len(schedule_name("jf-dev", "reports." + "x" * 80))
    64
    """
    plain = f"{prefix}-{job_name.replace('.', '-')}"
    if len(plain) <= MAX_SCHEDULE_NAME:
        return plain
    digest = hashlib.sha256(job_name.encode()).hexdigest()[:8]
    return f"{plain[: MAX_SCHEDULE_NAME - 9]}-{digest}"


def refuse_shared_schedule_names(named: Iterable[tuple[str, str]]) -> None:
    """Refuse two jobs that would share one schedule (``(schedule name, job name)`` pairs): names that
    differ only in dots and hyphens.

    Raises:
        ConfigurationError: naming both jobs.
    """
    seen: dict[str, str] = {}
    for name, job in named:
        other = seen.setdefault(name, job)
        if other != job:
            raise ConfigurationError(
                f"jobs {other} and {job} would share the schedule {name} (a schedule's name "
                "writes a job's dots as hyphens); rename one of them"
            )
