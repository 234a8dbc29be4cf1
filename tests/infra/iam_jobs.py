"""The small job package of the IAM-enforced test: one job per path whose grants it checks."""

from __future__ import annotations

from collections import Counter
from typing import Any

from pydantic import BaseModel

from jobframework import JobContext, PermanentError, RetryableError, RetryPolicy, job
from jobframework.jobs import JobRegistry
from jobframework.saga import saga, step

REGISTRY = JobRegistry()
ran: Counter[str] = Counter()
"""Runs by task name."""


class Task(BaseModel):
    name: str
    blob: str = ""
    """Long enough, over the client's offload threshold, to travel through the payload bucket."""


class Reserved(Task):
    reservation: str


@job("iam.tracked", registry=REGISTRY, track=True, priority="high")
def tracked(task: Task) -> int:
    """Tracked and idempotent (the default): status writes and idempotency records."""
    ran[task.name] += 1
    return len(task.blob)


@job("iam.keyed", registry=REGISTRY, priority="high", key=lambda t: f"keyed:{t.name}", dedup_window=600)
def keyed(task: Task) -> None:
    ran[task.name] += 1


@job("iam.rated", registry=REGISTRY, priority="high", rate="1/hour")
def rated(task: Task) -> None:
    """One start an hour: the second of a batch is handed back to its queue."""
    ran[task.name] += 1


@job(
    "iam.flaky",
    registry=REGISTRY,
    track=True,
    priority="high",
    retry=RetryPolicy(max_attempts=3, base_delay=1, max_delay=1, jitter="none"),
)
def flaky(task: Task, ctx: JobContext) -> None:
    """Fails its first attempt with a retryable error (a visibility change), then succeeds."""
    ran[task.name] += 1
    if ctx.attempt == 1:
        raise RetryableError("downstream busy", delay=1)


@job(
    "iam.ordered",
    registry=REGISTRY,
    priority="high",
    ordered_by=lambda t: "group-1",
    retry=RetryPolicy(max_attempts=3, base_delay=1, max_delay=1, jitter="none"),
)
def ordered(task: Task, ctx: JobContext) -> None:
    """A FIFO lane: ``ordered-1`` fails its first attempt, which holds back ``ordered-2`` of its group
    (released, received again: its hand-backs are read back with ``BatchGetItem``)."""
    ran[task.name] += 1
    if task.name == "ordered-1" and ctx.attempt == 1:
        raise RetryableError("downstream busy", delay=1)


@job("iam.declined", registry=REGISTRY, track=True, priority="low")
def declined(task: Task) -> None:
    """Dead-lettered at once."""
    ran[task.name] += 1
    raise PermanentError(f"{task.name} declined")


@job("iam.reserve", registry=REGISTRY, track=True, priority="high")
def reserve(task: Task) -> dict[str, Any]:
    ran[f"reserve:{task.name}"] += 1
    return {"reservation": f"r-{task.name}"}


@job("iam.confirm", registry=REGISTRY, track=True, priority="high")
def confirm(task: Reserved) -> None:
    ran[f"confirm:{task.reservation}"] += 1


order = saga("iam.order", steps=[step(reserve), step(confirm)], registry=REGISTRY)
