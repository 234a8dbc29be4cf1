"""Jobs and sagas the saga tests run, in a registry of their own (also imported by saga_worker)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from jobframework import JobContext, PermanentError, RetryPolicy, job
from jobframework.jobs import JobRegistry
from jobframework.saga import saga, step, wait

registry = JobRegistry()
events: list[str] = []
"""What ran, in order: ``charge:o-1``, ``refund:o-1``, ..."""
traces: dict[str, str | None] = {}
"""The trace id each step ran in, by ``<job>:<order>``."""

FAST = RetryPolicy(max_attempts=2, base_delay=0, max_delay=0, jitter="none")


class Order(BaseModel):
    order_id: str
    amount_cents: int = 1000
    sku: str = "sku-1"
    fail_at: str | None = None
    """A step that fails permanently (``charge``, ``reserve``, ``notify``)."""
    broken_compensation: str | None = None
    """A compensation that always fails (``release``)."""
    marker: str | None = None
    """A file the slow step creates when it starts (the kill test)."""


class Charged(Order):
    charge_id: str


class Reserved(Order):
    reservation_id: str


def _ran(name: str, order: Order, ctx: JobContext) -> None:
    events.append(f"{name}:{order.order_id}")
    traces[f"{name}:{order.order_id}"] = ctx.trace_id
    if order.fail_at == name:
        raise PermanentError(f"{name} of {order.order_id} declined")


@job("s.charge", registry=registry, track=True, priority="high", retry=FAST, timeout=3)
def charge(order: Order, ctx: JobContext) -> dict[str, Any]:
    _ran("charge", order, ctx)
    return {"charge_id": f"ch-{order.order_id}"}


@job("s.refund", registry=registry, track=True, priority="high", retry=FAST, timeout=3)
def refund(order: Charged, ctx: JobContext) -> None:
    _ran(f"refund {order.charge_id}", order, ctx)


@job("s.reserve", registry=registry, track=True, priority="high", retry=FAST, timeout=3)
def reserve(order: Order, ctx: JobContext) -> dict[str, Any]:
    _ran("reserve", order, ctx)
    return {"reservation_id": f"rs-{order.sku}"}


@job("s.release", registry=registry, track=True, priority="high", retry=FAST, timeout=3)
def release(order: Reserved, ctx: JobContext) -> None:
    _ran(f"release {order.reservation_id}", order, ctx)
    if order.broken_compensation == "release":
        raise RuntimeError("warehouse API is down")


@job("s.notify", registry=registry, track=True, priority="high", retry=FAST, timeout=3)
def notify(order: Charged, ctx: JobContext) -> str:
    _ran("notify", order, ctx)
    return f"mailed about {order.charge_id}"


@job("s.slow", registry=registry, track=True, priority="high", retry=FAST, timeout=3)
def slow(order: Order, ctx: JobContext) -> dict[str, Any]:
    if order.marker:
        Path(order.marker).write_text("started")
    time.sleep(1.5)
    return {"packed": True}


order_saga = saga(
    "t.order",
    steps=[step(charge, compensate=refund), step(reserve, compensate=release), step(notify)],
    registry=registry,
)
approval_saga = saga(
    "t.approval",
    steps=[step(charge, compensate=refund), wait("approval", timeout=2), step(notify)],
    registry=registry,
)
approval_later_saga = saga(  # a deadline no loaded machine reaches while a test signals it
    "t.approval_later",
    steps=[step(charge, compensate=refund), wait("approval", timeout=300), step(notify)],
    registry=registry,
)
slow_saga = saga(
    "t.slow", steps=[step(charge, compensate=refund), step(slow), step(notify)], registry=registry
)
