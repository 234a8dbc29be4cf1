"""Debounce: of the enqueues of one key within the window only the last payload runs, once, at its close."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from jobframework.errors import ConfigurationError
from jobframework.state import JobState
from jobframework.testing import receive_all
from jobframework.ui.records import find_jobs

from . import flow_jobs
from .flow_jobs import Item


def _consume_until_empty(flow, lane: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        records, _ = flow.consume(lane)
        if not records:
            time.sleep(0.2)


def test_only_the_last_payload_of_a_window_runs_once_when_it_closes(flow):
    ids = [flow.client.enqueue("f.ok", Item(name=f"v{n}"), key="user:1", debounce=2).id for n in range(4)]
    assert flow.consume("high")[0] == []  # delayed to the window's close
    _consume_until_empty(flow, "high", 4.5)
    assert flow_jobs.calls == {"v3": 1}
    assert flow.client.status(ids[3]).status is JobState.SUCCEEDED
    for job_id in ids[:3]:
        status = flow.client.status(job_id)
        assert status.status is JobState.CANCELLED and status.reason == f"debounced: superseded by {ids[3]}"
    assert receive_all(flow.sqs, flow.url("high")) == []


def test_the_next_window_runs_again(flow):
    flow.client.enqueue("f.ok", Item(name="first"), key="user:2", debounce=1)
    _consume_until_empty(flow, "high", 2.5)
    flow.client.enqueue("f.ok", Item(name="second"), key="user:2", debounce=1)
    _consume_until_empty(flow, "high", 2.5)
    assert flow_jobs.calls == {"first": 1, "second": 1}  # a window's idempotency key is its own
    found = find_jobs(flow.client.state, key="user:2")  # the console's key search finds both windows
    assert sorted(j.status for j in found.jobs) == [JobState.SUCCEEDED] * 2
    assert all((j.key or "").startswith("user:2#") for j in found.jobs)


def test_concurrent_enqueues_of_one_key_run_exactly_one(flow):
    with ThreadPoolExecutor(4) as pool:
        results = list(
            pool.map(
                lambda n: flow.client.enqueue("f.ok", Item(name=f"c{n}"), key="user:3", debounce=2),
                range(8),
            )
        )
    _consume_until_empty(flow, "high", 4.5)
    assert sum(flow_jobs.calls.values()) == 1
    winner = next(r.id for r in results if flow.client.status(r.id).status is JobState.SUCCEEDED)
    assert {flow.client.status(r.id).status for r in results if r.id != winner} == {JobState.CANCELLED}


def test_other_keys_are_not_debounced_together(flow):
    flow.client.enqueue("f.ok", Item(name="a"), key="k:a", debounce=1)
    flow.client.enqueue("f.ok", Item(name="b"), key="k:b", debounce=1)
    _consume_until_empty(flow, "high", 2.5)
    assert flow_jobs.calls == {"a": 1, "b": 1}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"debounce": 2}, "needs key="),
        ({"debounce": 2, "key": "k", "delay": 5}, "do not pass delay="),
        ({"debounce": 901, "key": "k"}, "at most 900 seconds"),
        ({"debounce": 0, "key": "k"}, "more than 0"),
        ({"debounce": 10, "key": "k", "expires_in": 5}, r"before its debounce window \(10 s\) closes"),
    ],
)
def test_bad_debounce_options_are_refused(flow, options, message):
    with pytest.raises(ConfigurationError, match=message):
        flow.client.enqueue("f.ok", Item(name="x"), **options)
