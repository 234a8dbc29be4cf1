"""Jobs the flow-control tests run, in a registry of their own."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

from pydantic import BaseModel

from jobframework import JobContext, RetryPolicy, Throttled, job
from jobframework.jobs import BatchOptions, JobRegistry

registry = JobRegistry()
calls: Counter[str] = Counter()
ran: list[dict[str, Any]] = []
started = threading.Event()
hold = threading.Event()
"""Set by a test to end the runs of ``f.capped_one`` named ``hold...``."""
_lock = threading.Lock()


class Item(BaseModel):
    name: str
    fail_times: int = 0
    tenant: str = "t0"


def _note(item: Item, ctx: JobContext, **extra: Any) -> None:
    with _lock:
        calls[item.name] += 1
        ran.append({"name": item.name, "id": ctx.job_id, "attempt": ctx.attempt, **extra})


@job("f.ok", registry=registry, track=True, priority="high")
def ok(item: Item, ctx: JobContext) -> None:
    _note(item, ctx)


@job(
    "f.flaky",
    registry=registry,
    track=True,
    retry=RetryPolicy(max_attempts=3, base_delay=1, max_delay=1, jitter="none"),
)
def flaky(item: Item, ctx: JobContext) -> None:
    _note(item, ctx)
    if ctx.attempt <= item.fail_times:
        raise ConnectionError("downstream reset the connection")


@job("f.long", registry=registry, track=True, timeout=20)
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


@job("f.fails_late", registry=registry, track=True, retry=RetryPolicy(max_attempts=1))
def fails_late(item: Item, ctx: JobContext) -> None:
    """Its last attempt fails a second after it starts, whatever a cancel says meanwhile."""
    started.set()
    time.sleep(1.0)
    raise ConnectionError("downstream reset the connection")


@job("f.expiring", registry=registry, track=True, priority="low", expires_after=1.0)
def expiring(item: Item, ctx: JobContext) -> None:
    _note(item, ctx)


class Ledger:
    """Runs in progress and the most seen at once, per key (a job's own count of its concurrency)."""

    def __init__(self) -> None:
        self.now: Counter[str] = Counter()
        self.peak: Counter[str] = Counter()
        self.starts: list[float] = []
        self.lock = threading.Lock()

    def clear(self) -> None:
        with self.lock:
            self.now.clear()
            self.peak.clear()
            self.starts.clear()

    def enter(self, *keys: str) -> None:
        with self.lock:
            self.starts.append(time.time())
            for key in keys:
                self.now[key] += 1
                self.peak[key] = max(self.peak[key], self.now[key])

    def leave(self, *keys: str) -> None:
        with self.lock:
            for key in keys:
                self.now[key] -= 1


ledger = Ledger()


@job("f.capped", registry=registry, track=True, concurrency=2, timeout=10)
def capped(item: Item, ctx: JobContext) -> None:
    ledger.enter("all")
    try:
        time.sleep(0.3)
        _note(item, ctx)
    finally:
        ledger.leave("all")


@job("f.capped_one", registry=registry, concurrency=1, timeout=10)
def capped_one(item: Item, ctx: JobContext) -> None:
    """One at a time; a run named ``hold...`` lasts until the test sets :data:`hold` (5 s at most)."""
    ledger.enter("one")
    try:
        if item.name.startswith("hold"):
            hold.wait(5)
        else:
            time.sleep(0.05)
        _note(item, ctx)
    finally:
        ledger.leave("one")


@job("f.capped_batch", registry=registry, concurrency=2, batch=BatchOptions(max_size=10, max_wait=0))
def capped_batch(items: list[Item]) -> None:
    """A batched job under a cap: each item of a call holds a lease."""
    with _lock:
        ran.extend({"name": i.name} for i in items)


@job(
    "f.grp_batch",
    registry=registry,
    concurrency=1,
    limit_group="grp",
    batch=BatchOptions(max_size=10, max_wait=0),
)
def grp_batch(items: list[Item]) -> None:
    """A batched job sharing a cap with a plain one (``f.grp_single``)."""
    with _lock:
        ran.extend({"name": i.name} for i in items)


@job("f.grp_single", registry=registry, concurrency=1, limit_group="grp")
def grp_single(item: Item, ctx: JobContext) -> None:
    _note(item, ctx)


@job(
    "f.per-tenant",
    registry=registry,
    track=True,
    concurrency=1,
    concurrency_key=lambda i: i.tenant,
    timeout=10,
)
def per_tenant(item: Item, ctx: JobContext) -> None:
    ledger.enter("all", item.tenant)
    try:
        time.sleep(0.3)
        _note(item, ctx)
    finally:
        ledger.leave("all", item.tenant)


@job("f.rated", registry=registry, track=True, rate="10/second")
def rated(item: Item, ctx: JobContext) -> None:
    ledger.enter("all")
    ledger.leave("all")
    _note(item, ctx)


@job("f.per_minute", registry=registry, idempotent=False, priority="low", rate="60/minute")
def per_minute(item: Item, ctx: JobContext) -> None:
    ledger.enter("all")
    ledger.leave("all")
    _note(item, ctx)


@job("f.tenant", registry=registry, track=True, tenant=lambda i: i.tenant)
def by_tenant(item: Item, ctx: JobContext) -> None:
    _note(item, ctx)


@job("f.fast", registry=registry, idempotent=False, rate="600/minute")
def fast(item: Item, ctx: JobContext) -> None:
    """600/minute: a burst of 30 tokens, so a batch of ten takes its tokens in one update."""
    _note(item, ctx)


@job("f.fast_keyed", registry=registry, idempotent=False, rate="600/minute", rate_key=lambda i: i.tenant)
def fast_keyed(item: Item, ctx: JobContext) -> None:
    _note(item, ctx)


@job(
    "f.ordered_rated",
    registry=registry,
    idempotent=False,
    ordered_by=lambda i: i.tenant,
    rate="5/second",
    rate_key=lambda i: i.tenant,
    timeout=5,  # (an ordered lane's batch runs in order: a 60 s job would size the shared consumer)
)
def ordered_rated(item: Item, ctx: JobContext) -> None:
    """A webhook to one customer's endpoint: in order, at most 5 a second per endpoint."""
    _note(item, ctx)


@job("f.stoppable", registry=registry, track=True)
def stoppable(item: Item, ctx: JobContext) -> str:
    """Works in steps and stops at the first step after a cancel (``ctx.stop_if_cancelled()``)."""
    started.set()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        ctx.stop_if_cancelled()
        time.sleep(0.05)
    _note(item, ctx)
    return "done"


def _call_crm(item: Item, ctx: JobContext) -> None:
    """What both CRM job types do: hold the group's one slot a moment."""
    ledger.enter("crm")
    try:
        time.sleep(0.2)
        _note(item, ctx)
    finally:
        ledger.leave("crm")


@job("f.crm_deal", registry=registry, concurrency=1, rate="20/second", limit_group="crm", timeout=10)
def crm_deal(item: Item, ctx: JobContext) -> None:
    """One of two job types calling one CRM: the group's one slot is theirs together."""
    _call_crm(item, ctx)


@job("f.crm_note", registry=registry, concurrency=1, rate="20/second", limit_group="crm", timeout=10)
def crm_note(item: Item, ctx: JobContext) -> None:
    _call_crm(item, ctx)


@job(
    "f.throttled",
    registry=registry,
    track=True,
    retry=RetryPolicy(max_attempts=1),  # a throttle is no attempt: one attempt is enough to get through
    retry_budget="crm-api",
)
def throttled(item: Item, ctx: JobContext) -> str:
    """The downstream answers 429 the first ``fail_times`` calls."""
    _note(item, ctx)
    if calls[item.name] <= item.fail_times:
        raise Throttled("429 Too Many Requests from the CRM", delay=1)
    return "synced"


@job("f.throttled_rated", registry=registry, idempotent=False, rate="600/minute", limit_group="crm-api")
def throttled_rated(item: Item, ctx: JobContext) -> None:
    """A job of a rate: its first run's 429 (Retry-After 4 s) holds the rate of its group."""
    _note(item, ctx)
    if calls[item.name] <= item.fail_times:
        raise Throttled("429 Too Many Requests", delay=4)


@job("f.throttled_long", registry=registry, track=True, idempotent=False)
def throttled_long(item: Item, ctx: JobContext) -> None:
    """Not idempotent (its start claim is the cancel gate's), and told to come back in an hour."""
    _note(item, ctx)
    if calls[item.name] <= item.fail_times:
        raise Throttled("429: come back in an hour", delay=3600)
