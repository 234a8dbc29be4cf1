"""Example jobs: what the demo runs and what the stack deploys when no other job module is named.

They show the shapes real jobs take: a quick critical job, a job that fails
transiently and then succeeds, a permanent failure, a poison pill, a job whose
downstream is broken until an operator fixes it (then its dead letters are
redriven), and a scheduled job.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from jobframework import JobContext, PermanentError, Priority, RetryableError, RetryPolicy, Schedule, job

BROKEN_DOWNSTREAMS: set[str] = set()
"""Downstreams the demo marks as broken (an outage the operator fixes before redriving)."""


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


@job("auth.password_reset", priority=Priority.CRITICAL, timeout=10, key=lambda p: f"reset:{p.user_id}")
def send_password_reset(req: PasswordReset, ctx: JobContext) -> dict[str, str]:
    """Send a password-reset link (critical: users are waiting)."""
    ctx.logger.info("password reset sent to %s", req.email)
    return {"sent_to": req.email}


@job("emails.send", priority=Priority.HIGH, timeout=30)
def send_email(email: Email) -> None:
    """Send one transactional email."""


@job(
    "webhooks.deliver",
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


@job("payments.capture", priority=Priority.HIGH, key=lambda p: f"capture:{p.order_id}")
def capture_payment(req: PaymentCapture) -> None:
    """Capture a payment; a declined card is final, retrying cannot help."""
    if req.card_token.startswith("declined"):
        raise PermanentError(f"card {req.card_token} was declined")


@job("crm.sync", priority=Priority.DEFAULT, retry=RetryPolicy(max_attempts=3, base_delay=1, max_delay=5))
def sync_crm(req: CrmSync) -> None:
    """Push an account to the CRM; fails while the CRM downstream is broken."""
    if "crm" in BROKEN_DOWNSTREAMS:
        raise RuntimeError(f"CRM rejected account {req.account_id}: schema mismatch")


@job(
    "reports.generate",
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
    priority=Priority.LOW,
    schedule=Schedule("rate(1 hour)", payload={"older_than_days": 30}),
)
def cleanup(req: Cleanup, ctx: JobContext) -> dict[str, int]:
    """Delete expired sessions; runs every hour."""
    return {"older_than_days": req.older_than_days}
