"""Deduplicated enqueues at the request floor (issue 13, item 3): ``enqueue_many`` claims each key and
sends the claimed jobs ten to a ``SendMessageBatch``; a tracked job's status is its claim's
confirmation, so its marker costs no second write."""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any

import pytest

from jobframework.client import JobClient
from jobframework.errors import EnqueueError
from jobframework.state import JobState
from jobframework.testing import receive_all

from . import jobs_under_test
from .jobs_under_test import Work, lean, ok


def _count(client: Any, service: str) -> Counter[str]:
    made: Counter[str] = Counter()
    client.meta.events.register(
        f"before-call.{service}.*", lambda event_name, **_: made.update([event_name.rsplit(".", 1)[-1]])
    )
    return made


def test_enqueue_many_claims_each_key_and_sends_the_claimed_jobs_in_one_batch(rt):
    sent = _count(rt.sqs, "sqs")
    keys = [f"k{n}" for n in range(9)] + ["k0"]
    results = rt.client.enqueue_many([lean.request(Work(name=f"w{n}"), key=k) for n, k in enumerate(keys)])
    assert [r.duplicate for r in results] == [False] * 9 + [True]
    assert results[9].id == results[0].id  # the duplicate names the job that holds the key
    assert sent == Counter({"SendMessageBatch": 1})
    bodies = [json.loads(m["Body"]) for m in receive_all(rt.sqs, rt.url("high"))]
    assert sorted(b["key"] for b in bodies) == sorted(keys[:9])

    again = rt.client.enqueue_many([lean.request(Work(name="x"), key=k) for k in keys[:3]])
    assert [(r.duplicate, r.id) for r in again] == [(True, r.id) for r in results[:3]]
    assert sent["SendMessageBatch"] == 1  # nothing more sent


def test_a_batch_that_fails_releases_its_claims_so_that_a_retry_sends(rt, jf_aws):
    client = JobClient(rt.config, registry=jobs_under_test.registry, sqs_client=rt.sqs, batch_retries=0)

    def refuse(**_: Any) -> None:
        raise ConnectionResetError("connection reset by peer")

    rt.sqs.meta.events.register("before-call.sqs.SendMessageBatch", refuse)
    try:
        failed = client.enqueue_many([lean.request(Work(name="a"), key="retry-me")])
    finally:
        rt.sqs.meta.events.unregister("before-call.sqs.SendMessageBatch", refuse)
    assert failed[0].error and "connection reset" in failed[0].error
    (retried,) = client.enqueue_many([lean.request(Work(name="a"), key="retry-me")])
    assert retried.ok and not retried.duplicate and retried.id != failed[0].id


def test_a_tracked_keyed_enqueue_writes_the_marker_and_the_status_and_nothing_else(rt):
    state = rt.client.state
    assert state is not None
    writes = _count(state.client, "dynamodb")
    result = rt.client.enqueue(ok, Work(name="t"), key="tracked-key")
    assert writes == Counter({"PutItem": 1, "UpdateItem": 1})  # the claim, the status
    duplicate = rt.client.enqueue(ok, Work(name="t"), key="tracked-key")
    assert duplicate.duplicate and duplicate.id == result.id
    status = rt.client.status(result.id)
    assert status is not None and status.status == JobState.QUEUED


def test_a_tracked_claim_past_its_lease_is_a_duplicate_if_sent_and_taken_over_if_not(rt):
    state = rt.client.state
    assert state is not None
    # Sent: its status exists, so a later enqueue is its duplicate even after the claim's lease.
    assert state.dedup.claim("sent-key", "job-a", 3600, lease=0.2, tracked=True) is None
    state.jobs.set_status("job-a", JobState.QUEUED, job_type="t.ok", attempts=0)
    # Never sent (its producer died): no status, so the claim is taken over once the lease passes.
    assert state.dedup.claim("ghost-key", "ghost", 3600, lease=0.2, tracked=True) is None
    time.sleep(0.3)
    assert state.dedup.claim("sent-key", "job-b", 3600, tracked=True) == "job-a"
    assert state.dedup.claim("ghost-key", "job-c", 3600, tracked=True) is None
    with pytest.raises(EnqueueError, match="job-c with dedup key 'ghost-key' is still being sent"):
        state.dedup.claim("ghost-key", "job-d", 3600, tracked=True)  # job-c's claim is within its lease
