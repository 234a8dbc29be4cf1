"""Ordered jobs across two `jf worker` processes and the emulator at once (issue 14's test): a failing
job holds back its own group only, and each group's jobs run one after another, in order, wherever
they run."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from jobframework.client import JobClient
from jobframework.consumer import consumer
from jobframework.jobs import JobRegistry
from jobframework.local.emulator import Emulator, pollers_for
from jobframework.testing import provision_fresh, receive_all
from tests.functional.conftest_local import cli_env
from tests.functional.flow.worker_fifo_def import Entry, define

ROOT = Path(__file__).parents[3]
LANE = "default-fifo"
GROUPS = ["A", "B", "C", "D", "E", "F"]
PER_GROUP = 4
ROUNDS = 3


def _rows(ledger: Path) -> list[tuple[str, int, int, bool, str, float, float]]:
    rows = []
    for line in ledger.read_text().splitlines() if ledger.exists() else []:
        group, seq, attempt, ok, pid, started, ended = line.split()
        rows.append((group, int(seq), int(attempt), ok == "1", pid, float(started), float(ended)))
    return rows


def test_two_worker_processes_and_the_emulator_keep_each_groups_order(jf_aws, tmp_path, monkeypatch):
    ledger = tmp_path / "ledger.txt"
    monkeypatch.setenv("JF_TEST_LEDGER", str(ledger))
    registry = JobRegistry()
    ordered = define(registry)
    topology, config = provision_fresh(jf_aws.endpoint_url, registry)
    sqs = jf_aws.client("sqs")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("JF_", "AWS_"))},
        **cli_env(config),
        "JF_TEST_LEDGER": str(ledger),
        "POWERTOOLS_LOG_LEVEL": "ERROR",
        "POWERTOOLS_METRICS_DISABLED": "true",
    }
    command = [sys.executable, "-m", "jobframework.cli", "worker", "--queues", LANE]
    command += ["--jobs", "tests.functional.flow.worker_fifo_jobs", "--workers", "3", "--drain-timeout", "5"]
    workers = [
        subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    for w in workers:  # each polls once it has printed its first line
        assert w.stdout is not None and w.stdout.readline().startswith(b"jf worker: polling")
    pollers = pollers_for(config, topology, [LANE])
    assert [p.url.endswith(".fifo") for p in pollers] == [True]
    emulator = Emulator(pollers, consumer(registry, config=config, sqs_client=sqs), sqs, workers=3)
    client = JobClient(config, registry=registry, sqs_client=sqs)
    rounds = 0
    try:
        emulator.start()
        # Which consumer receives a group is up to SQS: rounds of jobs until more than one process has
        # run some. In each round group A's second job fails on its first two attempts.
        for _ in range(ROUNDS):
            first = rounds * PER_GROUP
            requests = [
                ordered.request(Entry(group=g, seq=n, fail_times=2 * ((g, n) == ("A", first + 1))))
                for n in range(first, first + PER_GROUP)
                for g in GROUPS
            ]
            assert all(r.ok for r in client.enqueue_many(requests))
            rounds += 1
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                done = [r for r in _rows(ledger) if r[3]]
                if len(done) >= rounds * PER_GROUP * len(GROUPS):
                    break
                time.sleep(0.2)
            if len({r[4] for r in done}) >= 2:
                break
    finally:
        emulator.stop(5)
        for w in workers:
            w.send_signal(signal.SIGTERM)
        errors = [w.communicate(timeout=30)[1].decode(errors="replace")[-2000:] for w in workers]
    rows = _rows(ledger)
    jobs = rounds * PER_GROUP
    assert len({r[4] for r in rows}) >= 2, errors  # more than one process ran them
    for group in GROUPS:
        runs = sorted((r for r in rows if r[0] == group), key=lambda r: r[5])
        # One job of a group at a time, wherever it ran, and each job once it had succeeded.
        assert all(a[6] <= b[5] for a, b in itertools.pairwise(runs)), (group, runs)
        assert [r[1] for r in runs if r[3]] == list(range(jobs)), (group, runs)
        if group != "A":
            assert all(r[2] == 1 and r[3] for r in runs), (group, runs)  # never held back by A
    a = sorted((r for r in rows if r[0] == "A"), key=lambda r: r[5])
    failing = {n * PER_GROUP + 1 for n in range(rounds)}
    assert [(r[1], r[2]) for r in a if not r[3]] == [(n, k) for n in sorted(failing) for k in (1, 2)]
    # A's later jobs waited for the failing one and used no attempt for the wait.
    assert all(r[2] == 1 for r in a if r[1] not in failing)
    first_retry = next(r for r in a if (r[1], r[2]) == (1, 2))
    others_first_round = [r for r in rows if r[0] != "A" and r[1] < PER_GROUP]
    assert max(r[6] for r in others_first_round) < first_retry[5]  # the others did not wait for A
    assert receive_all(sqs, config.endpoints(LANE).dlq_url) == []
