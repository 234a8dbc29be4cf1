"""Example jobs: what the demo runs and what the stack deploys when no other job module is named.

They show the shapes real jobs take: a quick critical job, a job that fails
transiently and then succeeds, a permanent failure, a poison pill, a job whose
downstream is broken until an operator fixes it (then its dead letters are
redriven), a scheduled job, and the ``order.place`` saga (charge, reserve, confirm;
a reservation of an out-of-stock SKU fails and the charge is refunded).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from jobframework import JobContext, PermanentError, Priority, RetryableError, RetryPolicy, Schedule, job
from jobframework.saga import saga, step

BROKEN_DOWNSTREAMS: set[str] = set()
"""Downstreams the demo marks as broken (an outage the operator fixes before redriving)."""
OUT_OF_STOCK: set[str] = {"sku-sold-out"}
"""SKUs whose reservation fails (the order saga then refunds the charge)."""


class PasswordReset(BaseModel):
    user_id: str = Field(min_length=1)
    email: str = Field(pattern=r"^[^@\s]+@[^@\s]+$")


class Email(BaseModel):
    to: str = Field(pattern=r"^[^@\s]+@[^@\s]+$")
    subject: str = Field(max_length=200)
    body: str = ""


class Webhook(BaseModel):
    url: str = Field(pattern=r"^https?://")
    event: str
    fail_times: int = Field(default=0, ge=0, description="simulated: fail this many attempts first")


class PaymentCapture(BaseModel):
    order_id: str
    amount_cents: int = Field(gt=0)
    card_token: str


class CrmSync(BaseModel):
    account_id: str


class ReportRequest(BaseModel):
    report_id: str
    rows: int = Field(default=100, ge=0, le=1_000_000)


class Cleanup(BaseModel):
    older_than_days: int = 30


@job(
    "auth.password_reset",
    track=True,
    priority=Priority.CRITICAL,
    timeout=10,
    key=lambda p: f"reset:{p.user_id}",
)
def send_password_reset(req: PasswordReset, ctx: JobContext) -> dict[str, str]:
    """Send a password-reset link (critical: users are waiting)."""
    ctx.logger.info("password reset sent to %s", req.email)
    return {"sent_to": req.email}


@job("emails.send", track=True, priority=Priority.HIGH, timeout=30)
def send_email(email: Email) -> None:
    """Send one transactional email."""


@job(
    "webhooks.deliver",
    track=True,
    priority=Priority.DEFAULT,
    retry=RetryPolicy(max_attempts=4, base_delay=1, max_delay=30),
    transient=(ConnectionError,),
)
def deliver_webhook(hook: Webhook, ctx: JobContext) -> None:
    """Deliver a webhook; the receiver is flaky for the first ``fail_times`` attempts."""
    if ctx.attempt <= hook.fail_times:
        if ctx.attempt % 2:
            raise RetryableError(f"{hook.url} answered 503", delay=1)
        raise ConnectionError(f"connection to {hook.url} reset")


@job("payments.capture", track=True, priority=Priority.HIGH, key=lambda p: f"capture:{p.order_id}")
def capture_payment(req: PaymentCapture) -> None:
    """Capture a payment; a declined card is final, retrying cannot help."""
    if req.card_token.startswith("declined"):
        raise PermanentError(f"card {req.card_token} was declined")


@job(
    "crm.sync",
    track=True,
    priority=Priority.DEFAULT,
    retry=RetryPolicy(max_attempts=3, base_delay=1, max_delay=5),
)
def sync_crm(req: CrmSync) -> None:
    """Push an account to the CRM; fails while the CRM downstream is broken."""
    if "crm" in BROKEN_DOWNSTREAMS:
        raise RuntimeError(f"CRM rejected account {req.account_id}: schema mismatch")


@job(
    "reports.generate",
    track=True,
    priority=Priority.LOW,
    retry=RetryPolicy(max_attempts=3),
    key=lambda r: f"report:{r.report_id}",
)
def generate_report(req: ReportRequest, ctx: JobContext) -> dict[str, int]:
    """Build a report; ``report_id`` 'poison' crashes every time (a poison pill)."""
    if req.report_id == "poison":
        raise ZeroDivisionError("report template divides by zero")
    return {"rows": req.rows}


@job(
    "maintenance.cleanup",
    track=True,
    priority=Priority.LOW,
    schedule=Schedule("rate(1 hour)", payload={"older_than_days": 30}),
)
def cleanup(req: Cleanup, ctx: JobContext) -> dict[str, int]:
    """Delete expired sessions; runs every hour."""
    return {"older_than_days": req.older_than_days}


class Order(BaseModel):
    order_id: str
    amount_cents: int = Field(gt=0)
    sku: str


class ChargedOrder(Order):
    charge_id: str


class ReservedOrder(Order):
    reservation_id: str


@job("orders.charge", track=True, priority=Priority.HIGH)
def charge_order(order: Order) -> dict[str, str]:
    """Charge the card; the charge id is passed on to later steps and to the refund."""
    return {"charge_id": f"ch_{order.order_id}"}


@job("orders.refund", track=True, priority=Priority.HIGH)
def refund_charge(order: ChargedOrder, ctx: JobContext) -> None:
    """Undo ``orders.charge``."""
    ctx.logger.info("refunded %s (%d cents)", order.charge_id, order.amount_cents)


@job("orders.reserve", track=True, priority=Priority.HIGH)
def reserve_stock(order: Order) -> dict[str, str]:
    """Reserve the stock; an out-of-stock SKU is final (the saga compensates)."""
    if order.sku in OUT_OF_STOCK:
        raise PermanentError(f"{order.sku} is out of stock")
    return {"reservation_id": f"rsv_{order.order_id}"}


@job("orders.release", track=True, priority=Priority.HIGH)
def release_stock(order: ReservedOrder) -> None:
    """Undo ``orders.reserve``."""


@job("orders.confirm", track=True, priority=Priority.HIGH)
def send_confirmation(order: ChargedOrder) -> None:
    """Email the customer that the order is placed."""


order_saga = saga(
    "order.place",
    steps=[
        step(charge_order, compensate=refund_charge),
        step(reserve_stock, compensate=release_stock),
        step(send_confirmation),
    ],
)
