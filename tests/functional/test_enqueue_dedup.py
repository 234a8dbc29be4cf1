"""A keyed enqueue deduplicates by default: check-and-set on the state table, one message per key."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from jobframework.client import DEFAULT_DEDUP_WINDOW, JobClient
from jobframework.errors import ConfigurationError
from jobframework.idempotency import DEFAULT_EXPIRY_SECONDS
from jobframework.jobs import JobRegistry, job
from jobframework.testing import receive_all

from .jobs_under_test import Work


def bodies(rt: Any, lane: str) -> list[dict[str, Any]]:
    return [json.loads(m["Body"]) for m in receive_all(rt.sqs, rt.url(lane))]


def test_twenty_concurrent_enqueues_with_one_key_return_one_id_and_send_one_message(rt, jf_aws):
    producers = [
        JobClient(
            rt.config,
            registry=rt.client.registry,
            sqs_client=jf_aws.client("sqs"),
            clients={"dynamodb": jf_aws.client("dynamodb")},
        )
        for _ in range(20)
    ]
    start = threading.Barrier(len(producers))

    def enqueue(client: JobClient) -> Any:
        start.wait()
        return client.enqueue("t.ok", {"name": "invoice-123"}, key="invoice:123:pdf")

    with ThreadPoolExecutor(len(producers)) as pool:
        results = list(pool.map(enqueue, producers))
    assert len({r.id for r in results}) == 1
    assert sorted(r.duplicate for r in results) == [False] + [True] * 19
    sent = bodies(rt, "high")
    assert [(b["id"], b["key"]) for b in sent] == [(results[0].id, "invoice:123:pdf")]


def test_the_default_window_is_the_idempotency_records_lifetime():
    assert DEFAULT_DEDUP_WINDOW == DEFAULT_EXPIRY_SECONDS == 24 * 3600


def test_a_duplicate_returns_the_first_id_and_the_window_can_be_turned_off(rt):
    first = rt.client.enqueue("t.ok", {"name": "a"}, key="k-1")
    again = rt.client.enqueue("t.ok", {"name": "a"}, key="k-1")
    assert again.duplicate and again.id == first.id and again.message_id is None
    forced = rt.client.enqueue("t.ok", {"name": "a"}, key="k-1", dedup_window=0)
    assert not forced.duplicate and forced.id != first.id
    assert sorted(b["id"] for b in bodies(rt, "high")) == sorted([first.id, forced.id])


def test_a_job_can_turn_the_default_dedup_off_and_unkeyed_enqueues_never_dedup(rt):
    reg = JobRegistry()

    @job("t.every", registry=reg, priority="high", dedup_window=0)
    def every(work: Work) -> None:
        pass

    client = JobClient(rt.config, registry=reg, sqs_client=rt.sqs)
    ids = {client.enqueue(every, {"name": "x"}, key="same").id for _ in range(2)}
    ids |= {rt.client.enqueue("t.ok", {"name": "y"}).id for _ in range(2)}
    assert len(ids) == 4
    assert len(bodies(rt, "high")) == 4


def test_without_a_state_table_a_keyed_enqueue_is_sent_and_an_asked_for_window_is_refused(rt, caplog):
    client = JobClient(
        rt.config.model_copy(update={"state_table": None}), sqs_client=rt.sqs, registry=rt.client.registry
    )
    with caplog.at_level("WARNING", logger="jobframework.client"):
        client.enqueue("t.ok", {"name": "a"}, key="k-2")
        client.enqueue("t.ok", {"name": "a"}, key="k-2")
    assert len(bodies(rt, "high")) == 2
    assert caplog.text.count("not deduplicated") == 1  # said once, with what is still true
    with pytest.raises(ConfigurationError, match="JF_STATE_TABLE"):
        client.enqueue("t.ok", {"name": "a"}, key="k-2", dedup_window=60)
    with pytest.raises(ConfigurationError, match=r"0 \(off\) to 7 days"):
        rt.client.enqueue("t.ok", {"name": "a"}, key="k-2", dedup_window=-1)


def test_a_key_other_than_the_one_the_jobs_key_function_gives_is_refused_and_nothing_is_sent(rt):
    """A trial enqueued charge(o-8) once with key="o-8" and once without (its key= function gives
    "charge:o-8"): two keys for one payload, and the order was charged twice, with nothing said."""
    from jobframework.errors import EnqueueOptionError
    from jobframework.recorder import EnqueueRecorder
    from jobframework.scheduling import schedule_key

    reg = JobRegistry()

    @job("t.charge", registry=reg, priority="high", key=lambda w: f"charge:{w.name}")
    def charge(work: Work) -> None:
        pass

    client = JobClient(rt.config, registry=reg, sqs_client=rt.sqs)
    with pytest.raises(EnqueueOptionError, match=r"key='o-8' is not the key t.charge's key= function gives"):
        charge.enqueue({"name": "o-8"}, client=client, key="o-8")
    with pytest.raises(EnqueueOptionError, match="one payload under two keys runs twice"):
        EnqueueRecorder().enqueue(charge, {"name": "o-8"}, key="o-8")  # a test's stand-in refuses it too
    recorder = EnqueueRecorder()  # keys that are not the idempotency key by design stay allowed:
    recorder.enqueue(charge, {"name": "o-8"}, key="charges", debounce=2)  # a debounce's (it groups)
    recorder.enqueue(charge, {"name": "o-8"}, key=schedule_key("t.charge", "2026-12-06T05:00"))  # a slot's
    assert len(recorder.requests) == 2
    charge.enqueue({"name": "o-8"}, client=client, key="charge:o-8")  # its own key: taken
    charge.enqueue({"name": "o-8"}, client=client)
    assert [b["key"] for b in bodies(rt, "high")] == ["charge:o-8"] * 2  # one key: it runs once
