"""Operating at scale: batched handlers, backlog-aware schedules, worker-profile lanes."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import time
from contextlib import redirect_stdout
from datetime import UTC, datetime
from pathlib import Path

import pytest

from jobframework.client import JobClient
from jobframework.consumer import consumer
from jobframework.local.emulator import Emulator, pollers_for, worker_processes
from jobframework.scheduling import scheduled_envelope
from jobframework.telemetry import BatchMetrics
from jobframework.testing import consume_once, provision_fresh, receive_all
from tests.functional.conftest_local import terminate_when

from . import jobs_at_scale as jobs


@pytest.fixture
def scale(jf_aws):
    jobs.calls.clear()
    jobs.ran.clear()
    topology, config = provision_fresh(jf_aws.endpoint_url, jobs.registry)
    sqs = jf_aws.client("sqs")
    client = JobClient(config, registry=jobs.registry, sqs_client=sqs)
    heard = []
    handler = consumer(jobs.registry, config=config, sqs_client=sqs, listeners=[heard.append])
    return topology, config, sqs, client, handler, heard


def reasons(sqs, url):
    return sorted(m["MessageAttributes"]["jf-reason"]["StringValue"] for m in receive_all(sqs, url))


def test_a_batched_job_gets_one_call_and_each_item_its_own_outcome(scale):
    _topology, config, sqs, client, handler, heard = scale
    addresses = ["a@x.io", "bounce@x.io", "greylist@x.io", "b@x.io"]
    client.enqueue_many([jobs.send_emails.request({"to": a}) for a in addresses])
    records, response = consume_once(handler, sqs, config.endpoints("default").url)
    assert len(records) == 4
    assert len(jobs.calls) == 1 and sorted(jobs.calls[0]) == sorted(addresses)  # one call for the batch
    by_id = {r["messageId"]: json.loads(r["body"])["payload"]["to"] for r in records}
    assert [by_id[f["itemIdentifier"]] for f in response["batchItemFailures"]] == ["greylist@x.io"]
    assert reasons(sqs, config.endpoints("default").dlq_url) == ["permanent"]
    outcomes = sorted((o.outcome, by_id[o.message_id]) for o in heard)
    assert outcomes == [
        ("dead_lettered", "bounce@x.io"),
        ("retried", "greylist@x.io"),
        ("succeeded", "a@x.io"),
        ("succeeded", "b@x.io"),
    ]
    time.sleep(1.2)  # the greylisted one comes back alone after its 1 s and then succeeds
    records, response = consume_once(handler, sqs, config.endpoints("default").url)
    assert [json.loads(r["body"])["payload"]["to"] for r in records] == ["greylist@x.io"]
    assert response == {
        "batchItemFailures": [{"itemIdentifier": records[0]["messageId"]}]
    }  # still greylisted


def test_a_batched_job_that_raises_fails_every_item_on_its_own_terms(scale, monkeypatch):
    _topology, config, sqs, client, handler, heard = scale

    def explode(emails, ctx):
        raise ConnectionError("SMTP server went away")

    monkeypatch.setattr(jobs.send_emails, "fn", explode)
    client.enqueue_many([jobs.send_emails.request({"to": f"u{i}@x.io"}) for i in range(3)])
    _records, response = consume_once(handler, sqs, config.endpoints("default").url)
    assert len(response["batchItemFailures"]) == 3  # all retried, none lost
    assert {o.outcome for o in heard} == {"retried"}


def test_the_topology_takes_batch_size_and_window_from_the_batch_options(scale):
    topology = scale[0]
    default = topology.queue("default")
    assert default.batch_size == 20
    assert default.batching_window == 1


def test_the_emulator_gathers_a_batch_for_the_batching_window(scale):
    topology, config, sqs, client, handler, _heard = scale
    pollers = [p for p in pollers_for(config, topology, ["default"]) if p.lane == "default"]
    emulator = Emulator(pollers, handler, sqs).start()
    try:
        started = time.monotonic()
        for i in range(12):  # trickle in over ~0.6 s: the 1 s window must collect them together
            client.enqueue(jobs.send_emails, {"to": f"t{i}@x.io"})
            time.sleep(0.05)
        while sum(len(c) for c in jobs.calls) < 12:
            time.sleep(0.05)
            assert time.monotonic() - started < 10
    finally:
        emulator.stop(drain_timeout=5)
    assert len(jobs.calls) <= 3, jobs.calls  # batched, not one call per message
    assert max(len(c) for c in jobs.calls) >= 6


def _scheduled(topology, name):
    spec = next(s for s in topology.schedules if s.job == name)
    return scheduled_envelope(spec, datetime.now(UTC), f"exec-{name}-{time.time_ns()}")


def _backlog(client, n):
    for i in range(n):
        client.enqueue(jobs.filler, {"n": i})


def test_a_scheduled_run_is_skipped_when_its_queue_is_backlogged_and_runs_when_not(scale):
    topology, config, sqs, client, handler, heard = scale
    url = config.endpoints("default").url
    sqs.send_message(QueueUrl=url, MessageBody=_scheduled(topology, "scale.rollup").to_body())
    consume_once(handler, sqs, url)
    assert jobs.ran == ["rollup"]  # an empty queue: it runs

    heard.clear()
    jobs.ran.clear()
    sqs.send_message(QueueUrl=url, MessageBody=_scheduled(topology, "scale.rollup").to_body())
    _backlog(client, 5)  # five waiting behind it: over its backlog_depth of 3
    records, response = consume_once(handler, sqs, url, max_messages=1)
    assert [json.loads(r["body"])["type"] for r in records] == ["scale.rollup"]
    assert "rollup" not in jobs.ran
    assert [o.outcome for o in heard if o.job_type == "scale.rollup"] == ["skipped"]
    assert response == {"batchItemFailures": []}  # skipped is settled, not retried
    assert receive_all(sqs, config.endpoints("default").dlq_url) == []


def test_a_deferred_scheduled_run_comes_back_instead_of_running_into_the_backlog(scale):
    topology, config, sqs, client, handler, heard = scale
    url = config.endpoints("default").url
    env = _scheduled(topology, "scale.sync")
    sqs.send_message(QueueUrl=url, MessageBody=env.to_body())
    _backlog(client, 5)
    records, response = consume_once(handler, sqs, url, max_messages=1)
    assert [json.loads(r["body"])["id"] for r in records] == [env.id]
    # Back later as a fresh copy that counts the deferral, not an attempt (the original is acknowledged).
    assert response["batchItemFailures"] == []
    assert "sync" not in jobs.ran
    assert [o.outcome for o in heard] == ["retried"]
    delayed = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessagesDelayed"])
    assert delayed["Attributes"]["ApproximateNumberOfMessagesDelayed"] == "1"  # waits out its 60 s


def test_scheduled_runs_emit_a_heartbeat_and_skips_a_metric(monkeypatch):
    monkeypatch.setitem(os.environ, "POWERTOOLS_METRICS_DISABLED", "false")
    monkeypatch.setitem(os.environ, "JF_METRICS_DISABLED", "false")
    metrics = BatchMetrics()
    metrics.schedule_event("scale.rollup", "Heartbeat")
    metrics.schedule_event("scale.rollup", "ScheduleSkipped")
    out = io.StringIO()
    with redirect_stdout(out):
        metrics.flush()
    blobs = [json.loads(line) for line in out.getvalue().splitlines() if line.strip()]
    names = {d["Name"] for b in blobs for d in b["_aws"]["CloudWatchMetrics"][0]["Metrics"]}
    assert {"Heartbeat", "ScheduleSkipped"} <= names
    assert all(b["JobType"] == "scale.rollup" and b["service"] == "jobframework" for b in blobs)


def test_a_profiled_job_has_a_lane_of_its_own(scale):
    topology, config, sqs, client, _handler, _heard = scale
    assert topology.queue("low-cpu").consumer == "cpu"
    assert topology.consumer("cpu").memory_mb > topology.consumer("shared").memory_mb
    client.enqueue(jobs.render, {"n": 1})
    assert len(receive_all(sqs, config.endpoints("low-cpu").url)) == 1
    assert receive_all(sqs, config.endpoints("low").url) == []


def test_worker_runs_a_process_per_core_for_cpu_lanes_and_one_for_others(scale):
    topology, config = scale[0], scale[1]
    cpu = pollers_for(config, topology, ["low-cpu"])
    plain = pollers_for(config, topology, ["default"])
    assert [p.name for p in cpu] == ["low-cpu"]
    assert worker_processes(cpu, topology) == (os.cpu_count() or 1)
    assert worker_processes(plain, topology) == 1
    assert worker_processes(plain, topology, requested=3) == 3
    assert {p.name for p in pollers_for(config, topology, ["low"])} == {"low", "low-cpu"}


def test_jf_worker_with_two_processes_runs_a_cpu_lane_and_drains_on_sigterm(scale, tmp_path):
    _topology, config, _sqs, client, _handler, _heard = scale
    ledger = tmp_path / "ledger.txt"
    ledger.touch()
    env = {k: v for k, v in os.environ.items() if not k.startswith("JF_")}
    env.update(config.to_env(), JF_TEST_LEDGER=str(ledger), POWERTOOLS_METRICS_DISABLED="true")
    jf = str(Path(sys.executable).with_name("jf"))
    proc = subprocess.Popen(
        [
            jf,
            "worker",
            "--queues",
            "low-cpu",
            "--processes",
            "2",
            "--jobs",
            "tests.functional.worker_cpu_jobs",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    time.sleep(3)  # both processes polling (the second says which it is)
    for n in range(6):
        client.enqueue(jobs.render, {"n": n})
    out, _ = terminate_when(proc, lambda: len(ledger.read_text().splitlines()) >= 6, timeout=30)
    assert proc.returncode == 0, out
    assert "in 2 process(es)" in out and "(process 2/2)" in out
    # The last line counts both processes' jobs (a trial added each process's stop line by hand).
    assert re.search(
        r"in all \(2 processes\): 6 records in \d+ batch(?:es)?, 6 done, 0 handed back; jobs: 6 succeeded",
        out,
    ), out
    assert sorted(int(line.split()[0]) for line in ledger.read_text().splitlines()) == list(range(6))
    assert receive_all(_sqs, config.endpoints("low-cpu").url) == []


def test_an_unexpected_error_admitting_a_batched_record_fails_only_that_record(scale, monkeypatch):
    _topology, config, sqs, client, handler, _heard = scale
    client.enqueue_many([jobs.send_emails.request({"to": a}) for a in ("ok1@x.io", "boom@x.io", "ok2@x.io")])
    import importlib

    pipeline_module = importlib.import_module("jobframework.pipeline")  # the stages' module

    original = pipeline_module.load_payload

    def payload(d, job, s3, **options):
        if "boom" in d.record["body"]:
            raise TypeError("a bug while admitting")
        return original(d, job, s3, **options)

    monkeypatch.setattr(pipeline_module, "load_payload", payload)
    records, response = consume_once(handler, sqs, config.endpoints("default").url)
    by_id = {r["messageId"]: json.loads(r["body"])["payload"]["to"] for r in records}
    assert [by_id[f["itemIdentifier"]] for f in response["batchItemFailures"]] == ["boom@x.io"]
    assert sorted(jobs.calls[0]) == ["ok1@x.io", "ok2@x.io"]  # its neighbours ran, once
