"""`jf` through its real entry points: arguments, exit codes, one-line errors, enqueue, retry-plan, dev."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jobframework.local.aws import free_port
from jobframework.testing import receive_all
from tests.functional.conftest_local import cli_env, invoke, jf_aws, jf_config, sqs

__all__ = ["jf_aws", "jf_config", "sqs"]

JF = str(Path(sys.executable).with_name("jf"))


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JF_", "AWS_"))}
    env["JF_JOBS"] = "handlers.jobs"
    env.update(extra)
    return env


def start_jf_dev(port: int, *, stderr: int = subprocess.PIPE) -> tuple[subprocess.Popen[str], dict[str, str]]:
    """`jf dev --port PORT` as a subprocess, and the variables it printed (read up to its first schedule)."""
    proc = subprocess.Popen(
        [JF, "dev", "--port", str(port), "--jobs", "handlers.jobs"],
        env=_env({"POWERTOOLS_METRICS_DISABLED": "true", "POWERTOOLS_LOG_LEVEL": "WARNING"}),
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    )
    exports: dict[str, str] = {}
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("export "):
            name, _, value = line[len("export ") :].strip().partition("=")
            exports[name] = value
        if line.startswith("# schedule"):
            break
    return proc, exports


@pytest.mark.parametrize(
    "args",
    [
        ["dlq", "peek", "urgent"],
        ["dlq", "peek", "low", "-n", "zero"],
        ["dlq", "redrive", "low", "--older-than", "soon"],
        ["dlq", "purge", "low"],
        ["enqueue", "emails.send"],
        ["enqueue", "emails.send", "{not json"],
        ["worker", "--queues", "urgent"],
        ["no-such-command"],
    ],
)
def test_bad_arguments_give_one_line_and_exit_2(args):
    result = invoke(args, {"JF_ENDPOINT_URL": "http://127.0.0.1:9"})
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("jf: error: ")
    assert "Traceback" not in result.output


def test_unreachable_endpoint_is_one_line_and_exit_3_quickly():
    dead = f"http://127.0.0.1:{free_port()}"
    env = _env(
        {
            "AWS_ACCESS_KEY_ID": "x",
            "AWS_SECRET_ACCESS_KEY": "y",
            "AWS_DEFAULT_REGION": "us-east-1",
            "JF_ENDPOINT_URL": dead,
        }
    )
    for args in (["dlq", "ls"], ["enqueue", "emails.send", '{"to": "a@b.c", "subject": "x"}']):
        started = time.monotonic()
        proc = subprocess.run([JF, *args], check=False, env=env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 3, proc.stderr
        assert proc.stderr.count("\n") == 1
        assert proc.stderr.startswith("jf: error: cannot reach the AWS endpoint")
        assert time.monotonic() - started < 15


def test_unknown_job_and_bad_payload_are_one_line_errors(jf_config):
    env = cli_env(jf_config)
    unknown = invoke(["enqueue", "nope.nothing", "{}"], env)
    assert unknown.exit_code == 1
    assert "no job named 'nope.nothing'" in unknown.stderr
    bad = invoke(["enqueue", "emails.send", '{"to": "not-an-address"}'], env)
    assert bad.exit_code == 1
    assert "does not match Email" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_enqueue_prints_the_job_id(sqs, jf_config):
    env = cli_env(jf_config)
    result = invoke(["enqueue", "reports.generate", '{"report_id": "r-9"}'], env)
    assert result.exit_code == 0, result.output
    job_id = result.stdout.strip()
    detailed = invoke(
        [
            "enqueue",
            "emails.send",
            '{"to": "a@b.c", "subject": "s"}',
            "--key",
            "k-1",
            "--priority",
            "critical",
            "--json",
        ],
        env,
    )
    info = json.loads(detailed.stdout)
    assert info["key"] == "k-1" and info["priority"] == "critical"
    low = [json.loads(m["Body"]) for m in receive_all(sqs, jf_config.endpoints("low").url)]
    assert [(b["id"], b["key"]) for b in low] == [(job_id, "report:r-9")]
    critical = [json.loads(m["Body"]) for m in receive_all(sqs, jf_config.endpoints("critical").url)]
    assert [b["id"] for b in critical] == [info["id"]]


def test_retry_plan_as_json_and_table():
    result = invoke(["retry-plan", "webhooks.deliver", "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["max_attempts"] == 4
    assert [r["attempt"] for r in plan["retries"]] == [1, 2, 3]
    first = plan["retries"][0]
    assert first["delay_min"] == pytest.approx(0.7) and first["delay_max"] == pytest.approx(1.3)
    assert plan["retries"][-1]["cumulative_max"] >= plan["retries"][-1]["cumulative_min"]
    table = invoke(["retry-plan", "webhooks.deliver"])
    assert "webhooks.deliver: 4 attempts" in table.stdout


def test_every_command_has_help():
    for args in (
        ["--help"],
        ["demo", "--help"],
        ["dev", "--help"],
        ["worker", "--help"],
        ["enqueue", "--help"],
        ["retry-plan", "--help"],
        ["dlq", "--help"],
        ["dlq", "redrive", "--help"],
        ["dlq", "tasks", "--help"],
    ):
        result = invoke(args)
        assert result.exit_code == 0, (args, result.output)
        assert "Usage:" in result.stdout


def test_dev_prints_its_environment_and_runs_jobs_until_stopped():
    port = free_port()
    proc, exports = start_jf_dev(port, stderr=subprocess.PIPE)
    try:
        assert exports["JF_ENDPOINT_URL"] == f"http://127.0.0.1:{port}"
        assert exports["JF_TOPOLOGY_PARAMETER"] == "/jf/dev/topology"
        # Other jf commands reach it with what it printed (the SSM parameter gives the queues).
        env = _env(
            {k: v for k, v in exports.items() if not k.startswith("JF_QUEUE") and not k.startswith("JF_DLQ")}
        )
        sent = subprocess.run(
            [
                JF,
                "enqueue",
                "payments.capture",
                '{"order_id": "o", "amount_cents": 5, "card_token": "declined"}',
            ],
            check=False,
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert sent.returncode == 0, sent.stderr
        deadline = time.monotonic() + 15
        depth = 0
        while time.monotonic() < deadline and not depth:
            ls = subprocess.run(
                [JF, "dlq", "ls", "--json"], check=False, env=env, capture_output=True, text=True, timeout=30
            )
            depth = {r["priority"]: r["depth"] for r in json.loads(ls.stdout)}["high"]
            time.sleep(0.2)
        assert depth == 1  # the worker ran it and the consumer dead-lettered the declined card
        peek = subprocess.run(
            [JF, "dlq", "peek", "high", "--json"], check=False, env=env, capture_output=True, text=True
        )
        assert json.loads(peek.stdout)[0]["id"] == sent.stdout.strip()
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0
