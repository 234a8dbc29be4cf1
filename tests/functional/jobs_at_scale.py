"""Batched, profiled and backlog-aware jobs for the operating-at-scale tests."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from jobframework import JobContext, PermanentError, RetryableError, RetryPolicy, Schedule, job
from jobframework.jobs import BatchOptions, JobRegistry

registry = JobRegistry()
calls: list[list[str]] = []
ran: list[str] = []


class Email(BaseModel):
    to: str


@job(
    "scale.emails",
    registry=registry,
    batch=BatchOptions(max_size=20, max_wait=1),
    retry=RetryPolicy(max_attempts=3, base_delay=1, jitter="none"),
)
def send_emails(emails: list[Email], ctx: JobContext) -> list[Any]:
    """One SMTP session for the whole batch; each address gets its own outcome."""
    calls.append([e.to for e in emails])
    outcomes: list[Any] = []
    for e in emails:
        if e.to.startswith("bounce"):
            outcomes.append(PermanentError(f"{e.to} does not exist"))
        elif e.to.startswith("greylist"):
            outcomes.append(RetryableError(f"{e.to} greylisted", delay=1))
        else:
            outcomes.append({"sent": e.to})
    return outcomes


class Tick(BaseModel):
    n: int = 0


@job(
    "scale.rollup",
    registry=registry,
    schedule=Schedule("rate(5 minutes)"),
    when_backlogged="skip",
    backlog_depth=3,
)
def rollup(tick: Tick) -> None:
    ran.append("rollup")


@job(
    "scale.sync",
    registry=registry,
    schedule=Schedule("rate(5 minutes)"),
    when_backlogged="defer",
    backlog_depth=3,
)
def sync(tick: Tick) -> None:
    ran.append("sync")


@job("scale.filler", registry=registry)
def filler(tick: Tick) -> None:
    ran.append("filler")


@job("scale.render", registry=registry, profile="cpu", priority="low")
def render(tick: Tick) -> None:
    ran.append("render")
