"""The client against the embedded AWS: validation, routing, size and delay limits, batches."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import pytest
from pydantic import BaseModel

from jobframework.client import EnqueueRequest, set_default_client
from jobframework.errors import (
    ConfigurationError,
    EnqueueManyError,
    EnqueueOptionError,
    PayloadTooLargeError,
    PayloadValidationError,
    UnknownJobError,
)
from jobframework.jobs import BatchOptions, JobRegistry, job
from jobframework.testing import receive_all

from .jobs_under_test import Work, ok


def bodies(rt, priority):
    return [json.loads(m["Body"]) for m in receive_all(rt.sqs, rt.url(priority))]


def test_enqueue_sends_the_envelope_to_the_jobs_priority_queue(rt):
    result = rt.client.enqueue("t.ok", {"name": "a"}, key="order:1")
    (env,) = bodies(rt, "high")
    assert env["id"] == result.id and env["type"] == "t.ok" and env["key"] == "order:1"
    assert env["payload"] == {"name": "a", "fail_times": 0, "delay": None}
    assert env["v"] == 1 and env["payload_version"] == 1 and env["enqueued_at"].endswith("Z")
    assert result.ok and result.priority == "high" and result.message_id


def test_priority_can_be_overridden_per_enqueue(rt):
    rt.client.enqueue(ok, Work(name="urgent"), priority="critical")
    assert [b["payload"]["name"] for b in bodies(rt, "critical")] == ["urgent"]
    assert bodies(rt, "high") == []


class Receipt(BaseModel):
    email: str


def test_a_bad_payload_is_a_clear_value_error_and_nothing_is_sent(rt):
    with pytest.raises(
        PayloadValidationError, match=r"t\.ok does not match Work: name: Field required"
    ) as info:
        rt.client.enqueue("t.ok", {"nam": "typo"})
    assert isinstance(info.value, ValueError)
    with pytest.raises(
        PayloadValidationError, match=r"t\.ok is a Receipt; it takes Work: name: Field required"
    ):
        rt.client.enqueue("t.ok", Receipt(email="a@example.com"))  # another job's model
    with pytest.raises(
        PayloadValidationError,
        match=r"t\.ok is a Work whose values do not validate \(made with model_construct",
    ):  # an instance made unvalidated: the consumer would dead-letter it; a raw ValidationError before
        rt.client.enqueue("t.ok", Work.model_construct(name="x", fail_times="twice"))
    with pytest.raises(
        PayloadValidationError, match=r"^entry 2 of 2 \(index 1\): payload for t\.ok .*fail_times"
    ) as refused:
        rt.client.enqueue_many(
            [
                EnqueueRequest("t.ok", {"name": "fine"}),
                EnqueueRequest("t.ok", {"name": "x", "fail_times": -2}),
            ]
        )
    assert [f["field"] for f in refused.value.fields] == ["fail_times"]  # (kept with the entry's number)
    assert bodies(rt, "high") == []  # not even the valid one of the batch
    with pytest.raises(
        EnqueueOptionError,
        match=r"enqueue_many of job t\.ok takes payloads, and entry 0 is an EnqueueRequest \(job\.request"
        r"\(\.\.\.\)\): send requests with client\.enqueue_many",
    ):  # (a trial's said "payload: Input should be a valid dictionary or instance of Work")
        ok.enqueue_many([ok.request({"name": "x"})], client=rt.client)  # type: ignore[list-item]
    assert bodies(rt, "high") == []


class Upload(BaseModel):
    name: str
    data: bytes = b""
    extra: Any = None
    size: float = 0.0
    rows: list[list[float]] = []


@job("t.upload", registry=JobRegistry())  # (a registry of its own: rt's stays as it is)
def upload(u: Upload) -> None:
    """Takes what JSON cannot carry."""


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"data": b"\xff\xfe"}, r"bytes that are not UTF-8 text .*send binary data as base64"),
        ({"extra": object()}, r"cannot be sent as JSON: Unable to serialize unknown type"),
        (
            {"size": float("nan")},
            r"t\.upload: size is nan, which JSON cannot carry \(it would arrive as null\)",
        ),
        ({"rows": [[1.0], [2.0, float("-inf")]]}, r"rows\[1\]\[1\] is -inf"),
    ],
)
def test_a_payload_json_cannot_carry_is_a_payload_validation_error_and_nothing_is_sent(rt, fields, message):
    # (the 202 handler of the README catches ValueError: these were UnicodeDecodeError, pydantic's
    # serialization error, and for NaN a job dead-lettered invalid-payload when its null arrived)
    for payload in (Upload(name="a", **fields), {"name": "a", **fields}):
        with pytest.raises(PayloadValidationError, match=message):
            rt.client.enqueue(upload, payload)
    assert rt.client.enqueue(upload, Upload(name="fine", data=b"text", size=1.5)).ok
    assert [b["payload"]["name"] for b in bodies(rt, "default")] == ["fine"]


def test_a_list_for_a_batched_job_says_its_items_are_enqueued_one_at_a_time(rt):
    batched = JobRegistry()

    @job("t.emails", registry=batched, batch=BatchOptions(max_size=10))
    def emails(items: list[Work]) -> None:
        """Sends them in one call."""

    for payload in ([{"name": "a"}], [Work(name="a")]):
        with pytest.raises(
            PayloadValidationError, match=r"t\.emails is a batched job: enqueue one Work at a"
        ):
            rt.client.enqueue(emails, payload)
    assert bodies(rt, "default") == []
    one_by_one = rt.client.enqueue_many([emails.request({"name": n}) for n in "ab"])
    assert [r.ok for r in one_by_one] == [True, True]


def test_an_unknown_job_names_the_known_ones(rt):
    with pytest.raises(
        UnknownJobError, match=r"no job named 't\.nope' is registered in this process \(known: t\.broken"
    ):
        rt.client.enqueue("t.nope", {})
    with pytest.raises(UnknownJobError, match=r"no job named 't\.flakey' \(did you mean 't\.flaky'\?\) is"):
        rt.client.enqueue("t.flakey", {})


def test_enqueueing_a_saga_by_name_says_it_is_a_saga_and_how_to_start_it(rt):
    from jobframework.saga import saga

    own = JobRegistry()  # (a saga of the team's: jf finds it after importing their modules)

    @job("t.reserve", registry=own)
    def reserve(work: Work) -> None:
        pass

    saga("t.checkout", steps=[reserve], registry=own)
    with pytest.raises(UnknownJobError, match=r"'t\.checkout' is a saga, not a job: start it with the start"):
        rt.client.enqueue("t.checkout", {"name": "x"})


def test_a_message_over_the_sqs_limit_is_refused_and_nothing_is_sent(rt):
    rt.client.config = rt.config.model_copy(update={"payload_bucket": None})  # nowhere to offload it
    with pytest.raises(PayloadTooLargeError, match=r"over the SQS limit of 1,048,576.*JF_PAYLOAD_BUCKET"):
        rt.client.enqueue("t.ok", {"name": "x" * 1_100_000})
    assert bodies(rt, "high") == []


@pytest.mark.parametrize(
    ("delay", "message"),
    [
        (-1, ">= 0"),
        (366 * 24 * 3600, r"delay 31,622,400s is over the one-year limit \(31,536,000s\)"),
        (10**9, r"delay 1,000,000,000s"),  # not 1e+09s
        ("soon", "seconds"),
        (901, "JF_SCHEDULER_ROLE_ARN"),
    ],
)
def test_bad_delays_are_refused_with_what_to_do(rt, delay, message):
    rt.client.config = rt.config.model_copy(update={"scheduler_role_arn": None})
    with pytest.raises(ConfigurationError, match=message):
        rt.client.enqueue("t.ok", {"name": "d"}, delay=delay)


def test_a_delay_keeps_the_job_invisible_until_it_passes(rt):
    started = time.monotonic()  # before the send: the enqueue's own writes may take a while under load
    rt.client.enqueue("t.ok", {"name": "later"}, delay=2)
    assert bodies(rt, "high") == []
    while not bodies(rt, "high"):
        time.sleep(0.2)
        assert time.monotonic() - started < 15, "the delayed job never became visible"
    assert time.monotonic() - started >= 1.5


def test_the_jobs_key_function_gives_the_key(rt, jf_aws):
    from jobframework import job
    from jobframework.jobs import JobRegistry

    reg = JobRegistry()

    @job("t.keyed", registry=reg, priority="high", key=lambda w: f"work:{w.name}")
    def keyed(work: Work) -> None:
        pass

    from jobframework.client import JobClient

    result = JobClient(rt.config, registry=reg, sqs_client=rt.sqs).enqueue(keyed, {"name": "n1"})
    assert result.key == "work:n1"
    assert bodies(rt, "high")[0]["key"] == "work:n1"


def test_job_enqueue_uses_the_default_client(rt):
    set_default_client(rt.client)
    try:
        result = ok.enqueue({"name": "sugar"})
        results = ok.enqueue_many([{"name": "m1"}, {"name": "m2"}])
        results += ok.enqueue_many({"name": n} for n in ("g1", "g2"))  # a generator (a trial's sent none)
    finally:
        set_default_client(None)
    sent = {b["id"] for b in bodies(rt, "high")}
    assert len(results) == 4 and sent == {result.id, *(r.id for r in results)}


def test_enqueue_many_refuses_an_entry_that_is_no_request_saying_what_it_takes(rt):
    with pytest.raises(ConfigurationError, match=r"enqueue_many takes EnqueueRequest entries: job.request"):
        rt.client.enqueue_many([ok.request(Work(name="a")), ("t.ok", Work(name="b"))])  # type: ignore[list-item]
    assert receive_all(rt.sqs, rt.url("high")) == []  # nothing sent


def test_enqueue_many_sends_25_jobs_in_batches_and_retries_an_entry_the_batch_failed(rt):
    calls = []
    dropped = {}

    def drop_one_entry(params, **_):
        calls.append(len(params["Entries"]))
        if len(calls) == 2:  # second batch: SQS "fails" its third entry
            entry = params["Entries"].pop(2)
            dropped["id"] = entry["Id"]

    def report_it_failed(parsed, **_):
        if dropped and len(calls) == 2:
            parsed.setdefault("Failed", []).append(
                {"Id": dropped["id"], "SenderFault": False, "Code": "InternalError", "Message": "try again"}
            )

    events = rt.sqs.meta.events
    events.register("before-parameter-build.sqs.SendMessageBatch", drop_one_entry)
    events.register("after-call.sqs.SendMessageBatch", report_it_failed)
    try:
        results = rt.client.enqueue_many([ok.request({"name": f"n{i}"}) for i in range(25)])
    finally:
        events.unregister("before-parameter-build.sqs.SendMessageBatch", drop_one_entry)
        events.unregister("after-call.sqs.SendMessageBatch", report_it_failed)
    assert calls[:3] == [10, 10, 5] and calls[3] == 1  # the failed entry was resent on its own
    assert len(results) == 25 and all(r.ok for r in results)
    sent = {b["id"]: b["payload"]["name"] for b in bodies(rt, "high")}
    assert len(sent) == 25  # each exactly once
    assert [sent[r.id] for r in results] == [f"n{i}" for i in range(25)]  # a result per job, in order


def _blame_the_first(parsed: dict[str, Any], **_: Any) -> None:
    """SQS reports a batch's first entry failed, the sender's fault (not resent)."""
    if parsed.get("Successful"):
        first = parsed["Successful"][0]["Id"]
        parsed["Failed"] = [
            {"Id": first, "SenderFault": True, "Code": "InvalidMessageContents", "Message": "bad"}
        ]
        parsed["Successful"] = parsed["Successful"][1:]


def test_an_entry_sqs_blames_on_the_sender_is_reported_not_retried(rt):
    blame = _blame_the_first
    rt.sqs.meta.events.register("after-call.sqs.SendMessageBatch", blame)
    try:
        results = rt.client.enqueue_many([ok.request({"name": "a"}), ok.request({"name": "b"})])
    finally:
        rt.sqs.meta.events.unregister("after-call.sqs.SendMessageBatch", blame)
    assert [r.ok for r in results] == [False, True]
    assert results[0].error == "InvalidMessageContents: bad"


def test_entries_enqueue_many_did_not_send_are_logged_or_raised_when_asked(rt, caplog):
    """A backfill of 5,000 recorded 30 ids of jobs never sent: enqueue_many returned normally, each
    failed entry's .ok False, and nothing said so."""
    refuse_the_first = _blame_the_first
    rt.sqs.meta.events.register("after-call.sqs.SendMessageBatch", refuse_the_first)
    try:
        with caplog.at_level(logging.WARNING, logger="jobframework.client"):
            logged = ok.enqueue_many([{"name": "a"}, {"name": "b"}], client=rt.client)
        with pytest.raises(EnqueueManyError, match=r"^enqueue_many: 1 of 2 entries were not sent") as raised:
            rt.client.enqueue_many(
                [ok.request({"name": "c"}), ok.request({"name": "d"})], raise_on_error=True
            )
    finally:
        rt.sqs.meta.events.unregister("after-call.sqs.SendMessageBatch", refuse_the_first)
    assert [r.ok for r in logged] == [False, True]
    [line] = [r for r in caplog.records if "were not sent" in r.getMessage()]
    assert line.levelno == logging.WARNING and "entry 0, job " in line.getMessage()
    assert "InvalidMessageContents: bad" in line.getMessage()
    assert [r.ok for r in raised.value.results] == [False, True]  # (the rest were sent)


def test_an_enqueue_option_from_celery_or_a_typo_says_what_to_write(rt):
    """A trial's charge.enqueue(order, countdown=30) was a bare TypeError naming JobClient.enqueue(); an
    EnqueueOptionError, which a 202 handler answers 400 (it was a ConfigurationError only)."""
    with pytest.raises(EnqueueOptionError, match=r"^enqueue takes no option countdown=: write delay="):
        ok.enqueue(Work(name="x"), client=rt.client, countdown=30)
    with pytest.raises(TypeError, match=r"^enqueue takes no option priorty=: did you mean priority=\?"):
        rt.client.enqueue("t.ok", {"name": "x"}, priorty="high")  # type: ignore[call-arg]
    with pytest.raises(ConfigurationError, match=r"queue=: write priority="):
        rt.client.enqueue("t.ok", {"name": "x"}, queue="high")  # type: ignore[call-arg]
    # A BullMQ trial's job_id= was told "did you mean job=?", which then failed as a second job.
    for own_id in ("job_id", "jobId"):
        with pytest.raises(EnqueueOptionError, match=rf"^enqueue takes no option {own_id}=: write key="):
            ok.enqueue(Work(name="x"), client=rt.client, **{own_id: "order-1"})
    assert bodies(rt, "high") == []


def test_wait_blocks_until_a_tracked_job_ends_and_returns_its_status(rt):
    """A team's Celery code called AsyncResult.get(timeout=...); every caller wrote its own poll loop."""
    import threading

    from jobframework.status import JobState

    sent = rt.client.enqueue(ok, Work(name="waited"))
    with pytest.raises(TimeoutError, match=rf"job {sent.id} has not ended after 0\.3 s: it is queued"):
        rt.client.wait(sent.id, timeout=0.3)
    consuming = threading.Timer(0.5, rt.consume, args=("high",))
    consuming.start()
    try:
        done = rt.client.wait(sent.id, timeout=30, every=0.2)
    finally:
        consuming.join()
    assert (done.status, done.attempts) == (JobState.SUCCEEDED, 1)
    with pytest.raises(LookupError, match="no job nope in the state table"):
        rt.client.wait("nope", timeout=1)
    with pytest.raises(LookupError, match=r"^'' is no job id \(0 characters\): a job id has 1 to 128$"):
        rt.client.wait("", timeout=1)
    with pytest.raises(ValueError, match="wait polls every > 0 seconds"):  # (every=0: 115 reads a second)
        rt.client.wait(sent.id, timeout=1, every=0)


def test_status_of_text_that_is_no_job_id_is_none_as_an_unknown_ids(rt):
    """A trial's GET /jobs/<200 x's> answered 500: status raised ConfigurationError (the README's
    handler answers 404 for None)."""
    assert rt.client.status("x" * 200) is None and rt.client.status("") is None
    with pytest.raises(ConfigurationError, match="a job id is a string"):
        rt.client.status(42)  # type: ignore[arg-type]  # (a caller's bug, not a caller's id)


def test_a_status_read_that_fails_raises_status_unavailable_not_botocore(rt):
    """A web API trial's GET answered 500 with botocore's EndpointConnectionError (its POST's enqueue
    raised EnqueueError, which the README's 202 example maps to 503)."""
    import boto3
    from botocore.config import Config

    from jobframework import StatusUnavailableError
    from jobframework.client import JobClient

    unreachable = boto3.client(
        "dynamodb",
        endpoint_url="http://127.0.0.1:9",
        region_name="us-east-1",
        config=Config(connect_timeout=1, retries={"total_max_attempts": 1}),
    )
    client = JobClient(rt.config, sqs_client=rt.sqs, clients={"dynamodb": unreachable})
    with pytest.raises(StatusUnavailableError, match="reading the status of job j-1 failed"):
        client.status("j-1")


def test_the_async_calls_leave_the_event_loop_serving(rt):
    """A web API trial's async handler calling enqueue stalled every other request for 1.3 s."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from .jobs_under_test import Work, ok

    rt.sqs.meta.events.register("before-send.sqs.SendMessage", lambda **_: time.sleep(0.3))

    async def handler() -> tuple[Any, ...]:
        ticks = 0

        async def other_requests() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        served = asyncio.create_task(other_requests())
        sent = await rt.client.aenqueue("t.ok", {"name": "async-1"})
        during = ticks
        by_job = await ok.aenqueue(Work(name="async-2"), client=rt.client)
        many = await rt.client.aenqueue_many([ok.request(Work(name="async-3"))])
        found = await rt.client.astatus(sent.id)
        served.cancel()
        return sent, during, by_job, many, found

    # (on a thread of its own: a browser test's Playwright leaves its loop running in the main thread)
    with ThreadPoolExecutor(1) as pool:
        sent, during, by_job, many, found = pool.submit(asyncio.run, handler()).result()
    assert during >= 10  # (0.3 s of a blocked loop would have let it run once)
    assert found is not None and found.id == sent.id and found.status.value == "queued"
    assert by_job.ok and [r.ok for r in many] == [True]
    assert len(receive_all(rt.sqs, rt.url("high"))) == 3
