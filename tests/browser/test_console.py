"""The console in a real browser (headless Chromium) against the embedded AWS."""

from __future__ import annotations

import re
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from playwright.sync_api import expect

from jobframework.budget_keys import budget_key
from jobframework.client import JobClient
from jobframework.envelope import Envelope
from jobframework.state import JobState, StateStore
from jobframework.testing import receive_all
from tests.browser import console_jobs
from tests.browser.harness import LEAK_KEY_ID, LEAK_SECRET, Shop


def _client(shop: Shop) -> JobClient:
    return JobClient(
        shop.config, registry=shop.registry, sqs_client=shop.sqs, clients={"dynamodb": shop.dynamodb}
    )


def _dead_charge(shop: Shop, order_id: str, *, track: bool | None = None) -> str:
    """A shop.charge job that was declined and dead-lettered; returns its id."""
    console_jobs.declined.add(order_id)
    job_id = _client(shop).enqueue("shop.charge", {"order_id": order_id}, track=track).id
    shop.consume("high")
    assert shop.dlq_depth("high") >= 1
    return job_id


def test_redrive_a_dead_letter_by_selection_and_see_the_job_succeed(page: Any, console_url: str, clean: Shop):
    job_id = _dead_charge(clean, "o-1")
    page.goto(f"{console_url}/dlq/high")
    expect(page.locator("#groups")).to_contain_text("permanent")
    expect(page.locator("#groups")).to_contain_text("shop.charge")
    row = page.locator(f'#letters tr[data-job-id="{job_id}"]')
    expect(row).to_contain_text("card of order o-1 declined")
    row.get_by_role("checkbox").check()
    page.locator("#redrive-selected").click()
    expect(page.locator("#dry-run-count")).to_have_text("1")
    assert clean.dlq_depth("high") == 1, "a dry run moves nothing"

    console_jobs.declined.discard("o-1")  # the provider is fixed: the redriven charge goes through
    page.locator("#confirm-redrive").click()
    expect(page.locator("#task-done")).to_be_visible()
    expect(page.locator("#moved-count")).to_have_text("1")
    expect(page.locator("progress")).to_have_attribute("value", "100")
    assert clean.dlq_depth("high") == 0

    assert clean.consume("high") == 1
    page.locator("#redrive-result").get_by_role("link", name=job_id).click()
    expect(page).to_have_url(re.compile(f"/jobs/{job_id}$"))
    expect(page.locator("#job-status")).to_have_text("succeeded")


def test_a_redriven_untracked_job_is_named_not_linked(page: Any, console_url: str, clean: Shop):
    """Its link led to a 404 (no status record to show), an operator's trial found."""
    tracked, untracked = _dead_charge(clean, "o-7"), _dead_charge(clean, "o-8", track=False)
    page.goto(f"{console_url}/dlq/high")
    for job_id in (tracked, untracked):
        page.locator(f'#letters tr[data-job-id="{job_id}"]').get_by_role("checkbox").check()
    page.locator("#redrive-selected").click()
    page.locator("#confirm-redrive").click()
    expect(page.locator("#task-done")).to_be_visible()
    result = page.locator("#redrive-result")
    expect(result.get_by_role("link", name=tracked)).to_have_count(1)
    expect(result.get_by_role("link", name=untracked)).to_have_count(0)
    expect(result).to_contain_text(untracked)


def test_a_selection_redrive_says_what_it_takes_warns_of_a_paused_lane_and_offers_a_reload(
    page: Any, console_url: str, clean: Shop
):
    """An on-call trial: the dry run of "Redrive all shown" appeared in the filter box beside selects set to
    "any"; a redrive into a paused lane said nothing (the CLI warns); after it the list still showed
    the moved letters."""
    from jobframework.flow.pause import pause, resume

    job_ids = [_dead_charge(clean, f"o-p{n}") for n in range(2)]
    store = clean.console().store
    assert store is not None
    pause(store, "high")
    try:
        page.goto(f"{console_url}/dlq/high")
        page.get_by_role("button", name="Redrive all 2 shown (dry run first)").click()
        shown = page.locator("#selection-result")
        expect(shown.locator("#redrive-scope")).to_have_text(
            "The 2 selected letters of the list (the filter form is not used):"
        )
        expect(page.locator("#action-result")).to_be_empty()
        expect(shown.locator("#redrive-paused")).to_contain_text("The high queue is paused")
        shown.locator("#confirm-redrive").click()
        expect(page.locator("#moved-count")).to_have_text("2")
        page.locator("#reload-letters").click()
        expect(page.locator("#letters tbody tr")).to_have_count(0)
    finally:
        resume(store, "high")
    assert clean.dlq_depth("high") == 0 and len(job_ids) == 2


def test_a_redrive_of_one_letter_among_several_says_what_moved_of_what_was_selected(
    page: Any, console_url: str, clean: Shop
):
    job_ids = [_dead_charge(clean, f"o-m{n}") for n in range(4)]
    page.goto(f"{console_url}/dlq/high")
    page.locator(f'#letters tr[data-job-id="{job_ids[-1]}"]').get_by_role("checkbox").check()
    page.locator("#redrive-selected").click()
    page.locator("#confirm-redrive").click()
    expect(page.locator("#task-done")).to_be_visible()
    expect(page.locator("#redrive-result")).to_contain_text("Moved 1 of 1 selected.")
    expect(page.locator("#redrive-gone")).to_have_count(0)
    assert clean.dlq_depth("high") == 3


def test_a_selected_letter_that_left_the_dlq_is_said_to_be_no_longer_there(
    page: Any, console_url: str, clean: Shop
):
    job_id = _dead_charge(clean, "o-gone")
    _dead_charge(clean, "o-stays")
    page.goto(f"{console_url}/dlq/high")
    page.locator(f'#letters tr[data-job-id="{job_id}"]').get_by_role("checkbox").check()
    page.locator("#redrive-selected").click()
    expect(page.locator("#dry-run-count")).to_have_text("1")
    clean.console().letters.redrive("high", message_ids=[job_id])  # another operator got there first

    page.locator("#confirm-redrive").click()
    expect(page.locator("#task-done")).to_be_visible()
    expect(page.locator("#moved-count")).to_have_text("0")
    expect(page.locator("#redrive-gone")).to_have_text(
        "1 was no longer in the DLQ (redriven, purged or expired since the page listed it)."
    )
    page.locator("#redrive-selected").click()  # a new dry run of the same selection says so first
    expect(page.locator("#dry-run-count")).to_contain_text("the selected dead letter is no longer in the DLQ")
    expect(page.locator("#confirm-redrive")).to_have_count(0)
    assert clean.dlq_depth("high") == 1


def test_a_filter_redrive_takes_a_reason(page: Any, console_url: str, clean: Shop):
    """A trial could redrive by reason from the CLI (what the README advises after an outage: the
    letters dead-lettered because the retry budget was spent) but not from the console's form."""
    from tests.functional.conftest_local import dead_letter

    budget = [
        dead_letter(clean.sqs, clean.config, "high", "shop.charge", {"order_id": f"o-b{n}"}, reason="budget")
        for n in range(2)
    ]
    _dead_charge(clean, "o-declined")  # permanent: stays
    page.goto(f"{console_url}/dlq/high")
    form = page.locator("#redrive-filter")
    form.locator('select[name="reason"]').select_option("budget")
    form.get_by_role("button", name="Count (dry run)").click()
    expect(page.locator("#dry-run-count")).to_have_text("2")
    page.locator("#confirm-redrive").click()
    expect(page.locator("#moved-count")).to_have_text("2")
    expect(page.locator(".task").first).to_contain_text("of reason budget")  # (the task says what it took)
    assert clean.dlq_depth("high") == 1  # the permanent one did not match
    moved = {e.id for e in budget}
    assert moved <= {
        Envelope.model_validate_json(m["Body"]).id
        for m in receive_all(clean.sqs, clean.config.endpoints("high").url)
    }


def test_dry_run_count_matches_what_a_filter_redrive_moves(page: Any, console_url: str, clean: Shop):
    for n in range(3):
        _dead_charge(clean, f"o-f{n}")
    _client(clean).enqueue("shop.ship", {"order_id": "o-s", "charge_id": "c", "fail_at": "ship"})
    clean.consume("high")
    assert clean.dlq_depth("high") == 4

    page.goto(f"{console_url}/dlq/high")
    form = page.locator("#redrive-filter")
    form.locator('select[name="type"]').select_option("shop.charge")
    form.get_by_role("button", name="Count (dry run)").click()
    expect(page.locator("#dry-run-count")).to_have_text("3")
    expect(page.locator("#redrive-preview")).to_contain_text("shop.charge 3")

    page.locator("#confirm-redrive").click()
    expect(page.locator("#task-done")).to_be_visible()
    expect(page.locator("#moved-count")).to_have_text("3")
    assert clean.dlq_depth("high") == 1  # the shop.ship letter did not match and stayed


def test_the_letters_show_a_key_that_is_not_the_id(page: Any, console_url: str, clean: Shop):
    """An on-call trial looked for one customer's letters: the list had no key (the CLI's peek has)."""
    console_jobs.declined.add("o-keyed")
    _client(clean).enqueue("shop.charge", {"order_id": "o-keyed"}, key="charge:customer-7", tenant="acme")
    clean.consume("high")
    page.goto(f"{console_url}/dlq/high")
    expect(page.locator("#letters thead")).to_contain_text("key")
    expect(page.locator("#letters tbody")).to_contain_text("charge:customer-7")
    expect(page.locator("#letters thead")).to_contain_text("tenant")  # (kept by the dead letter)
    expect(page.locator("#letters tbody")).to_contain_text("acme")
    page.locator("#letters tbody a").first.click()
    expect(page.locator("#letter-tenant")).to_have_text("acme")


def test_search_and_read_a_dead_letter(page: Any, console_url: str, clean: Shop):
    job_id = _dead_charge(clean, "o-search")
    _dead_charge(clean, "o-other")
    page.goto(f"{console_url}/dlq/high")
    page.get_by_label("search").fill("o-search")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#shown")).to_contain_text("1 of 2 shown")
    page.get_by_role("link", name=job_id).click()
    expect(page.locator("#letter-error")).to_have_text("PermanentError: card of order o-search declined")
    expect(page.locator("#letter-body")).to_contain_text('"order_id": "o-search"')
    expect(page.locator("#letter-attributes")).to_contain_text("jf-reason")
    expect(page.locator("#letter-attributes")).to_contain_text("traceparent")
    sent = page.locator("#letter-system-attributes tr", has_text="SentTimestamp")  # (an on-call trial read
    expect(sent).to_contain_text(re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(\d{13}\)"))  # epoch ms)
    # A letter's address takes its job's id too, as `jf dlq --id` does (a trial's typed URL was a 404
    # that said the letter was gone)
    page.goto(f"{console_url}/dlq/high/letters/{job_id}")
    expect(page.locator("#letter-error")).to_have_text("PermanentError: card of order o-search declined")
    page.goto(f"{console_url}/dlq/low/letters/{job_id}")
    expect(page.locator("body")).to_contain_text("or in another lane's DLQ")


def test_purge_needs_the_dlq_name_typed(page: Any, console_url: str, clean: Shop):
    _dead_charge(clean, "o-p1")
    _dead_charge(clean, "o-p2")
    page.goto(f"{console_url}/dlq/high")
    page.locator("#purge").get_by_role("button", name="Purge…").click()
    expect(page.locator("#purge-count")).to_have_text("2")
    page.locator("#purge-confirm").fill("low")
    page.locator("#confirm-purge").click()
    expect(page.get_by_role("alert")).to_contain_text("type the lane (high)")
    assert clean.dlq_depth("high") == 2

    page.locator("#purge").get_by_role("button", name="Purge…").click()
    page.locator("#purge-confirm").fill("high")
    page.locator("#confirm-purge").click()
    expect(page.locator("#purge-done")).to_contain_text("Deleted 2 dead letters")
    assert clean.dlq_depth("high") == 0


def test_purge_takes_a_reason_or_the_ticked_letters(page: Any, console_url: str, clean: Shop):
    """A trial could purge a lane's letters only by type from the console: not the letters of a
    reason (what `jf dlq purge --reason` does), nor one letter it had looked at."""
    from tests.functional.conftest_local import dead_letter

    for n in range(2):
        dead_letter(clean.sqs, clean.config, "high", "shop.charge", {"order_id": f"o-pb{n}"}, reason="budget")
    kept = _dead_charge(clean, "o-kept")  # permanent
    gone = _dead_charge(clean, "o-gone")  # permanent, ticked
    page.goto(f"{console_url}/dlq/high")
    form = page.locator("#purge")
    form.locator('select[name="reason"]').select_option("budget")
    form.get_by_role("button", name="Purge…").click()
    expect(page.locator("#purge-preview")).to_contain_text("2 dead letters of reason budget would be deleted")
    page.locator("#purge-confirm").fill("high")
    page.locator("#confirm-purge").click()
    expect(page.locator("#purge-done")).to_have_text(
        "Deleted 2 dead letters of reason budget from the high DLQ."
    )
    assert clean.dlq_depth("high") == 2

    page.goto(f"{console_url}/dlq/high")
    page.locator("#purge-selected").click()  # none ticked
    expect(page.get_by_role("alert")).to_contain_text("no dead letters selected")
    page.locator(f'tr[data-job-id="{gone}"] input[type="checkbox"]').check()
    page.locator("#purge-selected").click()
    expect(page.locator("#purge-count")).to_have_text("1")
    expect(page.locator("#purge-preview")).to_contain_text("1 selected dead letter would be deleted")
    page.locator("#purge-confirm").fill("high")
    page.locator("#confirm-purge").click()
    expect(page.locator("#purge-done")).to_have_text("Deleted 1 selected dead letter from the high DLQ.")
    assert clean.dlq_depth("high") == 1
    page.goto(f"{console_url}/dlq/high")  # (the page's read leaves the letter visible for the next test)
    expect(page.locator(f'tr[data-job-id="{kept}"]')).to_have_count(1)
    expect(page.locator(f'tr[data-job-id="{gone}"]')).to_have_count(0)


def test_export_downloads_every_letter_as_json_lines(page: Any, console_url: str, clean: Shop):
    _dead_charge(clean, "o-x1")
    _dead_charge(clean, "o-x2")
    page.goto(f"{console_url}/dlq/high")
    with page.expect_download() as info:
        page.locator("#export").click()
    lines = info.value.path().read_text().splitlines()
    assert len(lines) == 2
    assert all('"reason": "permanent"' in line for line in lines)
    assert clean.dlq_depth("high") == 2, "export removes nothing"


def test_find_a_job_by_id(page: Any, console_url: str, clean: Shop):
    job_id = _client(clean).enqueue("shop.charge", {"order_id": "o-find"}).id
    clean.consume("high")
    page.goto(f"{console_url}/jobs")
    page.locator("#job-id").fill(job_id)
    page.get_by_role("button", name="Open").click()
    expect(page).to_have_url(re.compile(f"/jobs/{job_id}$"))
    expect(page.locator("#job-status")).to_have_text("succeeded")
    expect(page.locator("#job-attempts")).to_have_text("1 of 2")
    expect(page.locator("#job-result")).to_contain_text('"charge_id": "ch-o-find"')


def test_a_delayed_job_says_when_it_runs(page: Any, console_url: str, clean: Shop):
    sent = _client(clean).enqueue("shop.charge", {"order_id": "o-later"}, delay=600)
    due = datetime.now(UTC) + timedelta(seconds=600)
    page.goto(f"{console_url}/jobs/{sent.id}")
    expect(page.locator("#job-status")).to_have_text("queued")
    shown = datetime.strptime(page.locator("#runs-at").inner_text(), "%Y-%m-%d %H:%M:%S UTC")
    assert abs((shown.replace(tzinfo=UTC) - due).total_seconds()) < 60


def test_a_running_jobs_page_shows_its_progress(page: Any, console_url: str, clean: Shop):
    """What a job said of itself with ctx.set_progress (a BullMQ trial's report page polls it)."""
    from jobframework.state import StateStore

    sent = _client(clean).enqueue("shop.charge", {"order_id": "o-progress"}, delay=600)
    assert clean.config.state_table is not None
    StateStore(clean.config.state_table, clean.dynamodb).jobs.set_progress(sent.id, 40, "page 4 of 10")
    page.goto(f"{console_url}/jobs/{sent.id}")
    expect(page.locator("#job-progress")).to_have_text("40 % (page 4 of 10)")
    expect(page.locator("#job-progress progress")).to_have_attribute("value", "40.0")


def test_find_jobs_by_text_in_their_key(page: Any, console_url: str, clean: Shop):
    """An on-call trial searched `globex` for keys `evt:globex-e0`: the search was for the whole key."""
    other = _client(clean).enqueue("shop.charge", {"order_id": "o-key"}, key="charge:o-key").id
    job_id = _client(clean).enqueue("shop.charge", {"order_id": "o-key2"}, key="charge:o-key2").id
    page.goto(f"{console_url}/jobs")
    page.locator("#find-jobs").get_by_label("key").fill("o-key")
    page.locator("#find-jobs").get_by_role("button", name="Find").click()
    results = page.locator("#job-results tbody tr")
    expect(results).to_have_count(2)
    page.locator("#find-jobs").get_by_label("key").fill("charge:o-key2")
    page.locator("#find-jobs").get_by_role("button", name="Find").click()
    expect(results).to_have_count(1)
    expect(results).not_to_contain_text(other)
    expect(results).to_contain_text(job_id)
    expect(results).to_contain_text("queued")
    results.get_by_role("link", name=job_id).click()
    expect(page.locator("#trace-id")).to_have_text(re.compile(r"^[0-9a-f]{32}$"))  # from its status record


def test_find_jobs_by_status_and_see_a_dead_jobs_error_and_trace(page: Any, console_url: str, clean: Shop):
    job_id = _dead_charge(clean, "o-dead")
    page.goto(f"{console_url}/jobs?status=dead&type=shop.charge")
    page.locator("#job-results").get_by_role("link", name=job_id).click()
    expect(page.locator("#job-status")).to_have_text("dead")
    expect(page.locator("#job-error")).to_contain_text("card of order o-dead declined")
    expect(page.locator("#trace-id")).to_have_text(re.compile(r"^[0-9a-f]{32}$"))


def test_read_a_saga_with_its_steps_and_compensation(page: Any, console_url: str, clean: Shop):
    saga_id = console_jobs.order_saga.start({"order_id": "o-saga", "fail_at": "ship"}, client=_client(clean))
    for _ in range(4):
        clean.consume("high")
    page.goto(f"{console_url}/sagas?name=shop.order")
    page.get_by_role("link", name=saga_id).click()
    expect(page.locator("#saga-status")).to_have_text("compensated")
    charge = page.locator('#steps tr[data-step="shop.charge"]')
    expect(charge).to_contain_text("succeeded")
    expect(charge.locator(".compensation")).to_contain_text("shop.refund compensated (1 attempt)")
    ship = page.locator('#steps tr[data-step="shop.ship"]')
    expect(ship).to_contain_text("failed")
    expect(ship).to_contain_text("no courier for order o-saga")


def test_schedule_enqueue_now_records_a_run_and_a_heartbeat(page: Any, console_url: str, clean: Shop):
    page.goto(f"{console_url}/schedules")
    row = page.locator('#schedules tr[data-schedule*="reconcile"]')
    expect(row).to_contain_text("rate(1 hour)")
    row.get_by_role("button", name="Enqueue now").click()
    expect(row.locator(".ok")).to_contain_text("enqueued")
    clean.consume("low")
    page.reload()
    expect(row).to_contain_text("succeeded")
    expect(row.locator("td").nth(5)).to_contain_text("ago")


def test_schedules_say_a_rate_schedules_interval_and_what_missed_counts(page: Any, console_url: str):
    page.goto(f"{console_url}/schedules")
    expect(page.locator("#schedules thead")).to_contain_text("missed runs (last 24 h)")
    row = page.locator('#schedules tr[data-schedule*="reconcile"]')
    expect(row.locator("td.next")).to_have_text("every 1 hour")  # no next time made up from now
    expect(row.locator("td.missed")).to_have_text(
        re.compile(r"^(not known \(no run recorded\)|\d+ missed of \d+ due|none due yet)$")
    )


def test_retry_plan_of_a_job(page: Any, console_url: str):
    page.goto(f"{console_url}/retry-plans")
    page.get_by_role("link", name="shop.export").click()
    expect(page.locator("h1")).to_contain_text("shop.export: 4 attempts, then the DLQ")
    expect(page.locator("#retry-plan tbody tr")).to_have_count(3)
    # What `jf retry-plan` prints: whole seconds as SQS hides a message (it showed 700 ms - 1.3s)
    expect(page.locator("#retry-plan tbody tr").first).to_contain_text("1.0s \u2013 2.0s")
    expect(page.locator("p.note")).to_contain_text("RetryableError(delay=N)")


def test_read_only_hides_and_refuses_actions(page: Any, read_only_url: str, clean: Shop):
    _dead_charge(clean, "o-ro")
    page.goto(f"{read_only_url}/dlq/high")
    expect(page.locator("#read-only")).to_be_visible()
    expect(page.locator("#letters")).to_contain_text("o-ro declined")
    expect(page.locator("#dlq-actions")).to_have_count(0)
    expect(page.get_by_role("checkbox")).to_have_count(0)
    expect(page.get_by_role("button", name=re.compile("Redrive|Purge"))).to_have_count(0)
    page.goto(f"{read_only_url}/schedules")
    expect(page.get_by_role("button", name="Enqueue now")).to_have_count(0)
    # Even a well-formed same-origin action (the page's own token) is refused.
    status = page.evaluate(
        """async () => {
            const token = JSON.parse(document.body.getAttribute('hx-headers'))['X-CSRF-Token'];
            const r = await fetch('/dlq/high/purge', {method: 'POST', headers: {'X-CSRF-Token': token},
                body: new URLSearchParams({confirm: 'high'})});
            return [r.status, await r.text()];
        }"""
    )
    assert status[0] == 403 and "read-only" in status[1]
    assert clean.dlq_depth("high") == 1


def test_a_cross_site_post_is_refused(page: Any, console_url: str, clean: Shop):
    _dead_charge(clean, "o-csrf")
    attacker = "http://attacker.example/"
    page.route(
        attacker,
        lambda route: route.fulfill(
            content_type="text/html",
            body=f"""<form method="post" action="{console_url}/dlq/high/purge">
                <input name="confirm" value="high"></form>
                <script>document.forms[0].submit()</script>""",
        ),
    )
    page.goto(attacker)
    page.wait_for_url(f"{console_url}/dlq/high/purge")
    expect(page.locator("body")).to_contain_text("cross-site request refused")
    assert clean.dlq_depth("high") == 1

    # From the console's own origin but without its token (a script that did not read a page).
    page.goto(f"{console_url}/dlq/high")
    status = page.evaluate(
        """async () => (await fetch('/dlq/high/purge', {method: 'POST',
            body: new URLSearchParams({confirm: 'high'})})).status"""
    )
    assert status == 403
    assert clean.dlq_depth("high") == 1


def test_no_credential_reaches_a_page(page: Any, console_url: str, clean: Shop):
    job_id = _dead_charge(clean, "o-cred")
    seen = []
    paths = ["/", "/dlq", "/dlq/high", "/jobs", f"/jobs/{job_id}", "/schedules", "/sagas", "/retry-plans"]
    for path in paths:
        page.goto(console_url + path)
        seen.append(page.content())
    page.goto(f"{console_url}/dlq/high")
    page.locator("#letters a").first.click()
    seen.append(page.content())
    text = "\n".join(seen)
    assert LEAK_KEY_ID not in text and LEAK_SECRET not in text
    assert "AKIA" not in text


def test_overview_shows_queues_and_the_last_hour(page: Any, console_url: str, clean: Shop):
    _dead_charge(clean, "o-ov")
    _client(clean).enqueue("shop.charge", {"order_id": "o-ov-ok"})
    page.goto(console_url)
    high = page.locator('#queues tr[data-lane="high"]')
    expect(high.locator("td").nth(2)).to_have_text("1")  # the waiting o-ov-ok
    expect(high.locator("td").nth(6)).to_have_text("1")  # one dead letter
    expect(page.locator("#activity")).to_contain_text("shop.charge")
    # what it leaves out, said (an operator's trial read a table without untracked jobs as "all well")
    expect(page.locator("#activity-scope")).to_contain_text("Tracked jobs only")


def test_overview_shows_a_shared_retry_budget_beside_the_queues(page: Any, console_url: str, clean: Shop):
    """A data team's outage spent its named budget while every queue's read 0 retries."""
    store = StateStore(str(clean.config.state_table), clean.dynamodb)
    now = time.time()
    store.budget_add(str(budget_key("payments", None, "")), int(now // 60), 40, 7, ttl=600)
    page.goto(console_url)
    row = page.locator('#shared-budgets tr[data-budget="payments"] td')
    expect(row.nth(1)).to_have_text("shop.charge, shop.refund")
    expect(row.nth(2)).to_have_text("7 of 100")
    expect(page.locator('#queues tr[data-lane="high"] td').last).to_have_text("0 of 100")


def test_pages_name_their_icon_so_a_browser_asks_for_no_favicon_ico(page: Any, console_url: str):
    """An on-call trial's browser logged a 404 for /favicon.ico on every page."""
    page.goto(console_url)
    href = page.locator('link[rel="icon"]').get_attribute("href")
    assert href is not None
    status = page.evaluate("async (url) => (await fetch(url)).status", href)
    assert status == 200


def test_state_store_is_the_one_the_pages_read(the_shop: Shop):
    """The console reads the topology's own state table (not a copy)."""
    console = the_shop.console()
    assert isinstance(console.store, StateStore)
    assert console.store.table == the_shop.config.state_table


def test_overview_counts_cancelled_and_expired_jobs_apart_from_those_in_progress(
    page: Any, console_url: str, clean: Shop
):
    job_type = f"t.ended{uuid.uuid4().hex[:6]}"
    store = clean.console().require_store()
    for state in (JobState.CANCELLED, JobState.CANCELLED, JobState.EXPIRED, JobState.RUNNING):
        store.jobs.set_status(uuid.uuid4().hex, state, job_type=job_type)
    page.goto(console_url)
    row = page.locator(f'#activity tr[data-type="{job_type}"]')
    expect(row.locator("td.unrun")).to_have_text("3")
    expect(row.locator("td.in-progress")).to_have_text("1")  # the running one only
