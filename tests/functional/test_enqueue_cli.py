"""`jf enqueue` dedups a --key and delays up to a year; a producer without the job module enqueues by name
against `jf dev`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from jobframework.local.aws import free_port
from jobframework.testing import receive_all
from tests.functional.conftest_local import cli_env, invoke, jf_aws, jf_config, sqs

__all__ = ["jf_aws", "jf_config", "sqs"]

JF = str(Path(sys.executable).with_name("jf"))

JOB_MODULE = """
from pathlib import Path

from pydantic import BaseModel, Field

from jobframework import job


class Invoice(BaseModel):
    invoice_id: str = Field(min_length=1)
    amount_cents: int = Field(default=100, gt=0)


@job("invoices.render", priority="high")
def render(invoice: Invoice) -> None:
    Path(__file__).with_name(f"rendered-{invoice.invoice_id}").write_text(str(invoice.amount_cents))
"""

PRODUCER = """
import sys

from jobframework import JobClient
from jobframework.errors import PayloadValidationError

try:
    import mysvc_jobs  # noqa: F401
except ImportError:
    pass
else:
    sys.exit("the producer must not be able to import the job module")
client = JobClient()
print(client.enqueue("invoices.render", {"invoice_id": "inv-1"}).id)
try:
    client.enqueue("invoices.render", {"invoice_id": "inv-2", "amount_cents": 0})
except PayloadValidationError as exc:
    print(f"refused: {exc}")
"""


def test_enqueue_with_a_key_prints_the_first_id_again_and_sends_once(sqs, jf_config):
    env = cli_env(jf_config)
    args = ["enqueue", "reports.generate", '{"report_id": "r-1"}', "--key", "report:r-1"]
    first = invoke(args, env)
    again = invoke(args, env)
    assert first.exit_code == again.exit_code == 0, again.output
    assert again.stdout.strip() == first.stdout.strip()
    assert "was enqueued already as job" in again.stderr
    assert (
        "whatever became of that job" in again.stderr and "--dedup-window 0 sends it anyway" in again.stderr
    )
    forced = invoke([*args, "--dedup-window", "0", "--json"], env)
    info = json.loads(forced.stdout)
    assert info["duplicate"] is False and info["id"] != first.stdout.strip()
    low = [json.loads(m["Body"])["id"] for m in receive_all(sqs, jf_config.endpoints("low").url)]
    assert sorted(low) == sorted([first.stdout.strip(), info["id"]])


def test_a_payload_that_is_not_json_is_shown_how_to_quote_it_for_this_job(jf_config):
    result = invoke(["enqueue", "emails.send", "{to: me}"], cli_env(jf_config))
    assert result.exit_code == 2
    assert "the payload is not JSON" in result.output
    assert 'jf enqueue emails.send \'{"field": "value"}\'' in " ".join(result.output.split())


def test_enqueue_takes_the_flow_options_the_client_takes(sqs, jf_config):
    """--tenant, --track, --expires-in and --debounce reach the message as enqueue(...) would send them."""
    env = cli_env(jf_config)
    args = ["enqueue", "reports.generate", '{"report_id": "r-2"}', "--tenant", "acme", "--track"]
    sent = invoke([*args, "--expires-in", "10m", "--key", "report:r-2", "--debounce", "1s", "--json"], env)
    assert sent.exit_code == 0, sent.output
    job_id = json.loads(sent.stdout)["id"]
    status = invoke(["status", job_id, "--json"], env)
    assert json.loads(status.stdout)["status"] == "queued"  # tracked
    time.sleep(1.2)  # a debounced enqueue is delayed by its window
    [message] = receive_all(sqs, jf_config.endpoints("low").url)
    body = json.loads(message["Body"])
    assert message["Attributes"]["MessageGroupId"] == "acme"
    assert body["track"] is True and body["deadline"] and body["debounce"]["key"] == "report:r-2"
    bad = invoke([*args, "--expires-in", "soon"], env)
    assert bad.exit_code == 2 and "'soon' is not a duration" in bad.output
    assert "--expires-in" in bad.output and "e.g. 90s, 15m, 2h or 1d" in bad.output  # names the option


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--debounce", "0", "--key", "k"], "debounce must be more than 0"),
        (["--debounce", "2000", "--key", "k"], "at most 900 seconds"),
        (["--expires-in", "0"], "expires_in must be more than 0"),
        (["--debounce", "2", "--key", "k", "--delay", "5"], "do not pass delay= too"),
        (["--debounce", "2"], "needs key="),
        (["--delay", "10", "--expires-in", "5"], "could never run"),  # expired before its delay ends
        (["--tenant", "spaces are not allowed"], "tenant must be 1 to 128 letters"),  # it exited 1
        (["--tenant", "x" * 5000], "(5,000 characters)"),  # not echoed in full
    ],
)
def test_enqueue_options_that_cannot_be_are_bad_arguments(sqs, jf_config, options, message):
    args = ["enqueue", "emails.send", '{"to": "a@example.com", "subject": "x"}', *options]
    result = invoke(args, cli_env(jf_config))
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("jf: error: ") and message in result.stderr, result.stderr
    assert receive_all(sqs, jf_config.endpoints("high").url) == []  # nothing sent


def test_enqueue_takes_delays_up_to_a_year_as_the_client_does():
    help_text = " ".join(invoke(["enqueue", "--help"]).stdout.split())
    assert "up to a year, 31536000" in help_text and "15m" in help_text
    assert "--dedup-window" in help_text
    over = invoke(["enqueue", "reports.generate", "{}", "--delay", "31536001"])
    assert over.exit_code == 2 and "over the one-year limit (31,536,000 s, 365d)" in over.output
    year = invoke(["enqueue", "reports.generate", "{}", "--delay", "366d"])
    assert year.exit_code == 2 and "366d is over the one-year limit" in year.output
    bad = invoke(["enqueue", "reports.generate", "{}", "--delay", "soon"])
    assert bad.exit_code == 2 and "'soon' is not a duration" in bad.output  # (it was pydantic's words)
    for celery in ("--countdown", "--eta"):  # (a Celery user's: "No such option", no word of --delay)
        said = invoke(["enqueue", "reports.generate", "{}", celery, "30"])
        assert said.exit_code == 2 and "jf enqueue takes --delay" in said.output, said.output
        assert "--delay 30" in said.output and celery not in invoke(["enqueue", "--help"]).stdout


def test_enqueue_delay_takes_a_time_with_its_zone_to_run_at(jf_aws, jf_config):
    """The client takes an aware datetime (Celery's eta); so does --delay, as an ISO time."""
    from datetime import UTC, datetime, timedelta

    from jobframework.delays import due_time, schedule_name

    at = (datetime.now(UTC) + timedelta(hours=2)).replace(microsecond=0)
    stamp = at.isoformat().replace("+00:00", "Z")
    email = '{"to": "a@example.com", "subject": "later"}'
    sent = invoke(["enqueue", "emails.send", email, "--delay", stamp], cli_env(jf_config))
    assert sent.exit_code == 0, sent.output
    scheduler = jf_aws.client("scheduler")
    schedule = scheduler.get_schedule(Name=schedule_name(sent.stdout.strip()), GroupName="default")
    due = due_time(schedule["ScheduleExpression"])
    assert due is not None and abs((due - at).total_seconds()) < 60
    scheduler.delete_schedule(Name=schedule_name(sent.stdout.strip()), GroupName="default")
    naive = invoke(["enqueue", "emails.send", email, "--delay", "2027-01-31T09:00:00"], cli_env(jf_config))
    said = " ".join(naive.stderr.split())  # (it said "got datetime.datetime(2027, 1, 31, 9, 0)")
    assert naive.exit_code == 2 and "2027-01-31T09:00:00 has no time zone; give a time with its zone" in said
    assert "datetime.datetime" not in said
    garbled = invoke(["enqueue", "emails.send", email, "--delay", "2027-13-31T09:00Z"], cli_env(jf_config))
    assert garbled.exit_code == 2 and "is not an ISO time" in " ".join(garbled.stderr.split())


def test_a_json_list_is_not_a_payload_and_a_batched_jobs_items_go_one_at_a_time():
    result = invoke(["enqueue", "reports.generate", '[{"report_id": "r-1"}]'])
    assert result.exit_code == 2
    assert (
        "the payload must be a JSON object (a batched job's too: its items are enqueued one at a time)"
        in " ".join(result.stderr.split())
    )


def test_a_dedup_window_without_a_key_is_a_bad_argument_naming_the_option(sqs, jf_config):
    email = '{"to": "ada@example.com", "subject": "hi"}'
    result = invoke(["enqueue", "emails.send", email, "--dedup-window", "5"], cli_env(jf_config))
    assert result.exit_code == 2, result.output  # (it was 1: the operation failed)
    assert "needs a key: pass key= (jf enqueue --key)" in " ".join(result.stderr.split())
    assert receive_all(sqs, jf_config.endpoints("high").url) == []  # nothing sent


def test_an_unknown_priority_names_the_priorities_in_our_words():
    result = invoke(["enqueue", "reports.generate", "{}", "--priority", "urgent"])
    assert result.exit_code == 2
    assert "Invalid value for '--priority': 'urgent' is not one of 'critical', 'high'" in result.stderr
    assert "Value error" not in result.stderr  # (pydantic's prefix, through typer)


def _start_dev(tmp_path: Path, port: int) -> tuple[subprocess.Popen[str], dict[str, str]]:
    (tmp_path / "mysvc_jobs.py").write_text(JOB_MODULE)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("JF_", "AWS_"))}
    proc = subprocess.Popen(
        [JF, "dev", "--port", str(port), "--jobs", "mysvc_jobs"],
        cwd=tmp_path,
        env={**base, "POWERTOOLS_METRICS_DISABLED": "true", "POWERTOOLS_LOG_LEVEL": "WARNING"},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    exports: dict[str, str] = {}
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("export "):
            name, _, value = line[len("export ") :].strip().partition("=")
            exports[name] = value
            if name == "JF_JOBS":  # the last one it prints
                break
    return proc, {**base, **exports}


def test_a_producer_without_the_job_module_enqueues_by_name_against_jf_dev(tmp_path):
    port = free_port()
    (tmp_path / "service").mkdir()
    proc, env = _start_dev(tmp_path / "service", port)
    try:
        producer_env = {k: v for k, v in env.items() if k != "JF_JOBS"}  # a producer names no job module
        elsewhere = tmp_path / "producer"
        elsewhere.mkdir()
        ran = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(PRODUCER)],
            cwd=elsewhere,
            env=producer_env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert ran.returncode == 0, ran.stderr
        job_id, refused = ran.stdout.strip().splitlines()
        assert len(job_id) == 36
        assert refused.startswith("refused: payload for invoices.render does not match its schema")
        assert "amount_cents: must be bigger than 0" in refused

        cli = subprocess.run(
            [JF, "enqueue", "invoices.render", '{"amount_cents": 5}'],
            cwd=elsewhere,
            env=producer_env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert cli.returncode == 1
        assert cli.stderr.strip().splitlines() == [cli.stderr.strip()]
        assert "invoice_id: Field required" in cli.stderr

        # A shell that took every export of jf dev (JF_JOBS too) but cannot import the module.
        inherited = subprocess.run(
            [JF, "enqueue", "invoices.render", '{"invoice_id": "inv-3"}'],
            cwd=elsewhere,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert inherited.returncode == 0, inherited.stderr
        assert len(inherited.stdout.strip()) == 36
        assert "note: job module 'mysvc_jobs' not found" in inherited.stderr
        assert "the topology's job catalog" in inherited.stderr

        rendered = tmp_path / "service" / "rendered-inv-1"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not rendered.exists():
            time.sleep(0.2)
        assert rendered.read_text() == "100"  # jf dev's worker ran it, with the schema's default
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        finally:
            if proc.poll() is None:
                proc.kill()


def test_enqueue_with_the_jobs_module_checks_the_payload_before_any_aws_call():
    """A trial's `jf enqueue` of a payload missing a field, with JF_JOBS set and jf dev stopped, said
    only that the endpoint could not be reached: the field comes first."""
    import handlers.jobs  # noqa: F401  (the example jobs, registered)

    dead = {
        "JF_TOPOLOGY_PARAMETER": "/jf/dev/topology",
        "JF_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }
    said = invoke(["enqueue", "emails.send", '{"to": "a@example.com"}'], dead)
    assert said.exit_code == 1, said.output
    assert "subject: Field required" in said.stderr and "reach" not in said.stderr, said.stderr
    version = invoke(["enqueue", "emails.send", '{"to": "a@example.com"}', "--payload-version", "9"], dead)
    assert version.exit_code == 2 and "payload_version must be a whole number" in version.stderr


def _consumer_for_one(handler: Any, sqs: Any, url: str) -> Any:
    """A thread that polls ``url`` (as Lambda's mapping would) until it handled one record, 30 s at
    most: a single poll half a second on could come before a slow CLI process had sent its job."""
    import threading

    from jobframework.testing import consume_once

    def poll() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not consume_once(handler, sqs, url)[0]:
            time.sleep(0.1)

    thread = threading.Thread(target=poll)
    thread.start()
    return thread


def test_enqueue_wait_prints_how_the_job_ended_and_exits_1_unless_it_succeeded(sqs, jf_config):
    """A script's "enqueue and wait" (helper-67 wished for `jf enqueue --wait`): the client had wait()."""

    from jobframework.consumer import consumer
    from jobframework.jobs import registry

    env, email = cli_env(jf_config), '{"to": "a@example.com", "subject": "x"}'
    handler = consumer(registry, config=jf_config, sqs_client=sqs)
    running = _consumer_for_one(handler, sqs, jf_config.endpoints("high").url)
    try:
        done = invoke(["enqueue", "emails.send", email, "--wait", "30"], env)
    finally:
        running.join()
    assert done.exit_code == 0, done.output
    job_id, ended = done.stdout.splitlines()[:2]
    assert ended == "succeeded after 1 attempt" and len(job_id) == 36
    late = invoke(["enqueue", "emails.send", email, "--wait", "0.3", "--json"], env)
    assert late.exit_code == 1 and json.loads(late.stdout)["ended"] is None, late.output
    assert json.loads(late.stdout)["status"]["status"] == "queued"  # (only stderr said it)
    assert "has not ended after 0.3 s: it is queued" in late.stderr
    untracked = invoke(["enqueue", "emails.send", email, "--wait", "5", "--no-track"], env)
    assert untracked.exit_code == 2 and "--wait reads the job's status" in untracked.output


def test_enqueue_wait_of_a_duplicate_says_it_did_not_run(sqs, jf_config):
    """An on-call trial's "enqueue it again" of a keyed job read "succeeded after 1 attempt", exit 0,
    though the consumer skipped it as its key's duplicate."""

    from jobframework.consumer import consumer
    from jobframework.jobs import registry

    env, email = cli_env(jf_config), '{"to": "k@example.com", "subject": "x"}'
    handler = consumer(registry, config=jf_config, sqs_client=sqs)
    for expected in ("succeeded after 1 attempt", "not run: a duplicate"):
        running = _consumer_for_one(handler, sqs, jf_config.endpoints("high").url)
        try:
            args = [
                "enqueue",
                "emails.send",
                email,
                "--key",
                "mail:k-1",
                "--dedup-window",
                "0",
                "--wait",
                "30",
            ]
            done = invoke(args, env)
        finally:
            running.join()
        assert done.exit_code == 0, done.output
        assert done.stdout.splitlines()[1].startswith(expected), done.stdout
    assert "to run the work again, enqueue a payload whose key differs" in done.stdout


def test_enqueue_many_sends_a_file_of_payloads_and_its_keys_dedup_a_second_run(sqs, jf_config, tmp_path):
    """A data team's backfill from a script: one job a line, ten to a request, each key once."""
    env = cli_env(jf_config)
    lines = [json.dumps({"report_id": f"r-{n}"}) for n in range(23)]
    (tmp_path / "reports.jsonl").write_text("\n".join(lines[:12]) + "\n\n" + "\n".join(lines[12:]) + "\n")
    args = ["enqueue-many", "reports.generate", "--dedup-window", "3600"]
    first = invoke([*args, str(tmp_path / "reports.jsonl")], env)
    assert first.exit_code == 0, first.output
    ids = first.stdout.split()
    assert len(ids) == 23 and "jf: enqueued 23 reports.generate jobs" in first.stderr
    again = invoke([*args, "-", "--json"], env, stdin="\n".join(lines[20:]))
    said = json.loads(again.stdout)
    assert [(s["line"], s["duplicate"], s["id"]) for s in said] == [
        (n + 1, True, ids[20 + n]) for n in range(3)
    ]
    assert "jf: enqueued 0 reports.generate jobs; 3 duplicates" in again.stderr
    sent = [json.loads(m["Body"])["id"] for m in receive_all(sqs, jf_config.endpoints("low").url)]
    assert sorted(sent) == sorted(ids)


def test_enqueue_many_sends_nothing_when_a_line_is_wrong(sqs, jf_config, tmp_path):
    env = cli_env(jf_config)
    path = tmp_path / "bad.jsonl"
    path.write_text('{"report_id": "r-1"}\n{"report_id": 7}\n')
    refused = invoke(["enqueue-many", "reports.generate", str(path)], env)
    assert refused.exit_code == 1 and "line 2 of" in refused.stderr and "nothing was sent" in refused.stderr
    path.write_text('{"report_id": "r-1"}\n[1, 2]\n')
    not_object = invoke(["enqueue-many", "reports.generate", str(path)], env)
    assert not_object.exit_code == 2 and "line 2 is not a JSON object" in not_object.output
    assert receive_all(sqs, jf_config.endpoints("low").url) == []
