"""The concurrency cap across two `jf worker` processes and the emulator at once (issue 14's test)."""

from __future__ import annotations

from jobframework.client import JobClient
from jobframework.consumer import consumer
from jobframework.jobs import registry
from jobframework.local.emulator import Emulator, pollers_for
from jobframework.testing import provision_fresh
from jobframework.topology import Topology, TopologySettings
from tests.functional.flow import worker_jobs
from tests.functional.flow.processes import rounds_until_two_ran, two_workers

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
    # Shorter than a run (0.4 s): a record over the cap waits for a lease of its own process a moment,
    # then goes round the queue, so the processes take turns (by default the one holding the leases
    # hands them to its own waiters, and the others may run none).
    monkeypatch.setenv("JF_LIMIT_WAIT", "0.3")
    topology, config = provision_fresh(jf_aws.endpoint_url, registry)
    sqs = jf_aws.client("sqs")
    local = Topology.from_registry(registry, TopologySettings(stage=topology.stage))
    emulator = Emulator(
        pollers_for(config, local, ["default"]),
        consumer(registry, config=config, sqs_client=sqs),
        sqs,
        workers=3,
    )
    client = JobClient(config, sqs_client=sqs)

    def send_round(n: int) -> None:
        for k in range(n * JOBS, (n + 1) * JOBS):
            client.enqueue(worker_jobs.capped_step, worker_jobs.Step(n=k))

    def done() -> list[str]:
        return ledger.read_text().splitlines() if ledger.exists() else []

    with two_workers(config, ledger, "default", "tests.functional.flow.worker_jobs") as errors:
        emulator.start()
        try:
            rounds = rounds_until_two_ran(
                send_round,
                done,
                lambda: {line.split()[1] for line in done()},
                per_round=JOBS,
                rounds=ROUNDS,
                timeout=120,
            )
        finally:
            emulator.stop(5)
    rows = [line.split() for line in ledger.read_text().splitlines()]
    assert sorted(int(r[0]) for r in rows) == list(range(rounds * JOBS)), errors
    assert len({r[1] for r in rows}) >= 2  # more than one process ran them
    assert _peak([(float(r[2]), float(r[3])) for r in rows]) == worker_jobs.CAP
