"""A tracked job's outcome is readable soon after it ends, however long its batch runs (a slow
neighbour, a lane that runs its records one at a time); a quick batch still writes its statuses once."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import pytest

from jobframework.consumer import consumer
from jobframework.state import JobState
from jobframework.testing import consume_once

from . import jobs_under_test
from .jobs_under_test import Work, calls, second_waits


def _status_writes(handler: Any) -> Counter[str]:
    """The consumer's status write requests (``BatchWriteItem``/``PutItem``) from now on."""
    handler._features()
    made: Counter[str] = Counter()

    def note(event_name: str, **_: Any) -> None:
        operation = event_name.rsplit(".", 1)[-1]
        if operation in ("BatchWriteItem", "PutItem"):
            made[operation] += 1

    handler.state.client.meta.events.register("before-call.dynamodb.*", note)
    return made


@pytest.mark.parametrize("concurrency", [None, 1], ids=["together", "one-at-a-time"])
def test_a_job_that_ended_reads_succeeded_while_its_batch_still_runs(rt, concurrency):
    jobs_under_test.released.clear()
    handler = consumer(jobs_under_test.registry, config=rt.config, sqs_client=rt.sqs, concurrency=concurrency)
    sent = {name: rt.client.enqueue(second_waits, Work(name=name)).id for name in ("a", "b")}
    runs = threading.Thread(target=lambda: consume_once(handler, rt.sqs, rt.url("high")), daemon=True)
    runs.start()
    try:
        deadline = time.monotonic() + 15
        ended: str | None = None
        while ended is None and time.monotonic() < deadline:
            states = {name: rt.client.status(job_id) for name, job_id in sent.items()}
            ended = next((n for n, s in states.items() if s and s.status == JobState.SUCCEEDED), None)
            time.sleep(0.2)
        assert ended is not None, f"no job read succeeded while its neighbour ran: {states}"
        waiting = "b" if ended == "a" else "a"
        assert runs.is_alive() and calls[waiting] == 1  # the neighbour still runs: its batch has not ended
        status = rt.client.status(sent[ended])
        assert status is not None and status.attempts == 1 and status.finished_at
    finally:
        jobs_under_test.released.set()
        runs.join(30)
    assert not runs.is_alive()
    for job_id in sent.values():  # and the batch's end wrote the other's
        assert (s := rt.client.status(job_id)) is not None and s.status == JobState.SUCCEEDED


def test_a_quick_batch_writes_its_statuses_in_one_request(rt, monkeypatch):
    from jobframework import early_status

    # "Quick" is under the threshold, which a loaded machine's three runs passed (a flaky second write)
    monkeypatch.setattr(early_status, "EARLY_SECONDS", 30.0)
    jobs_under_test.released.set()  # (no run waits)
    writes = _status_writes(rt.handler)
    ids = [rt.client.enqueue(second_waits, Work(name=f"quick-{n}")).id for n in range(3)]
    rt.consume("high")
    assert writes == Counter({"BatchWriteItem": 1}), writes
    assert all((s := rt.client.status(i)) is not None and s.status == JobState.SUCCEEDED for i in ids)


def test_a_batched_jobs_items_read_succeeded_while_the_rest_of_their_batch_runs(rt):
    """A batched job's items end before the batch's other records run: they were written only when
    the whole batch ended (a slow neighbour kept them queued)."""
    from jobframework.client import JobClient
    from jobframework.jobs import BatchOptions, JobRegistry, job

    registry, release = JobRegistry(), threading.Event()

    @job("e.many", registry=registry, track=True, priority="high", batch=BatchOptions(max_size=10))
    def many(works: list[Work]) -> list[None]:
        return [None for _ in works]

    @job("e.slow", registry=registry, track=True, priority="high", idempotent=False)
    def slow(work: Work) -> None:
        assert release.wait(30), "the test never released the slow run"

    client = JobClient(rt.config, registry=registry, sqs_client=rt.sqs)
    handler = consumer(registry, config=rt.config, sqs_client=rt.sqs)
    items = [client.enqueue(many, Work(name=f"item-{n}")).id for n in range(2)]
    slow_id = client.enqueue(slow, Work(name="slow")).id
    runs = threading.Thread(target=lambda: consume_once(handler, rt.sqs, rt.url("high")), daemon=True)
    runs.start()
    try:
        deadline = time.monotonic() + 15
        states: dict[str, Any] = {}
        while time.monotonic() < deadline:
            states = {i: rt.client.status(i) for i in items}
            if all(s is not None and s.status == JobState.SUCCEEDED for s in states.values()):
                break
            time.sleep(0.2)
        assert all(s is not None and s.status == JobState.SUCCEEDED for s in states.values()), states
        assert runs.is_alive()  # the slow neighbour still runs: its batch has not ended
    finally:
        release.set()
        runs.join(30)
    assert (s := rt.client.status(slow_id)) is not None and s.status == JobState.SUCCEEDED
