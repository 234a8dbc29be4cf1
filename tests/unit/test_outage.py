"""The outage simulation runs on the framework's own backoff, classification and retry budget."""

from __future__ import annotations

from typing import Any

import pytest

from bench import outage
from bench.outage import OutageParams, simulate
from jobframework import budget, classification, retry
from jobframework.retry import Jitter

SMALL = OutageParams(jobs=300, arrival_seconds=0, outage_start=10, outage_seconds=120, max_attempts=8, seed=3)
SPREAD = OutageParams(
    jobs=300, arrival_seconds=60, outage_start=10, outage_seconds=120, max_attempts=8, seed=3
)


def spy(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[Any]:
    calls: list[Any] = []
    real = getattr(module, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls.append((args, kwargs))
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)
    return calls


def test_delays_come_from_the_frameworks_backoff_and_classification(monkeypatch):
    backoff = spy(monkeypatch, retry, "compute_backoff")
    classified = spy(monkeypatch, classification, "classify")
    result = simulate(SMALL, Jitter.PROPORTIONAL, budget_on=False)
    assert classified and backoff
    retried = result.downstream_calls - SMALL.jobs
    assert len(backoff) == retried  # one delay per retry, none computed elsewhere
    assert {kwargs["jitter"] for _, kwargs in backoff} == {Jitter.PROPORTIONAL}


def test_a_changed_backoff_changes_the_simulation(monkeypatch):
    monkeypatch.setattr(retry, "compute_backoff", lambda attempt, **_: 1000.0)
    result = simulate(SMALL, Jitter.NONE, budget_on=False)
    # Every job fails once in the outage, then comes back 1000 s later, after it ended.
    assert result.downstream_calls == 2 * SMALL.jobs
    assert result.succeeded == SMALL.jobs


def test_the_budget_decisions_come_from_the_frameworks_budget(monkeypatch):
    allowed = spy(monkeypatch, budget, "retries_allowed")
    windows = spy(monkeypatch, budget.InMemoryBudgetCounter, "budget_window")
    simulate(SMALL, Jitter.FULL, budget_on=True)
    assert allowed and windows
    monkeypatch.setattr(budget, "retries_allowed", lambda *a, **k: 0)
    starved = simulate(SMALL, Jitter.FULL, budget_on=True)
    assert starved.dead_letters == {"budget": SMALL.jobs}
    assert starved.downstream_calls == SMALL.jobs


def test_exhausted_jobs_are_dead_lettered_by_the_policy():
    params = OutageParams(jobs=50, arrival_seconds=0, outage_start=0, outage_seconds=600, max_attempts=3)
    result = simulate(params, Jitter.NONE, budget_on=False)
    assert result.dead_letters == {"exhausted": 50}
    assert result.downstream_calls == 150


@pytest.mark.parametrize("jitter", list(Jitter))
def test_the_budget_sends_fewer_retries_into_the_outage(jitter):
    off = simulate(SPREAD, jitter, budget_on=False)
    on = simulate(SPREAD, jitter, budget_on=True)
    assert on.retries_during_outage < off.retries_during_outage / 2
    assert on.dead_letters.get("budget", 0) > 0
    assert on.succeeded + sum(on.dead_letters.values()) == SPREAD.jobs  # nothing lost


def test_without_jitter_the_herd_meets_the_recovering_downstream():
    none = simulate(SMALL, Jitter.NONE, budget_on=False)
    full = simulate(SMALL, Jitter.FULL, budget_on=False)
    proportional = simulate(SMALL, Jitter.PROPORTIONAL, budget_on=False)
    assert none.peak_rps_after_recovery == SMALL.jobs  # every job at once
    assert full.peak_rps_after_recovery < none.peak_rps_after_recovery / 4
    assert proportional.peak_rps_after_recovery < none.peak_rps_after_recovery / 2
    assert none.peak_retry_rps == SMALL.jobs


def test_jitter_spreads_the_first_retry_wave_only_when_the_base_delay_exceeds_a_second():
    # Visibility delays are whole seconds: with a 1 s base, every first retry rounds up to 1 s.
    assert simulate(SMALL, Jitter.FULL, budget_on=False).peak_retry_rps == SMALL.jobs
    slower = OutageParams(
        jobs=300, arrival_seconds=0, outage_start=10, outage_seconds=120, max_attempts=6, base_delay=5
    )
    none = simulate(slower, Jitter.NONE, budget_on=False)
    full = simulate(slower, Jitter.FULL, budget_on=False)
    assert none.peak_rps > full.peak_retry_rps * 2


def test_the_same_seed_gives_the_same_numbers():
    first = simulate(SPREAD, Jitter.FULL, budget_on=True).summary()
    assert simulate(SPREAD, Jitter.FULL, budget_on=True).summary() == first


def test_measure_reports_every_scenario_and_draws_the_chart(tmp_path):
    png = tmp_path / "outage.png"
    report = outage.measure(jobs=100, workloads={"burst": 0}, outage_seconds=60, png=png)
    (workload,) = report["workloads"]
    assert len(workload["scenarios"]) == 6
    assert png.read_bytes().startswith(b"\x89PNG")
    assert "| no jitter, budget off |" in outage.markdown_table(workload["scenarios"])


def test_a_consumer_capacity_caps_the_load_and_the_rest_waits_in_the_queue():
    capped = OutageParams(
        jobs=300, arrival_seconds=0, outage_start=10, outage_seconds=120, max_attempts=8, capacity=50
    )
    result = simulate(capped, Jitter.NONE, budget_on=False)
    assert result.peak_rps == 50
    assert result.succeeded == capped.jobs
