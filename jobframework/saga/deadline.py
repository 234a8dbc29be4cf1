"""The deadline check job of a saga's waits (``jf.saga.deadline``)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from jobframework.jobs import Job, JobRegistry, Priority, job

DEADLINE_JOB = "jf.saga.deadline"
"""The job that checks a wait's deadline (registered when a saga has a wait)."""
DEADLINE_TOLERANCE_SECONDS = 1.0
"""A deadline check delivered this early counts as on time (SQS delays are whole seconds)."""


class DeadlineCheck(BaseModel):
    model_config = ConfigDict(defer_build=True)  # built on first use, not at cold start
    saga_id: str
    wait: str


def _check_deadline(check: DeadlineCheck) -> None:
    """Nothing to do in the job itself: the consumer's saga hook compares the deadline with the clock."""


def deadline_job(registry: JobRegistry) -> Job[Any]:
    found = registry.find(DEADLINE_JOB)
    if found is not None:
        return found
    return job(DEADLINE_JOB, priority=Priority.HIGH, timeout=10, registry=registry)(_check_deadline)
