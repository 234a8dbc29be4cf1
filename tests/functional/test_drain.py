"""drain(): a test runs a queue dry with the real consumer, a retry's backoff skipped, not waited for."""

from __future__ import annotations

import json
import time

import pytest

from jobframework.testing import drain, receive_all

from .jobs_under_test import calls


def test_a_job_that_fails_twice_runs_three_times_without_waiting_its_backoff(rt):
    """t.flaky backs off 2 s, then 4 s: a trial's test of its retries slept through them."""
    sent = rt.client.enqueue("t.flaky", {"name": "f2", "fail_times": 2})
    started = time.monotonic()
    handled = drain(rt.handler, rt.sqs, rt.url("default"))
    assert time.monotonic() - started < 6  # (the backoffs, 2 s and 4 s, were not waited out)
    assert [json.loads(r["body"])["id"] for r in handled] == [sent.id] * 3
    assert [r["attributes"]["ApproximateReceiveCount"] for r in handled] == ["1", "2", "3"]
    assert calls["f2"] == 3
    assert rt.client.status(sent.id).status == "succeeded"
    assert receive_all(rt.sqs, rt.url("default")) == []


def test_a_job_that_always_fails_is_dead_lettered_after_its_last_attempt(rt):
    sent = rt.client.enqueue("t.flaky", {"name": "f9", "fail_times": 9})  # (max_attempts=4)
    handled = drain(rt.handler, rt.sqs, rt.url("default"))
    assert len(handled) == 4 and calls["f9"] == 4
    [letter] = receive_all(rt.sqs, rt.dlq("default"))
    assert json.loads(letter["Body"])["id"] == sent.id
    assert letter["MessageAttributes"]["jf-reason"]["StringValue"] == "exhausted"


def test_without_fast_forward_it_waits_for_the_retry(rt):
    rt.client.enqueue("t.flaky", {"name": "w1", "fail_times": 1, "delay": 1})  # (retried in 1 s)
    started = time.monotonic()
    # (max_polls counts the polls that handle records: the waits between them are not polls)
    handled = drain(rt.handler, rt.sqs, rt.url("default"), fast_forward=False, timeout=20, max_polls=2)
    assert len(handled) == 2 and calls["w1"] == 2
    assert time.monotonic() - started >= 0.9  # (it waited: the retry was not made visible early)


def test_a_retry_longer_than_the_timeout_says_what_to_do(rt):
    rt.client.enqueue("t.flaky", {"name": "w2", "fail_times": 1})  # (2 s backoff)
    with pytest.raises(TimeoutError, match=r"still in flight or delayed after 0.5 s .*fast_forward=True"):
        drain(rt.handler, rt.sqs, rt.url("default"), fast_forward=False, timeout=0.5)


def test_a_queue_never_dry_stops_after_max_polls(rt):
    rt.client.enqueue("t.flaky", {"name": "m1", "fail_times": 3})
    with pytest.raises(RuntimeError, match=r"not dry after 2 polls \(2 records handled\)"):
        drain(rt.handler, rt.sqs, rt.url("default"), max_polls=2)
