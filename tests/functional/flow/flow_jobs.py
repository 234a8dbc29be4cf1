"""Jobs the flow-control tests run, in a registry of their own."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

from pydantic import BaseModel

from jobframework import JobContext, RetryPolicy, job
from jobframework.jobs import JobRegistry

registry = JobRegistry()
calls: Counter[str] = Counter()
ran: list[dict[str, Any]] = []
started = threading.Event()
_lock = threading.Lock()


class Item(BaseModel):
    name: str
    fail_times: int = 0
    tenant: str = "t0"


def _note(item: Item, ctx: JobContext, **extra: Any) -> None:
    with _lock:
        calls[item.name] += 1
        ran.append({"name": item.name, "id": ctx.job_id, "attempt": ctx.attempt, **extra})


@job("f.ok", registry=registry, priority="high")
def ok(item: Item, ctx: JobContext) -> None:
    _note(item, ctx)


@job(
    "f.flaky", registry=registry, retry=RetryPolicy(max_attempts=3, base_delay=1, max_delay=1, jitter="none")
)
def flaky(item: Item, ctx: JobContext) -> None:
    _note(item, ctx)
    if ctx.attempt <= item.fail_times:
        raise ConnectionError("downstream reset the connection")


@job("f.long", registry=registry, timeout=20)
def long_running(item: Item, ctx: JobContext) -> str:
    """Works in steps until told to stop (at most 15 s)."""
    started.set()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if ctx.cancelled:
            _note(item, ctx, stopped=True)
            return "stopped"
        time.sleep(0.05)
    _note(item, ctx, stopped=False)
    return "done"


@job("f.expiring", registry=registry, priority="low", expires_after=1.0)
def expiring(item: Item, ctx: JobContext) -> None:
    _note(item, ctx)
