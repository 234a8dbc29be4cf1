"""``BENCHMARKS.md`` from one run's results: the machine, the summary, a section per benchmark."""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib.metadata
import os
import platform
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.report_summary import failed, summary_rows
from jobframework.budget import RetryBudget

ROOT = Path(__file__).resolve().parent.parent
PY = ".venv/bin/python"


def machine() -> dict[str, str]:
    memory = "unknown"
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    cpu = platform.processor() or "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    commit = "unknown"
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        commit = head + (" with uncommitted changes" if dirty else "")

    def version(package: str) -> str:
        try:
            return importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"

    return {
        "cores": str(os.cpu_count()),
        "cpu": cpu,
        "memory": memory,
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "platform": platform.platform(),
        "commit": commit,
        "versions": ", ".join(
            f"{p} {version(p)}" for p in ("aws-lambda-powertools", "boto3", "moto", "pydantic", "celery")
        ),
    }


def section_failed(title: str, bench: Any, result: dict[str, Any]) -> list[str]:
    return [f"## {title}", "", f"**failed: {result['failed']}**", "", f"Reproduce: `{bench.command}`", ""]


def code(text: str) -> list[str]:
    return ["```", text.rstrip(), "```"]


def render(
    results: dict[str, dict[str, Any]],
    info: dict[str, str],
    started: dt.datetime,
    seconds: float,
    benches: dict[str, Any],
) -> str:
    """The whole ``BENCHMARKS.md`` of one run: ``benches`` by name (their ``title`` and ``command``)."""
    lines = [
        "# Benchmarks",
        "",
        "Every figure below comes from one run of `bench/run_all.py` on the machine described here; each",
        "is a ratio against a baseline measured in the same run, on the same machine, a moment apart.",
        "AWS is the embedded one (moto server over local HTTP), so absolute rates say little about AWS;",
        "the ratios are what to read. Regenerate with:",
        "",
        "```",
        f"{PY} bench/run_all.py",
        "```",
        "",
        f"Run {started:%Y-%m-%d %H:%M} UTC, {seconds / 60:.1f} minutes in all; each benchmark in a fresh",
        "interpreter, one after the other.",
        "",
        "## Machine",
        "",
        "| | |",
        "|---|---|",
        f"| cores | {info['cores']} ({info['cpu']}) |",
        f"| memory | {info['memory']} |",
        f"| Python | {info['python']} |",
        f"| platform | {info['platform']} |",
        f"| commit | {info['commit']} |",
        f"| packages | {info['versions']} |",
        "",
        "## Summary",
        "",
        "| figure | ratio | measured | target |",
        "|---|---:|---|---|",
    ]
    lines += [
        f"| {figure} | {ratio} | {detail} | {target} |"
        for figure, ratio, detail, target in summary_rows(results)
    ]
    lines.append("")

    def section(name: str, body: Callable[[dict[str, Any]], list[str]]) -> None:
        bench = benches[name]
        r = results.get(name, {"failed": "not run"})
        if failed(r):
            lines.extend(section_failed(bench.title, bench, r))
            return
        lines.extend([f"## {bench.title}", ""])
        try:
            lines.extend(body(r))
        except (KeyError, ZeroDivisionError, TypeError) as exc:
            lines.append(f"**failed: result not understood ({exc!r})**")
        lines.extend(["", f"Reproduce: `{bench.command}` ({r.get('seconds', 0):.0f} s in this run)", ""])

    section(
        "consumer_overhead",
        lambda r: [
            "CPU time per message (`time.process_time`) of `consumer()` against a bare Powertools",
            "`BatchProcessor` whose record handler only parses the body with the same pydantic models;",
            "batches of 10 no-op jobs, no AWS call on the success path; 30 alternating rounds of 200",
            "batches, ratio of the medians.",
            "",
            f"bare BatchProcessor **{r['bare_us']:.1f} us/msg**, "
            f"`consumer()` **{r['framework_us']:.1f} us/msg**: **{r['ratio']:.2f}x** (target <= 2.0x).",
            *(
                [
                    "",
                    "Reference (not a product): the same observable work written by hand from the",
                    "framework's parts and nothing else (the envelope and its payload parsed in one pass,",
                    "the job's span and log keys, call, time, count in the batch's EMF) costs "
                    f"**{r['floor_us']:.1f} us/msg**, **{r['floor_ratio']:.2f}x** the bare baseline: the",
                    "least those features cost. `consumer()` is "
                    f"**{r['over_floor']:.2f}x** that reference (gates, settling, outcomes, heartbeat).",
                ]
                if "floor_us" in r
                else []
            ),
        ],
    )
    section(
        "io_batch",
        lambda r: [
            "A batch of ten jobs that each wait 100 ms on a simulated downstream: wall time of `consumer()`",
            "(records run concurrently on an `io` lane) against a bare Powertools `BatchProcessor` doing",
            "the same waits one after the other; 5 alternating rounds, ratio of the medians.",
            "",
            f"bare BatchProcessor **{r['bare_ms']:.0f} ms**, `consumer()` **{r['framework_ms']:.0f} ms**: "
            f"**{r['ratio']:.2f}x** (target <= 0.2x).",
        ],
    )
    section(
        "outage_requests",
        lambda r: [
            "Jobs whose downstream is down, consumed in batches of ten by `consumer()` on the embedded AWS;",
            "the consumer's own SQS requests counted with a `before-call.sqs.*` hook. A consumer that",
            "settles each record alone makes one request per failed record.",
            "",
            f"retried: **{r['outage.retried']:.2f}** requests per failed record; dead-lettered: "
            f"**{r['outage.exhausted']:.2f}** (target <= 0.2).",
        ],
    )
    section(
        "idle_cpu",
        lambda r: [
            "`jf dev --jobs handlers.jobs` (embedded AWS, pollers of the four queues, the local scheduler)",
            f"left idle for {r['seconds']:.0f} s after its ready line; CPU time (user + system, from",
            "`/proc/PID/stat`) over wall time. The pollers long-poll (2 s), one per idle queue.",
            "",
            f"**{r['core_share']:.3f}** of a core: **{r['ratio_to_budget']:.2f}x** the 0.05 budget; "
            f"{r['warnings']} warnings written meanwhile.",
        ],
    )
    section(
        "cold_start",
        lambda r: [
            "Fresh interpreters importing the Lambda entry module (`jobframework.entrypoints.worker`,",
            "plus the job modules and the Powertools Logger) and handling a first SQS event of one no-op",
            "job, against a bare Powertools batch handler module that parses the same envelope; 15",
            "alternating samples, ratio of the medians. The first event is timed too, so that a module",
            "imported lazily on the first invocation counts as much as one imported at load.",
            "",
            f"bare handler **{r['bare_ms']:.0f} ms**, jobframework **{r['framework_ms']:.0f} ms**: "
            f"**{r['ratio']:.2f}x** (target <= 1.2x).",
        ],
    )
    section(
        "throughput",
        lambda r: [
            f"{r['jobs']} no-op jobs, produced in waves of {r['wave']} so that the queue stays shallow,",
            "on one embedded AWS endpoint:",
            "",
            "- **raw boto3 ceiling**: SendMessageBatch, ReceiveMessage (10), DeleteMessageBatch in one loop",
            "  (lean mode's floor); **raw idempotent floor**: that loop plus a conditional PutItem and an",
            "  UpdateItem per message (idempotent mode's floor requests);",
            "- **jobframework**: `enqueue_many`, the event-source-mapping emulator, the real `consumer()`,",
            "  idempotent (the default: an untracked job, two DynamoDB writes a job); **lean** is the same",
            "  without idempotency (no DynamoDB per job, as Celery keeps no per-job record either). moto",
            "  runs in a process of its own, as Celery's worker does; the four loops run in "
            "rounds (three), a ratio",
            "  is the median of its rounds' (the endpoint's rate drifts over a run);",
            f"- **Celery {r['celery_version']}** (kombu {r['kombu_version']}) with its SQS transport on "
            "the same endpoint: one worker process, `--pool solo`, `polling_interval=0.01` (kombu's "
            "default 1 s throttles it badly on a local endpoint), remote control, heartbeat, mingle "
            "and gossip off, results ignored.",
            "",
            *code(r["output"]),
        ],
    )
    section(
        "redrive",
        lambda r: [
            f"{r['messages']} dead letters in rounds of 100 moved from the DLQ back to the source queue by",
            "`DeadLetters.redrive` (what `jf dlq redrive` runs) and by a plain boto3",
            "receive/send/delete loop, alternately, on the embedded AWS.",
            "",
            *code(r["output"]),
        ],
    )
    section(
        "cli_latency",
        lambda r: [
            "Fresh interpreters, as a shell runs commands: `jf enqueue` of a lean job (one `SendMessage`)",
            "with the topology's `JF_*` variables and `JF_JOBS`, against `python -c` importing boto3 and",
            "sending the same envelope to the same queue of one embedded AWS; 9 alternating samples, ratio",
            "of the medians. What the ratio shows is the CLI around the request: its imports, its",
            "configuration, its clients.",
            "",
            f"boto3 script **{r['boto3_ms']:.0f} ms**, `jf enqueue` **{r['cli_ms']:.0f} ms**: "
            f"**{r['ratio']:.2f}x**.",
        ],
    )
    section(
        "enqueue_many",
        lambda r: [
            f"One `enqueue_many` of {r['jobs']} tracked jobs with a dedup key (a backfill): the key's claim",
            "before the `SendMessageBatch` and the `queued` status after it are DynamoDB writes, made",
            f"{r['at_once']:.0f} at a time against one at a time; each DynamoDB request waits 10 ms first",
            "(a botocore hook: the embedded AWS answers in well under a millisecond, a region's network",
            "does not); 3 alternating rounds, ratio of the medians (lower is better).",
            "",
            f"one at a time **{r['one_s']:.2f} s**, {r['at_once']:.0f} at once **{r['many_s']:.2f} s**: "
            f"**{r['ratio']:.2f}x**.",
        ],
    )
    section(
        "cost",
        lambda r: [
            "AWS requests per job counted with a botocore hook over 200 no-op jobs per scenario, priced",
            "with the list prices in `bench/cost.py` (see `docs/cost.md`).",
            "",
            "Each mode against its floor (issue 13): "
            + ", ".join(f"{mode} **{ratio:.2f}x**" for mode, ratio in r["ratios"].items())
            + ".",
            "",
            *r["output"].strip().splitlines(),
        ],
    )
    section(
        "limits",
        lambda r: [
            "The consumer's flow gates run for 200 fresh jobs of each kind on the embedded AWS (moto in its",
            "own process); state-table requests counted with a botocore hook, priced as in `bench/cost.py`.",
            "",
            *code(r["output"]),
        ],
    )
    section(
        "concurrency_cap",
        lambda r: [
            f"{r['jobs']} jobs of {r['job_seconds']:g} s enqueued at once on the embedded AWS (moto in",
            "its own process), run by the emulator as `jf dev` runs them: the job with",
            f"`concurrency={r['cap']}`, against the same job without the cap run {r['cap']} at a time by",
            "its lane's bound, one batch at a time (nothing handed back). Higher is better; 1.00x: the",
            "cap costs nothing.",
            "",
            f"{r['cap']} at a time **{r['baseline_jobs_s']:.1f} jobs/s**, `concurrency={r['cap']}` "
            f"**{r['capped_jobs_s']:.1f} jobs/s** (**{r['ratio']:.2f}x**), "
            f"{r['hand_backs_per_job']:.2f} hand-backs a job.",
            "",
            "The same capped jobs run by two consumers with an emulator each, as two `jf worker` processes",
            "(or Lambda invocations) share a cap, each with its own leases and waiting line: "
            f"**{r['two_processes_jobs_s']:.1f} jobs/s** (**{r['two_processes_ratio']:.2f}x**), "
            f"{r['two_processes_hand_backs_per_job']:.2f} hand-backs a job.",
        ],
    )

    def outage_body(r: dict[str, Any]) -> list[str]:
        from bench.outage import markdown_table

        body = [
            "Pure-Python, time-compressed simulation (1 s steps, seeded) of jobs whose downstream is down.",
            "Every retry decision is the framework's own: `classification.classify` with a real",
            "`RetryPolicy` (`compute_backoff`, jitter from `random.Random(seed)`), and",
            "`budget.BatchBudget` over an",
            "`InMemoryBudgetCounter` on the simulated clock (default `RetryBudget`: 20 % of first attempts",
            f"in a 5-minute window, floor {RetryBudget().floor}), flushed per batch of 10; delays rounded up "
            "to whole seconds",
            "as `ChangeMessageVisibility` requires. Consumers are not a bottleneck (unlimited capacity),",
            "so the peaks are the herd that the retries themselves form. Dead letters with reason",
            "`budget` wait in the DLQ for a redrive; 'drain after recovery' counts until the source",
            "queue is empty and does not include that redrive.",
            "",
            "![downstream load over time](docs/outage.png)",
            "",
        ]
        for w in r["workloads"]:
            p = w["parameters"]
            arrival = (
                "in a burst when the outage starts"
                if p["arrival_seconds"] <= 0
                else f"uniformly over {p['arrival_seconds']:g} s from t=0"
            )
            body += [
                f"### {w['name']}: {p['jobs']:,} jobs arriving {arrival}",
                "",
                f"Downstream down from t={p['outage_start']:g} s for {p['outage_seconds'] / 60:g} minutes; "
                f"{p['attempts']} attempts (`RetryPolicy.spanning` of the outage), base 1 s, cap 300 s; "
                f"seed {p['seed']}.",
                "",
                markdown_table(w["scenarios"]),
                "",
            ]
        return body

    section("outage", outage_body)
    return "\n".join(lines).rstrip() + "\n"
