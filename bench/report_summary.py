"""The summary table at the top of ``BENCHMARKS.md`` (``bench/run_all.py``): a row per figure."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def failed(result: dict[str, Any]) -> str | None:
    return str(result["failed"]) if "failed" in result else None


def outage_ratios(workload: dict[str, Any]) -> tuple[str, str, str, str]:
    """(budget ratio, its figures, herd ratio, its figures) of one workload."""
    by = {(s["jitter"], s["budget"]): s for s in workload["scenarios"]}
    base = by[("none", False)]
    off, on = by[("proportional", False)], by[("proportional", True)]
    full = by[("full", False)]
    budget_detail = f"{on['mean_rps_outage']:.1f} vs {off['mean_rps_outage']:.1f} req/s while down"
    herd_detail = (
        f"{full['peak_rps_after_recovery']:.0f} vs {base['peak_rps_after_recovery']:.0f} req/s, "
        "worst second once back"
    )
    budget = f"{on['mean_rps_outage'] / off['mean_rps_outage']:.2f}x" if off["mean_rps_outage"] else "n/a"
    herd = (
        f"{full['peak_rps_after_recovery'] / base['peak_rps_after_recovery']:.3f}x"
        if base["peak_rps_after_recovery"]
        else "n/a"
    )
    return budget, budget_detail, herd, herd_detail


def summary_rows(results: dict[str, dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    """(figure, ratio, what it compares, target) for the table at the top."""
    rows: list[tuple[str, str, str, str]] = []

    def add(
        name: str,
        figure: str,
        ratio: Callable[[dict[str, Any]], str],
        detail: Callable[..., str],
        target: str,
    ) -> None:
        r = results.get(name, {"failed": "not run"})
        why = failed(r)
        if why:
            rows.append((figure, f"failed: {why}", "", target))
            return
        try:
            rows.append((figure, ratio(r), detail(r), target))
        except (KeyError, ZeroDivisionError, TypeError) as exc:
            rows.append((figure, f"failed: result not understood ({exc!r})", "", target))

    add(
        "consumer_overhead",
        "Consumer CPU per message vs bare Powertools BatchProcessor",
        lambda r: f"{r['ratio']:.2f}x",
        lambda r: f"{r['framework_us']:.1f} vs {r['bare_us']:.1f} us/msg",
        "<= 2.0x",
    )
    add(
        "io_batch",
        "Wall time of 10 jobs waiting 100 ms each vs bare Powertools BatchProcessor",
        lambda r: f"{r['ratio']:.2f}x",
        lambda r: f"{r['framework_ms']:.0f} vs {r['bare_ms']:.0f} ms",
        "<= 0.2x",
    )
    add(
        "outage_requests",
        "SQS requests per failed record during an outage (retried / dead-lettered)",
        lambda r: f"{r['outage.retried']:.2f} / {r['outage.exhausted']:.2f}",
        lambda r: (
            f"{r['outage.retried requests']:.0f} and {r['outage.exhausted requests']:.0f} requests "
            f"for {r['outage.retried records']:.0f} records each"
        ),
        "<= 0.2",
    )
    add(
        "idle_cpu",
        "`jf dev` idle: CPU time / wall time (share of one core)",
        lambda r: f"{r['core_share']:.3f}",
        lambda r: f"{r['ratio_to_budget']:.2f}x the 0.05 budget, {r['warnings']} warnings",
        "<= 0.05",
    )
    add(
        "cold_start",
        "Cold start (import and first event) vs bare Powertools handler",
        lambda r: f"{r['ratio']:.2f}x",
        lambda r: f"{r['framework_ms']:.0f} vs {r['bare_ms']:.0f} ms",
        "<= 1.2x",
    )
    add(
        "throughput",
        "End-to-end throughput, idempotent, vs a raw boto3 loop making its floor requests",
        lambda r: f"{r['ratio_to_floor']:.2f}x",
        lambda r: f"{r['framework_jobs_s']:.0f} vs {r['floor_jobs_s']:.0f} jobs/s",
        ">= 0.8x",
    )
    add(
        "throughput",
        "End-to-end throughput, lean (no per-job DynamoDB), vs the raw boto3 ceiling",
        lambda r: f"{r['lean_ratio_to_ceiling']:.2f}x",
        lambda r: f"{r['lean_jobs_s']:.0f} vs {r['ceiling_jobs_s']:.0f} jobs/s",
        ">= 0.9x",
    )
    tp = results.get("throughput", {})
    if "failed" not in tp and "celery_failed" in tp:
        rows.append(("End-to-end throughput vs Celery on SQS", f"failed: {tp['celery_failed']}", "", ""))
    else:
        add(
            "throughput",
            "End-to-end throughput, idempotent, vs Celery on SQS (solo pool, polling_interval 0.01)",
            lambda r: f"{r['ratio_to_celery']:.2f}x",
            lambda r: f"{r['framework_jobs_s']:.0f} vs {r['celery_jobs_s']:.0f} jobs/s",
            "higher is better",
        )
        add(
            "throughput",
            "End-to-end throughput vs Celery on SQS, lean (neither keeps per-job records)",
            lambda r: f"{r['lean_ratio_to_celery']:.2f}x",
            lambda r: f"{r['lean_jobs_s']:.0f} vs {r['celery_jobs_s']:.0f} jobs/s",
            "higher is better",
        )
    add(
        "redrive",
        "`jf dlq redrive` rate vs plain boto3 loop",
        lambda r: f"{r['ratio']:.2f}x",
        lambda r: f"{r['redrive_msg_s']:.0f} vs {r['loop_msg_s']:.0f} msg/s",
        ">= 0.8x",
    )
    add(
        "cli_latency",
        "`jf enqueue` (a fresh process) vs a minimal boto3 script sending the same message",
        lambda r: f"{r['ratio']:.2f}x",
        lambda r: f"{r['cli_ms']:.0f} vs {r['boto3_ms']:.0f} ms",
        "lower is better",
    )
    add(
        "enqueue_many",
        "`enqueue_many` of tracked, keyed jobs, DynamoDB writes together vs one at a time (10 ms a request)",
        lambda r: f"{r['ratio']:.2f}x",
        lambda r: f"{r['many_s']:.2f} vs {r['one_s']:.2f} s for {r['jobs']} jobs",
        "lower is better",
    )
    add(
        "concurrency_cap",
        "Jobs/s under `concurrency=3` vs the same jobs run three at a time",
        lambda r: f"{r['ratio']:.2f}x",
        lambda r: f"{r['capped_jobs_s']:.1f} vs {r['baseline_jobs_s']:.1f} jobs/s",
        "higher is better",
    )
    add(
        "concurrency_cap",
        "The same, two processes sharing the cap",
        lambda r: f"{r['two_processes_ratio']:.2f}x",
        lambda r: f"{r['two_processes_jobs_s']:.1f} vs {r['baseline_jobs_s']:.1f} jobs/s",
        "higher is better",
    )
    cost = results.get("cost", {"failed": "not run"})
    if failed(cost):
        rows.append(("Cost per million jobs vs the mode's floor", f"failed: {failed(cost)}", "", ""))
    else:
        for mode, ratio in cost["ratios"].items():
            rows.append(
                (
                    f"Cost per million jobs vs its floor ({mode}; request charges)",
                    f"{ratio:.2f}x",
                    f"${cost['usd'][mode]:.2f} in all",
                    "<= 1.1x",
                )
            )
    limits = results.get("limits", {"failed": "not run"})
    if failed(limits):
        rows.append(("Flow-control requests per job vs one write", f"failed: {failed(limits)}", "", ""))
    else:
        for name, ratio in limits["ratios"].items():
            rows.append(
                (
                    f"Flow-control requests per job vs a tracked job's one write ({name})",
                    f"{ratio:.2f}x",
                    "state-table requests of the gates",
                    "lower is better",
                )
            )
    outage = results.get("outage", {"failed": "not run"})
    if failed(outage):
        rows.append(("Outage simulation", f"failed: {failed(outage)}", "", ""))
    else:
        for w in outage["workloads"]:
            budget, budget_detail, herd, herd_detail = outage_ratios(w)
            rows.append(
                (
                    f"Outage ({w['name']}): downstream load during the outage, retry budget on vs off "
                    "(proportional jitter)",
                    budget,
                    budget_detail,
                    "lower is better",
                )
            )
            rows.append(
                (
                    f"Outage ({w['name']}): peak load after recovery, full jitter vs no jitter (budget off)",
                    herd,
                    herd_detail,
                    "lower is better",
                )
            )
    return rows
