"""`jf demo` end to end: it exits 0 and its summary matches what happened."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from jobframework.cli import app


def test_demo_exits_0_and_its_summary_matches_what_happened():
    result = CliRunner().invoke(app, ["demo", "--json"], catch_exceptions=False)

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["settled"] is True
    # high: 8 emails + 3 payments + the two order sagas' 6 jobs (charge, reserve, confirm; charge,
    # reserve, refund)
    assert report["enqueued"] == {"critical": 5, "high": 17, "default": 8, "low": 8}
    # 5 resets + 8 emails + 2 payments + 4 webhooks + 6 reports + 1 scheduled cleanup + 3 redriven CRM syncs
    # + 5 saga jobs (the out-of-stock reservation fails into its saga, which compensates: no dead letter)
    assert report["succeeded"] == 34
    assert report["dead_lettered"] == {"permanent": 1, "exhausted": 4, "malformed": 1}
    # two flaky webhooks fail twice; three CRM syncs and the poison pill fail twice before the DLQ
    assert report["retries"] == 2 * 2 + 3 * 2 + 2
    assert report["retried_then_succeeded"] == 2 + 3
    assert report["redriven"] == report["redriven_succeeded"] == 3
    assert report["left_in_dlqs"] == {"critical": 0, "high": 1, "default": 1, "low": 1}
    placed, refunded = report["sagas"]
    assert (placed["order_id"], placed["status"], placed["compensated"]) == ("o-100", "succeeded", [])
    assert (refunded["order_id"], refunded["status"]) == ("o-101", "compensated")
    assert refunded["reason"] == "step orders.reserve failed (permanent)"
    assert refunded["compensated"] == ["orders.charge"]
    assert report["scheduled"][0].startswith("schedule:maintenance.cleanup:")
    assert 0 <= report["queue_wait_ms"]["p50"] <= report["queue_wait_ms"]["p95"]
    assert report["processing_ms"]["p95"] is not None
    assert report["elapsed_seconds"] < 45
    assert list(report["phases"]) == ["start", "workload", "redrive", "stop"]


def test_demo_prints_progress_and_a_summary():
    result = CliRunner().invoke(app, ["demo"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    for text in (
        "summary",
        "dead-lettered: exhausted",
        "queue wait",
        "p95",
        "redriven after the CRM fix",
        "saga order.place o-101",
        # the lifecycle stages it showed, and how long it took
        *("enqueue", "run", "retry", "dead-letter", "redrive", "schedule", "saga", "elapsed", "workload"),
    ):
        assert text in result.stdout
