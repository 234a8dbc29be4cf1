"""Ordered jobs the FIFO tests run, in a registry of their own; each run is noted in a ledger."""

from __future__ import annotations

import threading
import time
from typing import Any

from pydantic import BaseModel

from jobframework import JobContext, PermanentError, RetryPolicy, job
from jobframework.jobs import JobRegistry

registry = JobRegistry()
ledger: list[dict[str, Any]] = []
"""One entry per run: account, seq, attempt, outcome, start and end (``time.monotonic()``)."""
_lock = threading.Lock()


class Entry(BaseModel):
    account_id: str
    seq: int
    fail_times: int = 0
    permanent: bool = False
    sleep: float = 0.0


@job(
    "ledger.apply",
    registry=registry,
    ordered_by=lambda e: e.account_id,
    retry=RetryPolicy(max_attempts=5, base_delay=1, max_delay=1, jitter="none"),
)
def apply(entry: Entry, ctx: JobContext) -> None:
    started = time.monotonic()
    if entry.sleep:
        time.sleep(entry.sleep)
    failed = ctx.attempt <= entry.fail_times
    with _lock:
        ledger.append(
            {
                "account": entry.account_id,
                "seq": entry.seq,
                "attempt": ctx.attempt,
                "ok": not failed,
                "started": started,
                "ended": time.monotonic(),
            }
        )
    if failed and entry.permanent:
        raise PermanentError(f"account {entry.account_id} entry {entry.seq}: refused")
    if failed:
        raise ConnectionError(f"account {entry.account_id} entry {entry.seq}: downstream reset")


@job(
    "ledger.post",
    registry=registry,
    ordered_by=lambda e: e.account_id,
    key=lambda e: f"post:{e.account_id}:{e.seq}",
    track=True,
)
def post(entry: Entry) -> int:
    """Ordered, keyed by its payload and tracked (a producer that sends one event twice)."""
    with _lock:
        ledger.append({"account": entry.account_id, "seq": entry.seq, "attempt": 1, "ok": True})
    return entry.seq


@job("ledger.audit", registry=registry, key=lambda e: f"audit:{e.account_id}:{e.seq}")
def audit(entry: Entry) -> None:
    """A job that is not ordered, on the same priority: it keeps the standard queue."""
