"""How a batch's records are spread over threads (:mod:`jobframework.concurrency`)."""

from __future__ import annotations

import threading

import pytest

from jobframework import concurrency
from jobframework.concurrency import lane_limit, run_all
from jobframework.errors import ConfigurationError


def test_results_come_back_in_the_order_of_the_items_whatever_thread_ran_them():
    gate = threading.Barrier(4, timeout=5)

    def work(n: int) -> int:
        if n < 4:
            gate.wait()  # the first four meet: four threads at once
        return n * n

    assert run_all(list(range(10)), work, 10, lane="t-order") == [n * n for n in range(10)]


def test_a_quick_lane_runs_its_next_batch_on_the_calling_thread_alone():
    caller = threading.get_ident()
    run_all([1, 2, 3], lambda n: n, 3, lane="t-quick")  # learns the lane is quick
    threads = set(run_all(list(range(10)), lambda _n: threading.get_ident(), 10, lane="t-quick"))
    assert threads == {caller}


def test_a_quick_lane_calls_helpers_in_once_a_record_runs_long():
    run_all([1, 2], lambda n: n, 2, lane="t-turns")
    meet = threading.Barrier(3, timeout=5)

    def work(n: int) -> int:
        if n == 0:
            threading.Event().wait(0.01)  # runs long: the rest of the batch gets helpers
        else:
            meet.wait()  # the other three meet: three threads at once
        return n

    assert run_all(list(range(4)), work, 4, lane="t-turns") == [0, 1, 2, 3]


def test_a_long_last_record_makes_the_lane_start_its_next_batch_with_helpers():
    run_all([1, 2], lambda n: n, 2, lane="t-last")  # quick

    def work(n: int) -> int:
        if n == 2:
            threading.Event().wait(0.01)  # the last record runs long: nothing left to help with
        return n

    assert run_all([0, 1, 2], work, 3, lane="t-last") == [0, 1, 2]
    meet = threading.Barrier(2, timeout=5)  # the next batch: two records meet, so two threads at once
    assert run_all([0, 1], lambda n: meet.wait() * 0 + n, 2, lane="t-last") == [0, 1]


def test_an_item_that_raises_on_a_helper_leaves_its_result_empty_and_the_rest_run():
    meet = threading.Barrier(2, timeout=5)
    caller = threading.get_ident()

    def work(n: int) -> int:
        if n < 2:
            meet.wait()
        if threading.get_ident() != caller and n < 2:
            raise RuntimeError("a bug on a helper")
        return n

    results = run_all(list(range(6)), work, 6, lane="t-raise")
    assert sorted(r for r in results if r is not None)[-4:] == [2, 3, 4, 5]
    assert results.count(None) == 1  # the one of the first two that ran on the helper


def test_lane_limits_and_a_bad_environment_value(monkeypatch):
    assert lane_limit("high", 10, None) == 10
    assert lane_limit("high-cpu", 10, None) == 1
    assert lane_limit("high-cpu", 10, {"high-cpu": 3}) == 3
    assert lane_limit("low", 4, 8) == 4  # never more than the batch
    monkeypatch.setattr(concurrency, "_env_limits", {})
    monkeypatch.setenv("JF_CONCURRENCY_DEFAULT_IO", "3")
    assert lane_limit("default-io", 10, None) == 3
    monkeypatch.setenv("JF_CONCURRENCY", "many")
    with pytest.raises(ConfigurationError, match="whole number"):
        lane_limit("low", 10, None)
    for bad in ("0", "-1"):  # (were taken: 0 and -1 ran one at a time, saying nothing)
        monkeypatch.setattr(concurrency, "_env_limits", {})
        monkeypatch.setenv("JF_CONCURRENCY", bad)
        with pytest.raises(ConfigurationError, match=rf"at least 1, got '{bad}'"):
            lane_limit("low", 10, None)


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (-1, r"concurrency= must be a whole number of records at least 1 \(1: one at a time\), got -1"),
        (0, r"at least 1 \(1: one at a time\), got 0"),
        ("x", r"takes a whole number of records \(every lane\) or a mapping of lane to number"),
        (2.5, "got 2.5"),
        ({"hihg": 4}, r"names no lane 'hihg' \(did you mean 'high'\?\)"),
        ({"urgent": 2}, "names no lane 'urgent': lanes are a priority"),
        ({"high": 0}, r"concurrency\['high'\] must be a whole number of records at least 1"),
    ],
)
def test_a_bad_concurrency_is_refused_when_the_consumer_is_made(given, message):
    """A trial's concurrency=-1, 0 and misspelt lanes were taken silently ('x' and 2.5 failed every
    invocation later with AttributeError)."""
    from jobframework.consumer import consumer
    from jobframework.jobs import JobRegistry

    with pytest.raises(ConfigurationError, match=message):
        consumer(JobRegistry(), concurrency=given)
    assert consumer(JobRegistry(), concurrency={"high-cpu-fifo": 2, "low": 1}) is not None


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        (
            {"JF_CONCURRENCY": "lots"},
            r"JF_CONCURRENCY must be a whole number of records at least 1, got 'lots'",
        ),
        ({"JF_CONCURRENCY_HIGH_CPU": "0"}, r"JF_CONCURRENCY_HIGH_CPU must be .* at least 1, got '0'"),
        (
            {"JF_CONCURRENCY_HIHG": "4"},
            r"JF_CONCURRENCY_HIHG names no lane \(did you mean JF_CONCURRENCY_HIGH\?\)",
        ),
    ],
)
def test_a_bad_concurrency_variable_is_refused_when_the_consumer_is_made(monkeypatch, variables, message):
    """A trial's JF_CONCURRENCY=lots started jf dev, then failed every batch whole; a misspelt lane
    variable was ignored."""
    from jobframework.consumer import consumer
    from jobframework.jobs import JobRegistry

    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigurationError, match=message):
        consumer(JobRegistry())


def test_good_concurrency_variables_and_look_alikes_make_a_consumer(monkeypatch):
    from jobframework.consumer import consumer
    from jobframework.jobs import JobRegistry

    monkeypatch.setenv("JF_CONCURRENCY", "4")
    monkeypatch.setenv("JF_CONCURRENCY_DEFAULT_IO_FIFO", "2")
    monkeypatch.setenv("JF_CONCURRENCYX", "whatever")  # (not ours: another variable that starts alike)
    assert consumer(JobRegistry()) is not None
