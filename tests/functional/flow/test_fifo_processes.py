"""Ordered jobs across two `jf worker` processes and the emulator at once (issue 14's test): a failing
job holds back its own group only, and each group's jobs run one after another, in order, wherever
they run."""

from __future__ import annotations

import itertools
from pathlib import Path

from jobframework.client import JobClient
from jobframework.consumer import consumer
from jobframework.jobs import JobRegistry
from jobframework.local.emulator import Emulator, pollers_for
from jobframework.testing import provision_fresh, receive_all
from tests.functional.flow.processes import rounds_until_two_ran, two_workers
from tests.functional.flow.worker_fifo_def import Entry, define

LANE = "default-fifo"
GROUPS = ["A", "B", "C", "D", "E", "F"]
PER_GROUP = 4
ROUNDS = 8  # until both worker processes ran some: a FIFO receive may take every group at once


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
    pollers = pollers_for(config, topology, [LANE])
    assert [p.url.endswith(".fifo") for p in pollers] == [True]
    emulator = Emulator(pollers, consumer(registry, config=config, sqs_client=sqs), sqs, workers=3)
    client = JobClient(config, registry=registry, sqs_client=sqs)

    def send_round(n: int) -> None:  # group A's second job of each round fails its first two attempts
        first = n * PER_GROUP
        requests = [
            ordered.request(Entry(group=g, seq=k, fail_times=2 * ((g, k) == ("A", first + 1))))
            for k in range(first, first + PER_GROUP)
            for g in GROUPS
        ]
        assert all(r.ok for r in client.enqueue_many(requests))

    with two_workers(config, ledger, LANE, "tests.functional.flow.worker_fifo_jobs") as errors:
        emulator.start()
        try:
            rounds = rounds_until_two_ran(
                send_round,
                lambda: [r for r in _rows(ledger) if r[3]],
                lambda: {r[4] for r in _rows(ledger) if r[3]},
                per_round=PER_GROUP * len(GROUPS),
                rounds=ROUNDS,
                timeout=90,
            )
        finally:
            emulator.stop(5)
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
