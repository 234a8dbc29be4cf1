"""The event-source-mapping emulator: event shape, partial batch responses, batching, concurrency,
weighted fairness, and the drain on SIGTERM (through `jf worker`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from jobframework.jobs import Priority
from jobframework.local.emulator import Emulator, QueuePoller, WeightedPicker, queue_arn_from_url
from jobframework.topology import POLL_WEIGHT
from tests.functional.conftest_local import cli_env, jf_aws, jf_config, queue_counts, sqs, terminate_when

__all__ = ["jf_aws", "jf_config", "sqs"]

JF = str(Path(sys.executable).with_name("jf"))


def _poller(config, priority="default", **overrides: Any) -> QueuePoller:
    url = config.endpoints(priority).url
    settings: dict[str, Any] = {
        "priority": Priority(priority),
        "url": url,
        "arn": queue_arn_from_url(url, "us-east-1"),
        "batch_size": 10,
        "batching_window": 0.0,
        "max_concurrency": 2,
        "weight": POLL_WEIGHT[Priority(priority)],
        "function_name": "jf-test-consumer",
        "timeout": 30.0,
    }
    settings.update(overrides)
    return QueuePoller(**settings)


def _send(sqs, url: str, bodies: list[str]) -> None:
    for start in range(0, len(bodies), 10):
        sqs.send_message_batch(
            QueueUrl=url,
            Entries=[{"Id": str(i), "MessageBody": b} for i, b in enumerate(bodies[start : start + 10])],
        )


def _wait(predicate, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return bool(predicate())


def test_picker_is_weighted_and_interleaved():
    picker = WeightedPicker({p.value: w for p, w in POLL_WEIGHT.items()})
    picks = [picker.pick([p.value for p in Priority]) for _ in range(120)]
    assert Counter(picks) == {"critical": 60, "high": 30, "default": 20, "low": 10}
    assert "low" in picks[:12]  # low progresses within every round
    assert picker.pick(["low"]) == "low"
    assert picker.pick([]) is None


def test_event_shape_context_and_partial_batch_response(sqs, jf_config):
    url = jf_config.endpoints("default").url
    _send(sqs, url, [f"body-{i}" for i in range(4)])
    seen: dict[str, Any] = {}

    def handler(event, context):
        seen["event"], seen["remaining"] = event, context.get_remaining_time_in_millis()
        bad = [r["messageId"] for r in event["Records"] if r["body"] in ("body-1", "body-3")]
        return {"batchItemFailures": [{"itemIdentifier": i} for i in bad]}

    poller = _poller(jf_config, timeout=30.0)
    emulator = Emulator([poller], handler, sqs)
    messages = emulator._collect(poller)
    deleted = emulator.invoke(poller, messages)

    record = seen["event"]["Records"][0]
    assert set(record) >= {
        "messageId",
        "receiptHandle",
        "body",
        "attributes",
        "messageAttributes",
        "md5OfBody",
        "eventSource",
        "eventSourceARN",
        "awsRegion",
    }
    assert record["eventSource"] == "aws:sqs"
    assert record["eventSourceARN"] == poller.arn
    assert record["attributes"]["ApproximateReceiveCount"] == "1"
    assert 29_000 < seen["remaining"] <= 30_000
    assert len(deleted) == 2
    assert queue_counts(sqs, url) == (0, 2)  # the reported records wait for their visibility


def test_handler_error_or_unknown_identifier_fails_the_whole_batch(sqs, jf_config):
    url = jf_config.endpoints("high").url
    poller = _poller(jf_config, "high")

    def crashes(event, context):
        raise RuntimeError("function crashed")

    def names_a_stranger(event, context):
        return {"batchItemFailures": [{"itemIdentifier": "not-in-this-batch"}]}

    for handler in (crashes, names_a_stranger):
        _send(sqs, url, ["a", "b"])
        emulator = Emulator([poller], handler, sqs)
        assert emulator.invoke(poller, emulator._collect(poller)) == []
    assert queue_counts(sqs, url) == (0, 4)


def test_batch_size_window_and_max_concurrency(sqs, jf_config):
    url = jf_config.endpoints("low").url
    _send(sqs, url, [str(i) for i in range(24)])
    sizes: list[int] = []
    running, peak = [0], [0]
    lock = threading.Lock()

    def handler(event, context):
        with lock:
            sizes.append(len(event["Records"]))
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.2)
        with lock:
            running[0] -= 1
        return {"batchItemFailures": []}

    poller = _poller(jf_config, "low", batch_size=4, batching_window=0.2, max_concurrency=2)
    emulator = Emulator([poller], handler, sqs, workers=6).start()
    try:
        assert _wait(lambda: sum(sizes) >= 24 and running[0] == 0)
    finally:
        emulator.stop(2)
    assert max(sizes) <= 4
    assert peak[0] == 2  # six workers, but at most two batches of this queue at once
    assert queue_counts(sqs, url) == (0, 0)


def test_long_polling_keeps_one_receive_per_idle_queue_and_scales_with_work(jf_aws, jf_config):
    sqs = jf_aws.client("sqs")  # its own client: the hooks below stay on it
    url = jf_config.endpoints("high").url
    receiving, peak_idle, peak_busy = [0], [0], [0]
    busy = threading.Event()
    lock = threading.Lock()

    def before(**kwargs: Any) -> None:
        with lock:
            receiving[0] += 1
            peak = peak_busy if busy.is_set() else peak_idle
            peak[0] = max(peak[0], receiving[0])

    def after(**kwargs: Any) -> None:
        with lock:
            receiving[0] -= 1

    sqs.meta.events.register("before-call.sqs.ReceiveMessage", before)
    sqs.meta.events.register("after-call.sqs.ReceiveMessage", after)
    sqs.meta.events.register("after-call-error.sqs.ReceiveMessage", after)
    handled: list[str] = []

    def handler(event, context):
        time.sleep(0.3)  # long enough for the other workers to join while it runs
        with lock:
            handled.extend(r["body"] for r in event["Records"])
        return {"batchItemFailures": []}

    poller = _poller(jf_config, "high", batch_size=1, max_concurrency=3)
    emulator = Emulator([poller], handler, sqs, workers=6, wait_time_seconds=1).start()
    try:
        time.sleep(2.5)  # idle: a couple of long polls, one at a time
        busy.set()
        _send(jf_aws.client("sqs"), url, [str(i) for i in range(6)])
        assert _wait(lambda: len(handled) == 6)
    finally:
        emulator.stop(3)
    assert peak_idle[0] == 1  # six workers, one waiting receive while the queue is empty
    assert peak_busy[0] > 1  # with work, the other workers take the queue too
    assert sorted(handled) == [str(i) for i in range(6)]


def test_critical_jobs_start_promptly_under_a_burst_of_low(sqs, jf_config):
    low_url, critical_url = jf_config.endpoints("low").url, jf_config.endpoints("critical").url
    _send(sqs, low_url, [f"low-{i}" for i in range(40)])
    started: dict[str, float] = {}
    lock = threading.Lock()

    def handler(event, context):
        for record in event["Records"]:
            with lock:
                started[record["body"]] = time.monotonic()
            time.sleep(0.05)
        return {"batchItemFailures": []}

    pollers = [
        _poller(jf_config, "critical", batch_size=1, max_concurrency=2),
        _poller(jf_config, "low", batch_size=1, max_concurrency=2),
    ]
    emulator = Emulator(pollers, handler, sqs, workers=3, idle_seconds=0.02, max_idle_seconds=0.05).start()
    try:
        assert _wait(lambda: len(started) >= 5)
        sent = time.monotonic()
        _send(sqs, critical_url, [f"critical-{i}" for i in range(3)])
        assert _wait(lambda: all(f"critical-{i}" in started for i in range(3)))
        last_critical = max(started[f"critical-{i}"] for i in range(3))
        low_left_then = 40 - sum(1 for k in started if k.startswith("low-"))
        assert _wait(lambda: sum(1 for k in started if k.startswith("low-")) == 40, 15)
    finally:
        emulator.stop(2)
    # Critical jumps the queue: few low jobs started between its send and its last start (the ones in
    # flight, and a round of polls), however slow the machine (a wall-clock bound flaked under load).
    overtaken = sum(1 for k, t in started.items() if k.startswith("low-") and sent <= t <= last_critical)
    assert overtaken <= 6, overtaken
    assert low_left_then > 10  # critical did not wait for the low backlog to drain
    assert queue_counts(sqs, low_url) == (0, 0)


SLOW_JOBS = """
import os, time
from pydantic import BaseModel
from jobframework import job

class Item(BaseModel):
    n: int

@job("drain.slow", priority="default", timeout=5)
def slow(item: Item) -> None:
    time.sleep(0.15)
    with open(os.environ["LEDGER"], "a") as fh:
        fh.write(f"{item.n}\\n")
"""


def test_sigterm_drains_in_flight_batches_and_loses_nothing(sqs, jf_config, tmp_path):
    (tmp_path / "drain_jobs.py").write_text(textwrap.dedent(SLOW_JOBS))
    ledger = tmp_path / "ledger.txt"
    url = jf_config.endpoints("default").url
    total = 60
    _send(sqs, url, [_envelope(n) for n in range(total)])
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("JF_")},
        **cli_env(jf_config),
        "LEDGER": str(ledger),
        "PYTHONPATH": str(tmp_path),
        "POWERTOOLS_METRICS_DISABLED": "true",
    }
    proc = subprocess.Popen(
        [JF, "worker", "--queues", "default", "--jobs", "drain_jobs", "--drain-timeout", "20"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = terminate_when(
        proc, lambda: ledger.exists() and len(ledger.read_text().split()) >= 3, timeout=20, drain=25
    )
    assert proc.returncode == 0, err
    assert "drained" in out
    done = [int(n) for n in ledger.read_text().split()]
    visible, in_flight = queue_counts(sqs, url)
    assert len(done) == len(set(done))  # nothing ran twice
    assert in_flight == 0  # every batch in flight finished and was acknowledged
    assert len(done) < total  # it really stopped early
    assert len(done) + visible == total  # nothing lost


def _envelope(n: int) -> str:
    from jobframework.envelope import Envelope

    return Envelope.new("drain.slow", {"n": n}).to_body()


def test_worker_reads_sqs_like_lambda_and_runs_real_jobs(sqs, jf_config):
    """`jf enqueue` then the emulator with the real consumer: the example job runs, the queue empties."""
    import handlers.jobs  # noqa: F401
    from jobframework.client import JobClient
    from jobframework.consumer import consumer
    from jobframework.local.emulator import pollers_for
    from jobframework.topology import Topology

    outcomes = []
    topology = Topology.from_registry()
    handler = consumer(config=jf_config, sqs_client=sqs, listeners=[outcomes.append])
    client = JobClient(jf_config, sqs_client=sqs)
    ids = {client.enqueue("emails.send", {"to": f"a{i}@b.c", "subject": "hi"}).id for i in range(5)}
    ids.add(client.enqueue("auth.password_reset", {"user_id": "u", "email": "u@b.c"}).id)
    emulator = Emulator(pollers_for(jf_config, topology), handler, sqs, idle_seconds=0.02).start()
    try:
        assert _wait(lambda: {o.job_id for o in outcomes} >= ids)
    finally:
        emulator.stop(2)
    assert {o.outcome for o in outcomes} == {"succeeded"}
    assert {o.priority for o in outcomes} == {"high", "critical"}
    assert json.dumps(emulator.stats.by_priority)


def test_a_stop_without_waiting_for_receives_hands_back_what_a_waiting_receive_returns(sqs, jf_config):
    """``stop(wait_for_receives=False)`` (``jf dev``'s Ctrl-C) returns while a long poll still waits;
    a message that receive returns afterwards is made visible again, not run."""
    url = jf_config.endpoints("default").url
    ran: list[str] = []
    emulator = Emulator(
        [_poller(jf_config, max_concurrency=1)],
        lambda event, context: ran.extend(r["body"] for r in event["Records"]),
        sqs,
        workers=1,
        wait_time_seconds=20,
    ).start()
    assert _wait(lambda: emulator.in_flight() == 1)  # its one worker is in its (20 s) receive
    assert emulator.stop(drain_timeout=5, wait_for_receives=False)  # no batch was being run
    assert emulator.running  # the receive still waits
    _send(sqs, url, ["late"])
    assert _wait(lambda: not emulator.running)  # the receive got it, and the worker is gone
    assert ran == []
    assert queue_counts(sqs, url) == (1, 0)  # visible again at once


def test_a_long_poll_returns_when_a_delayed_message_comes_due(jf_aws, jf_config):
    """The embedded AWS, like SQS, answers a long poll when a message sent with DelaySeconds becomes
    receivable (moto looked again only once a second: a hand-back due at its rate turn came back up to
    a second late, and turns came back together)."""
    sqs = jf_aws.client("sqs")
    url = jf_config.endpoints("default").url
    got: list[float] = []

    def poll() -> None:
        messages = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5).get("Messages", [])
        got.append(time.monotonic() if messages else float("inf"))

    waiting = threading.Thread(target=poll)
    waiting.start()
    time.sleep(0.3)  # the poll is waiting
    sent = time.monotonic()
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=1)
    waiting.join(10)
    assert got and 0.9 <= got[0] - sent < 1.5, got[0] - sent  # (moto's own wait: 1.7 s, its next look)
