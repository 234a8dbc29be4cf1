"""Jobs per second of a job type under ``concurrency=3``, against the same jobs run three at a time.

A job type with a concurrency cap should run at its cap: three jobs of 0.1 s at a time is 30 jobs/s,
however many wait. The capped side is the job with ``@job(concurrency=3)`` on the embedded AWS's
queue, run by the event-source-mapping emulator as ``jf dev`` runs it (its batches of ten, several at
once); the baseline is the same job without the cap, its lane bounded to three records at a time
(``consumer(concurrency=3)``) and one batch at a time, so three run at once with nothing handed back.
Both sides take ``JOBS`` jobs enqueued at once; the figure is the capped side's jobs/s over the
baseline's (1.00x: the cap costs nothing; the stop-40 trial measured 3.75 jobs/s against 15/s
possible). Also printed: the capped side's hand-backs (a record over the cap sent back unrun) per job,
and the same capped jobs run by two consumers with an emulator each, as two ``jf worker`` processes
(or Lambda invocations) share a cap: each keeps its own leases and waiting line.

    python bench/concurrency_cap.py [--jobs 150]
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "ERROR")

from pydantic import BaseModel

from jobframework.client import EnqueueRequest, JobClient
from jobframework.consumer import consumer
from jobframework.delivery import Outcome, RecordOutcome
from jobframework.jobs import JobRegistry, job
from jobframework.local.aws import EmbeddedAWS, use_fake_credentials
from jobframework.local.emulator import Emulator, pollers_for
from jobframework.testing import provision_fresh

CAP = 3
JOB_SECONDS = 0.1
registry = JobRegistry()


class Item(BaseModel):
    n: int


@job("bench.capped", registry=registry, concurrency=CAP, timeout=30)
def capped(item: Item) -> None:
    time.sleep(JOB_SECONDS)


@job("bench.bounded", registry=registry, timeout=30)
def bounded(item: Item) -> None:
    time.sleep(JOB_SECONDS)


def run(aws: EmbeddedAWS, name: str, jobs: int, processes: int = 1) -> tuple[float, Counter[str]]:
    """Jobs/s of ``jobs`` jobs of ``name`` enqueued at once, and the count of each outcome;
    ``processes``: consumers with an emulator each, as ``jf worker --processes`` runs them (each keeps
    its own leases and waiting line, as a process does)."""
    topology, config = provision_fresh(aws.endpoint_url, registry)
    sqs = aws.client("sqs")
    outcomes: Counter[str] = Counter()
    lock = threading.Lock()
    done = threading.Event()

    def count(outcome: RecordOutcome) -> None:
        with lock:
            outcomes[outcome.outcome] += 1
            if outcomes[Outcome.SUCCEEDED] >= jobs:
                done.set()

    baseline = name == "bench.bounded"
    client = JobClient(config, registry=registry, sqs_client=sqs)
    client.enqueue_many([EnqueueRequest(name, {"n": n}) for n in range(jobs)])
    emulators = [
        Emulator(
            pollers_for(config, topology, ["default"]),
            consumer(
                registry,
                config=config,
                sqs_client=sqs,
                listeners=[count],
                concurrency=CAP if baseline else None,
            ),
            sqs,
            workers=1 if baseline else None,
            idle_seconds=0.01,
            max_idle_seconds=0.1,
        )
        for _ in range(processes)
    ]
    started = time.perf_counter()
    for emulator in emulators:
        emulator.start()
    try:
        if not done.wait(jobs * JOB_SECONDS * 10 + 60):
            raise SystemExit(f"{name}: {outcomes[Outcome.SUCCEEDED]} of {jobs} jobs ran in time")
        return jobs / (time.perf_counter() - started), outcomes
    finally:
        for emulator in emulators:
            emulator.stop(5)


def measure(jobs: int = 150) -> dict[str, Any]:
    """Both sides' jobs/s, the ratio, and the capped side's hand-backs per job."""
    use_fake_credentials()
    with EmbeddedAWS(separate_process=True) as aws:
        base, _ = run(aws, "bench.bounded", jobs)
        ours, outcomes = run(aws, "bench.capped", jobs)
        two, two_outcomes = run(aws, "bench.capped", jobs, processes=2)
    return {
        "jobs": jobs,
        "cap": CAP,
        "job_seconds": JOB_SECONDS,
        "baseline_jobs_s": base,
        "capped_jobs_s": ours,
        "hand_backs_per_job": outcomes[Outcome.RELEASED] / jobs,
        "ratio": ours / base,
        "two_processes_jobs_s": two,
        "two_processes_hand_backs_per_job": two_outcomes[Outcome.RELEASED] / jobs,
        "two_processes_ratio": two / base,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=150)
    r = measure(parser.parse_args().jobs)
    ideal = CAP / JOB_SECONDS
    print(f"three at a time (baseline)  {r['baseline_jobs_s']:6.1f} jobs/s   ({ideal:.0f}/s ideal)")
    print(f"concurrency={CAP}              {r['capped_jobs_s']:6.1f} jobs/s")
    print(f"hand-backs over the cap     {r['hand_backs_per_job']:6.2f} per job")
    print(f"ratio {r['ratio']:.2f}x  jobs/s of concurrency={CAP} vs the same jobs three at a time")
    print(
        f"concurrency={CAP}, 2 processes  {r['two_processes_jobs_s']:6.1f} jobs/s   "
        f"hand-backs {r['two_processes_hand_backs_per_job']:.2f} per job"
    )
    print(f"ratio {r['two_processes_ratio']:.2f}x  the same, two processes sharing the cap")


if __name__ == "__main__":
    main()
