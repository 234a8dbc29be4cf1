"""Flow control in the console, in a real browser: pause and resume a queue, cancel a job."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import expect

from jobframework.client import JobClient
from jobframework.flow.pause import pause, paused, resume
from jobframework.state import JobState, StateStore
from tests.browser import console_jobs
from tests.browser.harness import Shop


def _client(shop: Shop) -> JobClient:
    return JobClient(
        shop.config, registry=shop.registry, sqs_client=shop.sqs, clients={"dynamodb": shop.dynamodb}
    )


def _store(shop: Shop) -> StateStore:
    return StateStore(str(shop.config.state_table), shop.dynamodb)


def test_pause_and_resume_a_queue_from_the_overview(page: Any, console_url: str, clean: Shop):
    page.goto(f"{console_url}/")
    expect(page.locator("#consuming-low")).to_be_visible()
    page.locator("#pause-low").click()
    expect(page.locator("#paused-low")).to_have_text("paused")
    assert "low" in paused(_store(clean))  # the flag jf dev and jf worker pollers read
    page.reload()
    expect(page.locator("#paused-low")).to_be_visible()  # it stays paused
    expect(page.locator("#consuming-high")).to_be_visible()  # only that queue
    page.locator("#resume-low").click()
    expect(page.locator("#consuming-low")).to_be_visible()
    assert "low" not in paused(_store(clean))


def test_the_dlq_list_shows_the_oldest_letter_and_a_paused_source_queue(
    page: Any, console_url: str, clean: Shop
):
    """`jf dlq ls`'s columns: the console's list had depth and in flight only (an operator's trial)."""
    console_jobs.declined.add("o-dlq-list")
    _client(clean).enqueue("shop.charge", {"order_id": "o-dlq-list"})
    clean.consume("high")
    assert clean.dlq_depth("high") == 1
    pause(_store(clean), "high")
    try:
        page.goto(f"{console_url}/dlq")
        expect(page.locator("#oldest-high")).to_have_text(re.compile(r"^\d+(\.\d)?( ms|s)$"))
        expect(page.locator("#oldest-low")).to_have_text("-")  # (an empty DLQ)
        expect(page.locator("#source-high")).to_contain_text("paused since")
        expect(page.locator("#source-low")).to_have_text("not paused")
    finally:
        resume(_store(clean), "high")


def test_cancel_a_queued_job_from_its_page(page: Any, console_url: str, clean: Shop):
    job_id = _client(clean).enqueue("shop.charge", {"order_id": "o-cancel"}).id
    page.goto(f"{console_url}/jobs/{job_id}")
    expect(page.locator("#job-status")).to_have_text("queued")
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("#cancel").click()
    expect(page.locator("#cancel-outcome")).to_have_attribute("data-outcome", "cancelled")
    clean.consume("high")  # it arrives and is acknowledged unrun
    page.reload()
    expect(page.locator("#job-status")).to_have_text("cancelled")
    expect(page.locator("#cancel-asked")).to_be_visible()  # when the cancel was asked
    expect(page.locator("#cancel")).to_have_count(0)  # nothing left to cancel
    status = _client(clean).status(job_id)
    assert status is not None and status.status is JobState.CANCELLED


def test_read_only_offers_neither_pause_nor_cancel(page: Any, read_only_url: str, clean: Shop):
    job_id = _client(clean).enqueue("shop.charge", {"order_id": "o-ro-cancel"}).id
    page.goto(f"{read_only_url}/")
    expect(page.locator("#consuming-low")).to_be_visible()
    expect(page.locator("#pause-low")).to_have_count(0)
    page.goto(f"{read_only_url}/jobs/{job_id}")
    expect(page.locator("#cancel")).to_have_count(0)


def test_signal_a_waiting_saga_from_its_page(page: Any, console_url: str, clean: Shop):
    saga_id = console_jobs.approval_saga.start({"order_id": "o-approve"}, client=_client(clean))
    clean.consume("high")  # the charge runs; the saga waits for its approval
    page.goto(f"{console_url}/sagas/{saga_id}")
    expect(page.locator('#steps tr[data-step="approval"]')).to_contain_text("waiting")
    page.locator("#signal-data").fill("{approved")
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("#signal").click()
    expect(page.get_by_role("alert")).to_contain_text("the data is not JSON")
    page.reload()
    page.locator("#signal-data").fill('{"approved_by": "ops"}')
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("#signal").click()
    expect(page.locator("#signal-outcome")).to_have_attribute("data-outcome", "taken")
    clean.consume("high")  # the ship step
    page.reload()
    expect(page.locator("#saga-status")).to_have_text("succeeded")
    expect(page.locator('#steps tr[data-step="approval"]')).to_contain_text("approved_by")
    expect(page.locator("#signal")).to_have_count(0)  # nothing waits any more


def test_read_only_offers_no_signal(page: Any, read_only_url: str, clean: Shop):
    saga_id = console_jobs.approval_saga.start({"order_id": "o-ro-approve"}, client=_client(clean))
    clean.consume("high")
    page.goto(f"{read_only_url}/sagas/{saga_id}")
    expect(page.locator('#steps tr[data-step="approval"]')).to_contain_text("waiting")
    expect(page.locator("#signal")).to_have_count(0)


def test_the_overview_shows_where_each_queue_retry_budget_stands(page: Any, console_url: str, clean: Shop):
    """An on-call trial's outage spent a queue's retry budget: no page showed it."""
    import time

    from jobframework.budget import RetryBudget

    queue = clean.config.endpoints("low").name
    bucket = int(time.time() // RetryBudget().bucket)
    _store(clean).budget_add(queue, bucket, first_attempts=0, retries=100, ttl=600)
    try:
        page.goto(f"{console_url}/")
        expect(page.locator("#budget-low")).to_have_text("spent: 100 of 100")
        expect(page.locator("#budget-high")).to_have_text("0 of 100")
    finally:  # (the shop is the session's: give the low queue its budget back)
        clean.dynamodb.delete_item(
            TableName=str(clean.config.state_table),
            Key={"pk": {"S": f"budget#{queue}"}, "sk": {"S": f"{bucket:012d}"}},
        )
