"""`jf status`, `jf dlq peek` of offloaded payloads, and `jf dev` firing long delays."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from jobframework.client import JobClient
from jobframework.consumer import consumer
from jobframework.delays import create_one_time_schedule, fire_due, schedule_name
from jobframework.envelope import Envelope
from jobframework.local.aws import FAKE_CREDENTIALS, free_port
from jobframework.local.scheduler import LocalScheduler
from jobframework.testing import consume_once, provision_fresh, receive_all
from jobframework.topology import RuntimeConfig
from tests.functional.conftest_local import cli_env, invoke, jf_aws
from tests.functional.test_cli import start_jf_dev

from . import jobs_effectively_once as jobs

__all__ = ["jf_aws"]


@pytest.fixture
def env_config(jf_aws: Any) -> tuple[RuntimeConfig, JobClient, Any]:
    jobs.effects.clear()
    jobs.observed.clear()
    jobs.while_running.clear()
    _, config = provision_fresh(jf_aws.endpoint_url, jobs.registry)
    sqs = jf_aws.client("sqs")
    return config, JobClient(config, registry=jobs.registry, sqs_client=sqs), sqs


def _one_error_line(result: Any) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.output
    assert lines[0].startswith("jf: error: ")
    assert "Traceback" not in result.output
    return str(lines[0])


def test_status_shows_a_queued_then_a_succeeded_job(env_config):
    config, client, sqs = env_config
    sent = client.enqueue("eo.effect", {"name": "cli"})
    queued = invoke(["status", sent.id], cli_env(config))
    assert queued.exit_code == 0, queued.output
    assert "status:       queued" in queued.stdout
    assert f"id:           {sent.id}" in queued.stdout

    handler = consumer(jobs.registry, config=config, sqs_client=sqs)
    consume_once(handler, sqs, config.endpoints("high").url)
    done = invoke(["status", sent.id, "--json"], cli_env(config))
    assert done.exit_code == 0, done.output
    info = json.loads(done.stdout)
    assert (info["status"], info["attempts"], info["type"]) == ("succeeded", 1, "eo.effect")
    assert info["result"] == {"applied": "cli"} and info["finished_at"]


def test_status_of_a_retrying_job_says_when_its_next_attempt_is_due(env_config):
    """An operator asked "when does it run again?": jf status of a retrying job did not say."""
    config, client, sqs = env_config
    sent = client.enqueue("eo.effect", {"name": "again", "fail_times": 1})
    consume_once(consumer(jobs.registry, config=config, sqs_client=sqs), sqs, config.endpoints("high").url)
    shown = invoke(["status", sent.id], cli_env(config))
    assert "status:       retrying" in shown.stdout, shown.output
    [line] = [line for line in shown.stdout.splitlines() if line.startswith("next attempt:")]
    assert abs((datetime.fromisoformat(line.split(None, 2)[2]) - datetime.now(UTC)).total_seconds()) < 60


def test_status_of_a_scheduled_job_says_when_it_runs(env_config, jf_aws):
    config, client, _sqs = env_config
    sent = client.enqueue("eo.effect", {"name": "later"}, delay=timedelta(days=3))
    shown = invoke(["status", sent.id], cli_env(config))
    assert shown.exit_code == 0, shown.output
    assert "status:       scheduled" in shown.stdout
    [line] = [line for line in shown.stdout.splitlines() if line.startswith("runs at:")]
    due = datetime.fromisoformat(line.split(None, 2)[2])
    assert abs((due - (datetime.now(UTC) + timedelta(days=3))).total_seconds()) < 60
    info = json.loads(invoke(["status", sent.id, "--json"], cli_env(config)).stdout)
    assert datetime.fromisoformat(info["run_at"]) == due

    cancelled = invoke(["cancel", sent.id], cli_env(config))  # its one-time schedule goes with it
    assert cancelled.exit_code == 0 and "cancelled (status cancelled, was scheduled)" in cancelled.stdout
    scheduler = jf_aws.client("scheduler")
    with pytest.raises(scheduler.exceptions.ResourceNotFoundException):
        scheduler.get_schedule(Name=schedule_name(sent.id), GroupName="default")


def test_status_says_which_attempt_started_last(env_config, jf_aws):
    """A job on its second attempt: "started at" is that attempt's start, and says so."""
    from jobframework.state import StateStore

    config, client, _ = env_config
    sent = client.enqueue("eo.effect", {"name": "again"})
    records = StateStore(str(config.state_table), jf_aws.client("dynamodb")).jobs
    assert records.claim_start(sent.id, attempt=2, runs_until=time.time() + 60, now=time.time())
    shown = invoke(["status", sent.id], cli_env(config))
    assert shown.exit_code == 0, shown.output
    [started] = [line for line in shown.stdout.splitlines() if line.startswith("started at:")]
    assert started.endswith("(attempt 2, the latest)"), shown.stdout


def test_status_of_an_unknown_id_is_one_line_and_exit_1(env_config):
    config, _, _ = env_config
    result = invoke(["status", "0190b8a4-0000-7000-8000-000000000000"], cli_env(config))
    assert result.exit_code == 1
    line = _one_error_line(result)
    assert "no job 0190b8a4-0000-7000-8000-000000000000" in line
    assert "not tracked (@job(..., track=True)" in line  # says how to get a status
    # and where an untracked job that failed is (an operator's trial found no pointer)
    assert "jf dlq ls, then jf dlq peek LANE --id 0190b8a4-0000-7000-8000-000000000000" in line


def test_status_takes_a_pasted_id_with_spaces_and_says_ids_are_lowercase(env_config):
    """A trial's paste (a leading space) and an uppercased id both read "no job ..." for a job that
    was there; the paste printed as if the id were right."""
    config, client, _ = env_config
    sent = client.enqueue("eo.effect", {"name": "pasted"})
    pasted = invoke(["status", f" {sent.id}\n"], cli_env(config))
    assert pasted.exit_code == 0 and f"id:           {sent.id}" in pasted.stdout, pasted.output
    upper = invoke(["status", sent.id.upper()], cli_env(config))
    assert upper.exit_code == 1
    assert f"(ids the client makes are lowercase: {sent.id})" in _one_error_line(upper)


def test_status_by_key_shows_the_job_of_a_key_then_each_of_several_newest_first(env_config):
    """On-call knows the order, not the job id the enqueue printed to someone else's log."""
    config, client, sqs = env_config
    first = client.enqueue("eo.effect", {"name": "k1"}, key="order:7")
    consume_once(consumer(jobs.registry, config=config, sqs_client=sqs), sqs, config.endpoints("high").url)
    one = invoke(["status", "--key", " order:7 "], cli_env(config))
    assert one.exit_code == 0, one.output
    assert f"id:           {first.id}" in one.stdout and "key:          order:7" in one.stdout
    # One job is shown as jf status ID shows it (a trial's --key left out its result and redrives).
    assert one.stdout == invoke(["status", first.id], cli_env(config)).stdout
    time.sleep(0.01)  # (updated_at to the millisecond: the second is the newer)
    second = client.enqueue("eo.effect", {"name": "k2"}, key="order:7", dedup_window=0)  # (sent again)
    client.enqueue("eo.effect", {"name": "other"}, key="order:70")  # (a key is matched whole)
    both = invoke(["status", "--key", "order:7", "--json"], cli_env(config))
    assert both.exit_code == 0, both.output
    assert [j["id"] for j in json.loads(both.stdout)] == [second.id, first.id]
    table = invoke(["status", "--key", "order:7"], cli_env(config))
    assert table.exit_code == 0, table.output
    assert "jobs of the key order:7" in table.stdout and table.stdout.index(second.id) < table.stdout.index(
        first.id
    )
    assert "2 jobs: jf status ID for one in full" in table.stderr
    none = invoke(["status", "--key", "order:8"], cli_env(config))
    assert none.exit_code == 1
    line = _one_error_line(none)
    assert "no tracked job has the key 'order:8'" in line and "track=True" in line
    assert "jf status --match TEXT finds text within keys" in line


def test_status_match_finds_the_jobs_whose_key_contains_the_text(env_config):
    """An on-call trial knew the customer (c-42), not the whole key; the hint sent it to jf cancel,
    which finds unfinished jobs only."""
    config, client, _ = env_config
    a = client.enqueue("eo.effect", {"name": "m1"}, key="order:c-42:o-1:confirm")
    b = client.enqueue("eo.effect", {"name": "m2"}, key="order:c-42:o-2:confirm")
    client.enqueue("eo.effect", {"name": "m3"}, key="order:c-7:o-3:confirm")
    found = invoke(["status", "--match", "c-42", "--json"], cli_env(config))
    assert found.exit_code == 0, found.output
    assert sorted(j["id"] for j in json.loads(found.stdout)) == sorted([a.id, b.id])
    table = invoke(["status", "--match", "c-42"], {**cli_env(config), "COLUMNS": "80"})
    assert "jobs of keys containing c-42" in table.stdout and a.id in table.stdout, table.stdout
    assert "…" not in table.stdout and "queued" in table.stdout  # (folded, not cut, at 80 columns)
    piped = invoke(["status", "--match", "c-42"], {**cli_env(config), "COLUMNS": ""})  # (a shell's pipe)
    [row] = [line for line in piped.stdout.splitlines() if a.id in line]  # (a trial's pipe folded at 80)
    assert "order:c-42:o-1:confirm" in row and "eo.effect" in row, piped.stdout
    none = invoke(["status", "--match", "c-99"], cli_env(config))
    assert none.exit_code == 1 and "no tracked job has a key containing 'c-99'" in _one_error_line(none)


def test_status_summary_counts_every_job_of_a_backfill_by_state(env_config, jf_aws):
    """A data team following a backfill: --match lists the newest 20; --summary counts them all."""
    config, client, sqs = env_config
    client.enqueue_many([jobs.effect.request({"name": f"b{n}"}, key=f"backfill:b-{n}") for n in range(25)])
    client.enqueue("eo.effect", {"name": "other"}, key="nightly:1")
    handler = consumer(jobs.registry, config=config, sqs_client=sqs)
    records, _ = consume_once(handler, sqs, config.endpoints("high").url, max_messages=10)
    ran = sum(json.loads(r["body"])["key"].startswith("backfill:") for r in records)
    counted = invoke(["status", "--match", "backfill:", "--summary", "--json"], cli_env(config))
    assert counted.exit_code == 0, counted.output
    assert json.loads(counted.stdout) == {
        "total": 25,
        "by_status": {"succeeded": ran, "queued": 25 - ran},
        "complete": True,
    }
    text = invoke(["status", "--match", "backfill:", "--summary"], cli_env(config))
    assert text.stdout.startswith(
        f"25 tracked jobs of keys containing 'backfill:': queued {25 - ran}, succeeded"
    )
    mixed = invoke(["status", "some-id", "--summary"], cli_env(config))
    assert mixed.exit_code == 2


@pytest.mark.parametrize(
    "args",
    [
        ["status"],
        ["status", "x" * 129],
        ["status", "id", "--jsn"],
        ["status", "id", "--key", "k"],
        ["status", "--key", "k", "--match", "k"],
    ],
)
def test_status_with_bad_arguments_exits_2(args):
    result = invoke(args, {"JF_ENDPOINT_URL": "http://127.0.0.1:9"})
    assert result.exit_code == 2, result.output
    _one_error_line(result)


def test_status_with_an_unreachable_endpoint_exits_3(env_config):
    config, _, _ = env_config
    env = cli_env(config)
    env["JF_ENDPOINT_URL"] = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    result = invoke(["status", "some-id"], env)
    assert result.exit_code == 3, result.output
    line = _one_error_line(result)
    assert "cannot reach the AWS endpoint" in line
    assert "is `jf dev` running?" in line and env["JF_ENDPOINT_URL"] in line  # what to do about it
    assert time.monotonic() - started < 15


def test_a_table_or_queue_that_is_not_there_says_the_exports_may_be_an_earlier_jf_devs(env_config):
    """Export lines of an earlier `jf dev` (restarted with another --app) named a table and queues the
    embedded AWS does not have: `jf status` said only ResourceNotFoundException, `jf enqueue`
    NonExistentQueue."""
    config, _, _ = env_config
    env = cli_env(config)
    env["JF_STATE_TABLE"] = "payments-dev-state"
    status = invoke(["status", "some-id"], env)
    assert status.exit_code == 1
    assert "paste the export lines it printed this time" in _one_error_line(status)
    env["JF_DLQ_URL_HIGH"] = config.endpoints("high").dlq_url.replace("-high", "-gone-high")
    peek = invoke(["dlq", "peek", "high"], env)
    assert peek.exit_code == 1, peek.output
    assert "paste the export lines it printed this time" in _one_error_line(peek)


def test_signing_keys_that_are_not_there_yet_are_said_to_be_put_there(env_config):
    """A trial turned signing on under jf dev before it had put the keys: jf enqueue blamed stale
    export lines."""
    config, _, _ = env_config
    env = {**cli_env(config), "JF_SIGNING_KEYS": "ssm:/reports/dev/signing-keys"}
    sent = invoke(["enqueue", "emails.send", '{"to": "a@example.com", "subject": "hi"}'], env)
    assert sent.exit_code != 0
    line = _one_error_line(sent)
    assert "JF_SIGNING_KEYS=ssm:/reports/dev/signing-keys names keys that are not there yet" in line
    assert "paste the export lines" not in line


def test_a_topology_parameter_that_is_not_there_is_said_once(env_config):
    """A trial's error gave its advice twice: the parameter's own, then the generic one in brackets."""
    config, _, _ = env_config
    env = {**FAKE_CREDENTIALS, "JF_ENDPOINT_URL": str(config.endpoint_url)}
    env["JF_TOPOLOGY_PARAMETER"] = "/webhooks/dev/topology"
    result = invoke(["dlq", "ls"], env)
    assert result.exit_code == 1
    line = _one_error_line(result)
    assert "no topology parameter /webhooks/dev/topology here" in line
    assert line.count("JF_TOPOLOGY_PARAMETER") == 1 and "JF_QUEUE_URL" not in line, line


def test_status_without_a_state_table_says_what_to_set(env_config):
    config, _, _ = env_config
    env = cli_env(config.model_copy(update={"state_table": None}))
    result = invoke(["status", "some-id"], env)
    assert result.exit_code == 1
    assert "JF_STATE_TABLE" in _one_error_line(result)


def test_a_redrive_that_leaves_letters_whose_payload_is_gone_exits_1_saying_so(env_config):
    """A trial's redrive moved nothing (its letter's payload was gone) and exited 0."""
    import boto3

    config, client, sqs = env_config
    client.enqueue("eo.blob", {"name": "reject-gone", "data": "q" * 300_000})
    consume_once(consumer(jobs.registry, config=config, sqs_client=sqs), sqs, config.endpoints("high").url)
    peeked = invoke(["dlq", "peek", "high", "--json"], cli_env(config))
    (letter,) = json.loads(peeked.stdout)
    bucket, _, key = letter["payload_ref"]["uri"].removeprefix("s3://").partition("/")
    s3 = boto3.client("s3", endpoint_url=config.endpoint_url, region_name="us-east-1")
    s3.delete_object(Bucket=bucket, Key=key)  # what the lifecycle rule does

    result = invoke(["dlq", "redrive", "high"], cli_env(config))

    assert result.exit_code == 1, result.output
    assert "redrove 0 (none); 0 not matching; 0 failed; 1 left: payload gone" in result.stdout
    gone = "\njf: error: 1 dead letters stay in the DLQ because their offloaded payload is gone"
    assert gone in result.stderr
    assert len(receive_all(sqs, config.endpoints("high").dlq_url)) == 1  # kept for export


def test_dlq_peek_shows_the_pointer_of_an_offloaded_payload(env_config):
    config, client, sqs = env_config
    client.enqueue("eo.blob", {"name": "reject-big", "data": "q" * 300_000})
    client.enqueue("eo.blob", {"name": "reject-small", "data": "q"})
    handler = consumer(jobs.registry, config=config, sqs_client=sqs)
    consume_once(handler, sqs, config.endpoints("high").url)
    result = invoke(["dlq", "peek", "high", "--json"], cli_env(config))
    assert result.exit_code == 0, result.output
    pointers = [d.get("payload_ref") for d in json.loads(result.stdout)]
    big = next(p for p in pointers if p)
    assert big["uri"].startswith(f"s3://{config.payload_bucket}/keep-28d/payloads/eo.blob/")
    assert big["size"] > 300_000
    assert sum(1 for p in pointers if p is None) == 1  # the inline one has none
    # (pytest-xdist's workers export COLUMNS=80, which a user's shell does not)
    table = invoke(["dlq", "peek", "high"], {**cli_env(config), "COLUMNS": ""})
    assert table.exit_code == 0, table.output
    assert "payload" in table.stdout and "s3://" in table.stdout and "inline" in table.stdout
    # Written to a pipe (not a terminal), the table is wide enough that each job id stays whole.
    ids = [d["id"] for d in json.loads(result.stdout)]
    assert all(job_id in table.stdout for job_id in ids), table.stdout
    # And in a terminal of 110 columns too (a trial's id was cut in two by the payload column's width).
    narrow = invoke(["dlq", "peek", "high"], {**cli_env(config), "COLUMNS": "110"})
    assert all(job_id in narrow.stdout for job_id in ids), narrow.stdout


def test_the_local_scheduler_fires_due_delay_schedules_as_a_task(env_config, jf_aws):
    config, _, sqs = env_config
    scheduler_client = jf_aws.client("scheduler")
    env = Envelope.new("eo.effect", {"name": "due", "fail_times": 0})
    url = config.endpoints("high").url
    create_one_time_schedule(scheduler_client, config, env, 0, url)
    fire = lambda: fire_due(scheduler_client, sqs, config.schedule_group)  # noqa: E731
    scheduler = LocalScheduler([], lambda spec, envelope: None, tasks=[fire]).start()
    try:
        deadline = time.monotonic() + 5
        while not (got := receive_all(sqs, url, attempts=1)):
            assert time.monotonic() < deadline, "the due delay schedule was never fired"
            time.sleep(0.1)
    finally:
        scheduler.stop()
    assert [json.loads(m["Body"])["id"] for m in got] == [env.id]
    with pytest.raises(scheduler_client.exceptions.ResourceNotFoundException):
        scheduler_client.get_schedule(Name=schedule_name(env.id), GroupName=config.schedule_group)


def test_jf_dev_fires_long_delays_when_they_are_due():
    port = free_port()
    proc, exports = start_jf_dev(port, stderr=subprocess.DEVNULL)
    try:
        import boto3

        session = boto3.Session(
            aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
        )
        endpoint = exports["JF_ENDPOINT_URL"]
        config = RuntimeConfig.from_parameter(
            exports["JF_TOPOLOGY_PARAMETER"],
            ssm_client=session.client("ssm", endpoint_url=endpoint),
            endpoint_url=endpoint,
        )
        # A declined card, delayed past its due time: once fired, the worker dead-letters it.
        env = Envelope.new(
            "payments.capture", {"order_id": "o-late", "amount_cents": 5, "card_token": "declined"}
        )
        scheduler = session.client("scheduler", endpoint_url=endpoint)
        create_one_time_schedule(scheduler, config, env, 0, config.endpoints("high").url)
        sqs = session.client("sqs", endpoint_url=endpoint)
        deadline = time.monotonic() + 15
        dead: list[Any] = []
        while not dead:
            assert time.monotonic() < deadline, "jf dev never fired the due delay"
            time.sleep(0.2)
            dead = list(receive_all(sqs, config.endpoints("high").dlq_url, attempts=1))
        assert json.loads(dead[0]["Body"])["id"] == env.id
        assert scheduler.list_schedules(NamePrefix="jf-delay-")["Schedules"] == []
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0


def test_a_redriven_job_reads_queued_again_and_can_be_cancelled_before_it_runs(env_config):
    """An on-call trial redrove a dead job into a paused lane: `jf status` still said dead, and
    `jf cancel` answered "too late, it had already ended: dead" while it waited in the queue."""
    config, client, sqs = env_config
    sent = client.enqueue("eo.blob", {"name": "reject-once", "data": "x"})
    kept = client.enqueue("eo.blob", {"name": "reject-kept", "data": "x"})
    handler = consumer(jobs.registry, config=config, sqs_client=sqs)
    consume_once(handler, sqs, config.endpoints("high").url)
    assert client.status(sent.id).status.value == "dead"  # type: ignore[union-attr]

    moved = invoke(["dlq", "redrive", "high", "--id", sent.id, "--json"], cli_env(config))
    assert moved.exit_code == 0, moved.output
    assert json.loads(moved.stdout)["requeued"] == 1
    shown = invoke(["status", sent.id], cli_env(config))
    assert "status:       queued" in shown.stdout, shown.output
    assert "redriven from the high DLQ (it died: permanent)" in shown.stdout
    assert client.status(kept.id).status.value == "dead"  # type: ignore[union-attr]

    cancelled = invoke(["cancel", sent.id], cli_env(config))
    assert cancelled.exit_code == 0, cancelled.output
    jobs.effects.clear()
    consume_once(handler, sqs, config.endpoints("high").url)
    assert jobs.effects["reject-once"] == 0  # acknowledged unrun
    assert client.status(sent.id).status.value == "cancelled"  # type: ignore[union-attr]
    assert receive_all(sqs, config.endpoints("high").dlq_url) and not receive_all(
        sqs, config.endpoints("high").url
    )


def test_status_of_a_dead_job_names_its_letter_and_the_redrive(env_config):
    """An on-call trial's dead job: `jf status` said `dead` and left finding its letter to the reader."""
    from jobframework.testing import drain

    config, client, sqs = env_config
    sent = client.enqueue("eo.blob", {"name": "reject-1", "data": "x"})
    drain(consumer(jobs.registry, config=config, sqs_client=sqs), sqs, config.endpoints("high").url)
    env = {  # (the topology parameter, as jf dev exports it: its catalog names the job's lane)
        **FAKE_CREDENTIALS,
        "JF_ENDPOINT_URL": str(config.endpoint_url),
        "JF_TOPOLOGY_PARAMETER": str(config.topology_parameter),
    }
    shown = invoke(["status", sent.id], env)
    assert shown.exit_code == 0, shown.output
    assert "status:       dead" in shown.stdout
    assert f"dead letter:  jf dlq peek high --id {sent.id}" in shown.stdout
    assert f"jf dlq redrive high --id {sent.id}" in shown.stdout
    by_key = invoke(["status", "--key", sent.key], env)  # (one job of a key: in full, the hint too)
    assert f"dead letter:  jf dlq peek high --id {sent.id}" in by_key.stdout, by_key.output
    # The lane is the status's own (where its last run came from), without the catalog's hedge about
    # another priority (an operator's trial), and with JF_* variables only (no catalog) too.
    assert "enqueued at another priority" not in shown.stdout
    assert client.status(sent.id).lane == "high"
    no_catalog = invoke(["status", sent.id], cli_env(config))
    assert f"dead letter:  jf dlq peek high --id {sent.id}" in no_catalog.stdout, no_catalog.output
