"""The concurrency cap across two `jf worker` processes and the emulator at once (issue 14's test)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from jobframework.client import JobClient
from jobframework.consumer import consumer
from jobframework.jobs import registry
from jobframework.local.emulator import Emulator, pollers_for
from jobframework.testing import provision_fresh
from jobframework.topology import Topology, TopologySettings
from tests.functional.conftest_local import cli_env
from tests.functional.flow import worker_jobs

ROOT = Path(__file__).parents[3]
JOBS = 12
ROUNDS = 3


def _peak(intervals: list[tuple[float, float]]) -> int:
    edges = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    now = peak = 0
    for _, step in edges:
        now += step
        peak = max(peak, now)
    return peak


def test_two_worker_processes_and_the_emulator_never_pass_the_cap(jf_aws, tmp_path, monkeypatch):
    ledger = tmp_path / "ledger.txt"
    monkeypatch.setenv("JF_TEST_LEDGER", str(ledger))
    topology, config = provision_fresh(jf_aws.endpoint_url, registry)
    sqs = jf_aws.client("sqs")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("JF_", "AWS_"))},
        **cli_env(config),
        "JF_TEST_LEDGER": str(ledger),
        "POWERTOOLS_LOG_LEVEL": "ERROR",
        "POWERTOOLS_METRICS_DISABLED": "true",
    }
    command = [sys.executable, "-m", "jobframework.cli", "worker", "--queues", "default"]
    command += ["--jobs", "tests.functional.flow.worker_jobs", "--workers", "3", "--drain-timeout", "5"]
    workers = [
        subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    for w in workers:  # each polls once it has printed its first line
        assert w.stdout is not None and w.stdout.readline().startswith(b"jf worker: polling")
    local = Topology.from_registry(registry, TopologySettings(stage=topology.stage))
    emulator = Emulator(
        pollers_for(config, local, ["default"]),
        consumer(registry, config=config, sqs_client=sqs),
        sqs,
        workers=3,
    )
    rounds = 0
    try:
        client = JobClient(config, sqs_client=sqs)
        emulator.start()
        # Which poller receives a message is up to SQS: rounds of jobs until more than one process has
        # run some (one round nearly always; a process can take a whole round now and then).
        for _ in range(ROUNDS):
            sent = rounds * JOBS
            for n in range(sent, sent + JOBS):
                client.enqueue(worker_jobs.capped_step, worker_jobs.Step(n=n))
            rounds += 1
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                done = ledger.read_text().splitlines() if ledger.exists() else []
                if len(done) >= rounds * JOBS:
                    break
                time.sleep(0.2)
            if len({line.split()[1] for line in done}) >= 2:
                break
    finally:
        emulator.stop(5)
        for w in workers:
            w.send_signal(signal.SIGTERM)
        errors = [w.communicate(timeout=30)[1].decode(errors="replace") for w in workers]
    rows = [line.split() for line in ledger.read_text().splitlines()]
    assert sorted(int(r[0]) for r in rows) == list(range(rounds * JOBS)), errors
    assert len({r[1] for r in rows}) >= 2  # more than one process ran them
    assert _peak([(float(r[2]), float(r[3])) for r in rows]) == worker_jobs.CAP
