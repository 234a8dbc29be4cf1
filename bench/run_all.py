"""Run every benchmark in ``bench/`` once and regenerate ``BENCHMARKS.md`` from that one run.

Each benchmark runs in a fresh interpreter (``python -m bench.run_all --one NAME``, which
prints one JSON line), one after the other so that they do not compete for this
machine's cores. A benchmark that fails or times out is recorded as ``failed: <reason>``
in the report; the others still run. The whole run takes a few minutes on 2 cores.

    .venv/bin/python bench/run_all.py [--only outage,cost] [--output BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import importlib.metadata
import io
import json
import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULT_PREFIX = "RUN_ALL_RESULT "
PY = ".venv/bin/python"


@dataclass(frozen=True)
class Bench:
    name: str
    title: str
    command: str
    """The command that reproduces this figure alone, from the repository root."""
    timeout: float
    run: Callable[[], dict[str, Any]]


def _captured(main: Callable[..., Any], *args: Any) -> str:
    """Run a benchmark's ``main`` and return what it printed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(*args)
    return out.getvalue()


def _number(pattern: str, text: str) -> float:
    match = re.search(pattern, text)
    if match is None:
        raise ValueError(f"output not understood (no match for {pattern!r}): {text.strip()[-300:]!r}")
    return float(match.group(1))


def run_consumer_overhead() -> dict[str, Any]:
    from bench import consumer_overhead

    return dict(consumer_overhead.measure(rounds=30, batches=200))


def run_cold_start() -> dict[str, Any]:
    from bench import cold_start

    return dict(cold_start.measure(samples=15))


def run_redrive() -> dict[str, Any]:
    from bench import redrive

    text = _captured(redrive.main)
    framework = _number(r"jf dlq redrive\s+([\d.]+) msg/s", text)
    loop = _number(r"boto3 loop\s+([\d.]+) msg/s", text)
    return {
        "redrive_msg_s": framework,
        "loop_msg_s": loop,
        "ratio": framework / loop,
        "messages": redrive.ROUND * redrive.ROUNDS,
        "output": text,
    }


def run_cli_latency() -> dict[str, Any]:
    from bench import cli_latency

    return dict(cli_latency.measure(samples=9))


def run_throughput() -> dict[str, Any]:
    from bench import throughput

    text = _captured(throughput.main)
    ceiling = _number(r"raw boto3 ceiling\s+([\d.]+) jobs/s", text)
    floor = _number(r"raw idempotent floor\s+([\d.]+) jobs/s", text)
    ours = _number(r"jobframework\s+([\d.]+) jobs/s", text)
    lean = _number(r"jobframework \(lean\)\s+([\d.]+) jobs/s", text)
    result: dict[str, Any] = {
        "ceiling_jobs_s": ceiling,
        "framework_jobs_s": ours,
        "ratio_to_ceiling": ours / ceiling,
        "floor_jobs_s": floor,
        "ratio_to_floor": ours / floor,
        "lean_jobs_s": lean,
        "lean_ratio_to_ceiling": lean / ceiling,
        "jobs": throughput.TOTAL,
        "wave": throughput.WAVE,
        "celery_version": importlib.metadata.version("celery"),
        "kombu_version": importlib.metadata.version("kombu"),
        "output": text,
    }
    match = re.search(r"celery \(solo, tuned\)\s+([\d.]+) jobs/s", text)
    if match:
        result["celery_jobs_s"] = float(match.group(1))
        result["ratio_to_celery"] = ours / float(match.group(1))
        result["lean_ratio_to_celery"] = lean / float(match.group(1))
    else:
        skipped = re.search(r"celery: skipped \((.*)\)", text)
        result["celery_failed"] = skipped.group(1) if skipped else "no Celery figure in the output"
    return result


def run_cost() -> dict[str, Any]:
    from bench import cost

    text = _captured(cost.main, ["--jobs", "200"])
    ratios = {
        m.group(2): float(m.group(1)) for m in re.finditer(r"^ratio to floor ([\d.]+)x  (.+)$", text, re.M)
    }
    totals = re.search(r"^\| \*\*total\*\* \|(.*)\|$", text, re.M)
    if not ratios or totals is None:
        raise ValueError(f"no ratios or total line in the output of bench/cost.py: {text.strip()[-300:]!r}")
    usd = [float(v) for v in re.findall(r"\*\*([\d.]+)\*\*", totals.group(1))]
    return {"ratios": ratios, "usd": dict(zip(ratios, usd, strict=True)), "output": text}


def run_limits() -> dict[str, Any]:
    from bench import limits

    text = _captured(limits.main, ["--jobs", "200"])
    ratios = {m.group(2): float(m.group(1)) for m in re.finditer(r"^ratio ([\d.]+)x  (.+)$", text, re.M)}
    if not ratios:
        raise ValueError(f"no ratios in the output of bench/limits.py: {text.strip()[-300:]!r}")
    return {"ratios": ratios, "output": text}


def run_io_batch() -> dict[str, Any]:
    from bench import io_batch

    return dict(io_batch.measure(rounds=5))


def run_outage_requests() -> dict[str, Any]:
    from bench import outage_requests
    from jobframework.local.aws import EmbeddedAWS, use_fake_credentials

    use_fake_credentials()
    with EmbeddedAWS() as aws:
        return dict(outage_requests.measure(aws.endpoint_url, aws.client, 50))


def run_outage() -> dict[str, Any]:
    from bench import outage

    return outage.measure(png=ROOT / "docs" / "outage.png")


def run_idle_cpu() -> dict[str, Any]:
    from bench import idle_cpu

    return idle_cpu.measure(seconds=20)


BENCHES = [
    Bench(
        "consumer_overhead",
        "Consumer overhead",
        f"{PY} bench/consumer_overhead.py --rounds 30 --batches 200",
        300,
        run_consumer_overhead,
    ),
    Bench("cold_start", "Cold start", f"{PY} bench/cold_start.py --samples 15", 300, run_cold_start),
    Bench("io_batch", "I/O-bound batch", f"{PY} bench/io_batch.py --rounds 5", 120, run_io_batch),
    Bench(
        "outage_requests",
        "SQS requests per failed record",
        f"{PY} bench/outage_requests.py --jobs 50",
        300,
        run_outage_requests,
    ),
    Bench("throughput", "End-to-end throughput", f"{PY} bench/throughput.py", 420, run_throughput),
    Bench("redrive", "Redrive rate", f"{PY} bench/redrive.py", 300, run_redrive),
    Bench(
        "cli_latency", "`jf enqueue` latency", f"{PY} bench/cli_latency.py --samples 9", 180, run_cli_latency
    ),
    Bench("cost", "Cost per million jobs", f"{PY} bench/cost.py --jobs 200", 300, run_cost),
    Bench("limits", "The cost of flow control", f"{PY} bench/limits.py --jobs 200", 300, run_limits),
    Bench("outage", "Outage simulation", f"{PY} bench/outage.py", 300, run_outage),
    Bench("idle_cpu", "jf dev idle CPU", f"{PY} bench/idle_cpu.py --seconds 20", 120, run_idle_cpu),
]


def run_one_here(name: str) -> int:
    """Child mode: run one benchmark in this process and print its result as one JSON line."""
    bench = next(b for b in BENCHES if b.name == name)
    result = bench.run()
    sys.stdout.flush()
    print(RESULT_PREFIX + json.dumps(result, default=str))
    return 0


def run_in_child(bench: Bench) -> dict[str, Any]:
    """Run one benchmark in a fresh interpreter; ``{"failed": reason}`` when it does not finish."""
    started = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "bench.run_all", "--one", bench.name],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=bench.timeout,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"failed": f"timed out after {bench.timeout:g} s", "seconds": time.perf_counter() - started}
    seconds = time.perf_counter() - started
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_PREFIX):
            result: dict[str, Any] = json.loads(line[len(RESULT_PREFIX) :])
            result["seconds"] = seconds
            return result
    tail = (proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines() or ["no output"])[-1]
    return {"failed": f"exit code {proc.returncode}: {tail[:300]}", "seconds": seconds}


# --- the report -------------------------------------------------------------------------------


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


def _failed(result: dict[str, Any]) -> str | None:
    return str(result["failed"]) if "failed" in result else None


def _outage_ratios(workload: dict[str, Any]) -> tuple[str, str, str, str]:
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
        failed = _failed(r)
        if failed:
            rows.append((figure, f"failed: {failed}", "", target))
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
    cost = results.get("cost", {"failed": "not run"})
    if _failed(cost):
        rows.append(("Cost per million jobs vs the mode's floor", f"failed: {_failed(cost)}", "", ""))
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
    if _failed(limits):
        rows.append(("Flow-control requests per job vs one write", f"failed: {_failed(limits)}", "", ""))
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
    if _failed(outage):
        rows.append(("Outage simulation", f"failed: {_failed(outage)}", "", ""))
    else:
        for w in outage["workloads"]:
            budget, budget_detail, herd, herd_detail = _outage_ratios(w)
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


def _section_failed(title: str, bench: Bench, result: dict[str, Any]) -> list[str]:
    return [f"## {title}", "", f"**failed: {result['failed']}**", "", f"Reproduce: `{bench.command}`", ""]


def _code(text: str) -> list[str]:
    return ["```", text.rstrip(), "```"]


def render(
    results: dict[str, dict[str, Any]], info: dict[str, str], started: dt.datetime, seconds: float
) -> str:
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
    benches = {b.name: b for b in BENCHES}

    def section(name: str, body: Callable[[dict[str, Any]], list[str]]) -> None:
        bench = benches[name]
        r = results.get(name, {"failed": "not run"})
        if _failed(r):
            lines.extend(_section_failed(bench.title, bench, r))
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
            "  runs in a process of its own, as Celery's worker does;",
            f"- **Celery {r['celery_version']}** (kombu {r['kombu_version']}) with its SQS transport on "
            "the same endpoint: one worker process, `--pool solo`, `polling_interval=0.01` (kombu's "
            "default 1 s throttles it badly on a local endpoint), remote control, heartbeat, mingle "
            "and gossip off, results ignored.",
            "",
            *_code(r["output"]),
        ],
    )
    section(
        "redrive",
        lambda r: [
            f"{r['messages']} dead letters in rounds of 100 moved from the DLQ back to the source queue by",
            "`DeadLetters.redrive` (what `jf dlq redrive` runs) and by a plain boto3",
            "receive/send/delete loop, alternately, on the embedded AWS.",
            "",
            *_code(r["output"]),
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
            *_code(r["output"]),
        ],
    )

    def outage_body(r: dict[str, Any]) -> list[str]:
        from bench.outage import markdown_table

        body = [
            "Pure-Python, time-compressed simulation (1 s steps, seeded) of jobs whose downstream is down.",
            "Every retry decision is the framework's own: `retry.classify` with a real `RetryPolicy`",
            "(`compute_backoff`, jitter from `random.Random(seed)`), and `budget.BatchBudget` over an",
            "`InMemoryBudgetCounter` on the simulated clock (default `RetryBudget`: 20 % of first attempts",
            "in a 5-minute window, floor 10), flushed per batch of 10; delays rounded up to whole seconds",
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--only", help="comma-separated benchmark names (default: all)")
    parser.add_argument("--output", default=str(ROOT / "BENCHMARKS.md"))
    args = parser.parse_args(argv)
    if args.one:
        return run_one_here(args.one)
    chosen = [b for b in BENCHES if not args.only or b.name in args.only.split(",")]
    started, t0 = dt.datetime.now(dt.UTC), time.perf_counter()
    results: dict[str, dict[str, Any]] = {}
    for bench in chosen:
        print(f"running {bench.name} ...", flush=True)
        results[bench.name] = run_in_child(bench)
        r = results[bench.name]
        status = f"failed: {r['failed']}" if "failed" in r else "ok"
        print(f"  {bench.name}: {status} ({r['seconds']:.0f} s)", flush=True)
    report = render(results, machine(), started, time.perf_counter() - t0)
    Path(args.output).write_text(report)
    print(f"\nwrote {args.output}\n")
    for figure, ratio, detail, _ in summary_rows(results):
        print(f"{ratio:>10}  {figure}  {detail}")
    failures = [name for name, r in results.items() if "failed" in r]
    if failures:
        print(f"\nfailed: {', '.join(failures)}")
    return 0


if __name__ == "__main__":
    if __package__ in (None, ""):
        sys.path.insert(0, str(ROOT))
    sys.exit(main())
