"""The jobs the console's browser tests (and the screenshots) run, in a registry of their own."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from jobframework import JobContext, PermanentError, RetryPolicy, job
from jobframework.jobs import JobRegistry
from jobframework.saga import saga, step, wait

registry = JobRegistry()
declined: set[str] = set()
"""Order ids whose charge the payment provider declines (a test removes one to "fix" it)."""
FAST = RetryPolicy(max_attempts=2, base_delay=0, max_delay=0, jitter="none")


class Order(BaseModel):
    order_id: str
    amount_cents: int = 1000
    fail_at: str | None = None


class Charged(Order):
    charge_id: str


@job(
    "shop.charge",
    registry=registry,
    track=True,
    priority="high",
    retry=FAST,
    timeout=5,
    retry_budget="payments",
)
def charge(order: Order, ctx: JobContext) -> dict[str, Any]:
    if order.order_id in declined or order.fail_at == "charge":
        raise PermanentError(f"card of order {order.order_id} declined")
    return {"charge_id": f"ch-{order.order_id}"}


@job(
    "shop.refund",
    registry=registry,
    track=True,
    priority="high",
    retry=FAST,
    timeout=5,
    retry_budget="payments",
)
def refund(order: Charged) -> None:
    """Undo a charge."""


@job("shop.ship", registry=registry, track=True, priority="high", retry=FAST, timeout=5)
def ship(order: Charged) -> str:
    if order.fail_at == "ship":
        raise PermanentError(f"no courier for order {order.order_id}")
    return f"shipped {order.order_id}"


@job("shop.export", registry=registry, track=True, priority="low", retry=RetryPolicy(max_attempts=4))
def export(order: Order) -> None:
    raise PermanentError("the warehouse rejected the export file")


class Nightly(BaseModel):
    scope: str = "all"


@job("shop.reconcile", registry=registry, track=True, priority="low", schedule="rate(1 hour)")
def reconcile(req: Nightly) -> None:
    """Reconcile the day's charges (a scheduled job)."""


order_saga = saga("shop.order", steps=[step(charge, compensate=refund), step(ship)], registry=registry)
approval_saga = saga(
    "shop.approval",
    steps=[step(charge, compensate=refund), wait("approval", timeout=600), step(ship)],
    registry=registry,
)
