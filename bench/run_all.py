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
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script (python bench/run_all.py): the repository's root first
    sys.path.insert(0, str(ROOT))

from bench.report import PY, machine, render  # noqa: E402
from bench.report_summary import summary_rows  # noqa: E402

RESULT_PREFIX = "RUN_ALL_RESULT "


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


def run_enqueue_many() -> dict[str, Any]:
    from bench import enqueue_many

    return dict(enqueue_many.measure(rounds=3))


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
        # (the medians of the rounds' ratios, as printed: each round's two sides a moment apart)
        "ratio_to_floor": _number(r"ratio ([\d.]+)x  idempotent", text),
        "lean_jobs_s": lean,
        "lean_ratio_to_ceiling": _number(r"ratio ([\d.]+)x  lean", text),
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


def run_concurrency_cap() -> dict[str, Any]:
    from bench import concurrency_cap

    return concurrency_cap.measure(jobs=150)


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
    Bench(
        "enqueue_many",
        "Tracked enqueue_many",
        f"{PY} bench/enqueue_many.py --rounds 3",
        300,
        run_enqueue_many,
    ),
    Bench("cost", "Cost per million jobs", f"{PY} bench/cost.py --jobs 200", 300, run_cost),
    Bench("limits", "The cost of flow control", f"{PY} bench/limits.py --jobs 200", 300, run_limits),
    Bench(
        "concurrency_cap",
        "A concurrency cap's throughput",
        f"{PY} bench/concurrency_cap.py --jobs 150",
        300,
        run_concurrency_cap,
    ),
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
    report = render(results, machine(), started, time.perf_counter() - t0, {b.name: b for b in BENCHES})
    Path(args.output).write_text(report)
    print(f"\nwrote {args.output}\n")
    for figure, ratio, detail, _ in summary_rows(results):
        print(f"{ratio:>10}  {figure}  {detail}")
    failures = [name for name, r in results.items() if "failed" in r]
    if failures:
        print(f"\nfailed: {', '.join(failures)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
