"""Take the screenshots of docs/console/ (the console's main pages) on a sample workload.

Run from the repository root:  .venv/bin/python -m tests.browser.screenshots  [OUT_DIR]

It starts the embedded AWS, runs the test shop's jobs (some succeed, some are dead-lettered, a saga
is compensated), serves the console and photographs each page in the system's headless Chromium.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from jobframework.client import JobClient
from jobframework.local.aws import EmbeddedAWS, use_fake_credentials
from tests.browser import console_jobs
from tests.browser.harness import Shop, chromium_path, serve, shop

OUT = Path("docs/console")


def workload(s: Shop) -> dict[str, str]:
    """Jobs that succeed, jobs dead-lettered for three reasons, two sagas, a scheduled run."""
    client = JobClient(s.config, registry=s.registry, sqs_client=s.sqs, clients={"dynamodb": s.dynamodb})
    ids: dict[str, str] = {}
    for n in range(6):
        ids.setdefault("ok", client.enqueue("shop.charge", {"order_id": f"o-10{n}", "amount_cents": 1250}).id)
    for n in range(3):
        console_jobs.declined.add(f"o-20{n}")
        ids.setdefault("dead", client.enqueue("shop.charge", {"order_id": f"o-20{n}"}).id)
    high = s.config.endpoints("high").url
    s.sqs.send_message(QueueUrl=high, MessageBody=json.dumps({"v": 1, "id": "bad-1", "type": "shop.charge"}))
    unknown = {"v": 1, "id": "01a0-unknown", "type": "shop.gift", "payload": {}, "key": "gift:1"}
    s.sqs.send_message(QueueUrl=high, MessageBody=json.dumps(unknown))
    ids["saga_failed"] = console_jobs.order_saga.start(
        {"order_id": "o-300", "fail_at": "ship"}, client=client
    )
    ids["saga_ok"] = console_jobs.order_saga.start({"order_id": "o-301"}, client=client)
    client.enqueue("shop.export", {"order_id": "o-400"})
    for _ in range(6):
        s.consume("high")
    s.consume("low")
    return ids


def take(out: Path) -> list[Path]:
    path = chromium_path()
    if path is None:
        raise SystemExit("no Chromium: run .ci/install-browser first")
    from playwright.sync_api import sync_playwright

    use_fake_credentials()
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    with EmbeddedAWS() as aws:
        s = shop(aws.endpoint_url)
        ids = workload(s)
        server = serve(s.console())
        try:
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=path, headless=True, args=["--no-sandbox"])
                page: Any = browser.new_page(viewport={"width": 1280, "height": 800})

                def shot(name: str, url: str) -> None:
                    page.goto(server.url + url)
                    target = out / f"{name}.png"
                    page.screenshot(path=str(target), full_page=True)
                    written.append(target)

                page.goto(server.url + "/schedules")
                page.get_by_role("button", name="Enqueue now").first.click()
                page.locator(".ok").wait_for()
                s.consume("low")
                shot("overview", "/")
                page.goto(server.url + "/dlq/high")
                page.locator("#redrive-filter select[name=type]").select_option("shop.charge")
                page.get_by_role("button", name="Count (dry run)").click()
                page.locator("#dry-run-count").wait_for()
                page.screenshot(path=str(out / "dead-letters.png"), full_page=True)
                written.append(out / "dead-letters.png")
                page.locator("#letters a").first.click()
                page.locator("#letter-body").wait_for()
                page.screenshot(path=str(out / "dead-letter.png"), full_page=True)
                written.append(out / "dead-letter.png")
                shot("jobs", "/jobs?type=shop.charge")
                shot("job", f"/jobs/{ids['dead']}")
                shot("schedules", "/schedules")
                shot("sagas", "/sagas")
                shot("saga", f"/sagas/{ids['saga_failed']}")
                shot("retry-plan", "/retry-plans/shop.export")
                browser.close()
        finally:
            server.stop()
    return written


if __name__ == "__main__":
    for written_path in take(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT):
        print(written_path)
