"""`jf` through its real entry points: arguments, exit codes, one-line errors, enqueue, retry-plan, dev."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import boto3
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


def start_jf_dev(
    port: int, *, stderr: int = subprocess.PIPE, args: tuple[str, ...] = ()
) -> tuple[subprocess.Popen[str], dict[str, str]]:
    """`jf dev --port PORT` as a subprocess, and the variables it printed (read up to its ready line;
    its ``#`` comment lines under the key ``"#"``)."""
    proc = subprocess.Popen(
        [JF, "dev", "--port", str(port), "--jobs", "handlers.jobs", *args],
        env=_env({"POWERTOOLS_LOG_LEVEL": "WARNING"}),
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    )
    exports: dict[str, str] = {}
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("#"):
            exports["#"] = exports.get("#", "") + line
        if line.startswith("export "):
            name, _, value = line[len("export ") :].strip().partition("=")
            exports[name] = value
        if line.startswith("# ready"):
            break
        if line.startswith('{"event": "ready"'):  # jf dev --json: the exports are its env
            exports.update(json.loads(line)["env"])
            break
    return proc, exports


def stop_jf_dev(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """Ctrl-C `jf dev`; the rest of its stdout and its stderr."""
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    return out, err


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


@pytest.mark.parametrize("command", ["dev", "worker"])
def test_dev_and_worker_without_job_modules_are_bad_arguments(command):
    result = invoke([command], {"JF_JOBS": ""})
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("jf: error: no job modules named: set JF_JOBS"), result.stderr
    assert f"jf {command} --jobs mysvc.jobs" in result.stderr  # how to give them to this command


def test_dev_reload_exclude_without_reload_is_a_bad_argument():
    """It was ignored: a user who meant --reload saw no reloads and no word of why."""
    result = invoke(["dev", "--jobs", "handlers.jobs", "--reload-exclude", "scripts/*"], {})
    assert result.exit_code == 2, result.output
    assert "--reload-exclude tells --reload what to leave out: add --reload" in result.stderr


def test_jf_demo_outside_a_checkout_says_so_before_its_banner(tmp_path):
    """From a wheel there are no example jobs: a trial saw the banner promise a demo, then the error."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(
        [JF, "demo"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 1, result
    assert result.stdout == "", result.stdout
    assert result.stderr.startswith("jf: error: jf demo runs the example jobs of a jobframework checkout")


def test_an_option_of_jf_itself_after_the_command_says_to_put_it_first():
    result = invoke(["enqueue", "emails.send", "{}", "--endpoint-url", "http://127.0.0.1:9"], {})
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == (
        "jf: error: No such option: --endpoint-url; --endpoint-url is an option of jf itself: put it "
        "first (jf --endpoint-url ... enqueue)"
    )


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
    # A job this process does not import is looked up in the stack's catalog (the SSM parameter): an
    # unreachable endpoint there is said as such too, not as an unknown job (exit 1).
    # (The queues come from variables, as `jf dev` exports them: only the catalog is read.)
    catalog = {
        **env,
        "JF_TOPOLOGY_PARAMETER": "/jf/dev/topology",
        "JF_QUEUE_URL_DEFAULT": f"{dead}/123456789012/jf-dev-default",
        "JF_DLQ_URL_DEFAULT": f"{dead}/123456789012/jf-dev-default-dlq",
    }
    for args, with_env in (
        (["dlq", "ls"], env),
        (["enqueue", "emails.send", '{"to": "a@b.c", "subject": "x"}'], env),
        (["enqueue", "ops.hello", '{"name": "x"}'], catalog),
    ):
        started = time.monotonic()
        proc = subprocess.run(
            [JF, *args], check=False, env=with_env, capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 3, proc.stderr
        assert proc.stderr.count("\n") == 1
        assert proc.stderr.startswith("jf: error: cannot reach the AWS endpoint")
        assert time.monotonic() - started < 15


def test_an_unreachable_aws_endpoint_without_jf_dev_exports_hints_at_them(monkeypatch):
    """(The error is made here, not met: no test reaches a real AWS endpoint.)"""
    from botocore.exceptions import EndpointConnectionError

    from jobframework.cli.errors import EXIT_UNREACHABLE, describe_failure

    aws = EndpointConnectionError(endpoint_url="https://ssm.us-east-1.amazonaws.com/")
    monkeypatch.delenv("JF_ENDPOINT_URL", raising=False)
    message, code = describe_failure(aws)
    assert code == EXIT_UNREACHABLE and "paste the export lines" in message and "ssm.us-east-1" in message
    monkeypatch.setenv("JF_ENDPOINT_URL", "http://127.0.0.1:4566")  # aimed at jf dev: no such hint
    assert "paste" not in describe_failure(aws)[0]
    local = EndpointConnectionError(endpoint_url="http://127.0.0.1:4566/")
    monkeypatch.delenv("JF_ENDPOINT_URL")
    assert "paste" not in describe_failure(local)[0]


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


def test_enqueue_reads_the_payload_from_a_file_or_stdin(sqs, jf_config, tmp_path):
    env = cli_env(jf_config)
    (tmp_path / "report.json").write_text('{"report_id": "from-file"}')
    from_file = invoke(["enqueue", "reports.generate", f"@{tmp_path / 'report.json'}"], env)
    from_stdin = invoke(["enqueue", "reports.generate", "-"], env, stdin='{"report_id": "from-stdin"}')
    assert from_file.exit_code == 0 and from_stdin.exit_code == 0, from_file.output + from_stdin.output
    low = [json.loads(m["Body"]) for m in receive_all(sqs, jf_config.endpoints("low").url)]
    assert sorted(b["payload"]["report_id"] for b in low) == ["from-file", "from-stdin"]
    missing = invoke(["enqueue", "reports.generate", f"@{tmp_path / 'nope.json'}"], env)
    assert missing.exit_code == 2 and "cannot read the payload from" in missing.stderr


def test_enqueue_refuses_an_empty_key_and_a_payload_version_past_the_jobs(jf_config):
    env = cli_env(jf_config)
    empty = invoke(["enqueue", "reports.generate", '{"report_id": "r"}', "--key", ""], env)
    assert empty.exit_code == 2 and "a key has 1 to 1024 characters" in empty.stderr
    newer = invoke(["enqueue", "reports.generate", '{"report_id": "r"}', "--payload-version", "2"], env)
    assert newer.exit_code == 2 and "payload_version must be a whole number from 1 to" in newer.stderr


def test_retry_plan_as_json_and_table():
    result = invoke(["retry-plan", "webhooks.deliver", "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)
    assert plan["max_attempts"] == 4
    assert [r["attempt"] for r in plan["retries"]] == [1, 2, 3]
    first = plan["retries"][0]
    # 0.7 s to 1.3 s of jitter, as the consumer hides the message: whole seconds, rounded up
    assert (first["delay_min"], first["delay_max"]) == (1, 2)
    assert plan["retries"][-1]["cumulative_max"] >= plan["retries"][-1]["cumulative_min"]
    table = invoke(["retry-plan", "webhooks.deliver"])
    assert "webhooks.deliver: 4 attempts" in table.stdout
    assert "1 s - 2 s" in table.stdout and "rounded up to whole seconds" in table.stdout  # not "1.0s"
    assert "RetryableError(delay=N)" in " ".join(table.stdout.split())  # (the caption may wrap)
    # An on-call trial's outage: most jobs dead-lettered `budget` at attempt 1, which the plan never said
    said = " ".join(table.stdout.split())
    assert "Each retry also needs room in the default queue's retry budget" in said, said
    assert plan["retry_budget"]["budget"] == "default" and plan["retry_budget"]["fraction"] == 0.2
    assert "dead-lettered (reason budget) at once" in plan["retry_budget"]["note"]
    off = json.loads(invoke(["retry-plan", "webhooks.deliver", "--json"], {"JF_RETRY_BUDGET": "off"}).stdout)
    assert off["retry_budget"] == {
        "budget": None,
        "note": "No retry budget (JF_RETRY_BUDGET=off): every attempt above is made.",
    }
    typo = invoke(["retry-plan", "webhooks.delivr"])  # (it listed every job, no word of the close one)
    assert typo.exit_code == 1, typo.output
    assert "(did you mean 'webhooks.deliver'?)" in typo.stderr, typo.output


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
        # The retry budget, which two trials testing retries met unawares, is said before the jobs run.
        assert "# retry budget: 20 % of first attempts, at least 100 retries in 5 min a queue" in exports["#"]
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


def test_dev_without_workers_leaves_the_queues_to_jf_worker():
    """``jf dev --no-workers``: the embedded AWS and the schedules only, so that ``jf worker`` (what a
    container lane's task runs) can be tried against it; with workers, jf dev would take the jobs first."""
    port = free_port()
    proc, exports = start_jf_dev(port, args=("--no-workers",))
    worker: subprocess.Popen[str] | None = None
    try:
        env = _shell_env(exports)
        declined = '{"order_id": "o", "amount_cents": 5, "card_token": "declined"}'
        job_id = _enqueue(env, "payments.capture", declined)

        def lanes() -> dict[str, dict[str, int]]:
            ls = subprocess.run(
                [JF, "queue", "ls", "--json"],
                check=False,
                env=env,
                capture_output=True,
                text=True,
                timeout=30,
            )
            assert ls.returncode == 0, ls.stderr
            return {r["lane"]: r for r in json.loads(ls.stdout)}

        time.sleep(1.5)  # jf dev with its workers dead-letters it well within this
        assert (lanes()["high"]["depth"], lanes()["high"]["in_flight"]) == (1, 0)
        worker = subprocess.Popen(
            [JF, "worker", "--queues", "high", "--exact-lanes"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        deadline, dead = time.monotonic() + 20, []
        while time.monotonic() < deadline and not dead:
            peek = subprocess.run(
                [JF, "dlq", "peek", "high", "--json"], check=False, env=env, capture_output=True, text=True
            )
            dead = json.loads(peek.stdout) if peek.returncode == 0 else []
            time.sleep(0.3)
        assert [d["id"] for d in dead] == [job_id]  # jf worker ran it (a declined card: dead-lettered)
    finally:
        if worker is not None:
            worker.send_signal(signal.SIGTERM)
            try:
                worker.wait(timeout=30)
            finally:
                if worker.poll() is None:
                    worker.kill()
        out, _ = stop_jf_dev(proc)
    assert "succeeded" not in out and "dead-lettered" not in out  # no outcome line: it ran no job
    last = out.strip().splitlines()[-1]
    assert last == "jf dev: stopped (no workers); gone with the embedded AWS: 1 dead letter", last


def _lines_until(proc: subprocess.Popen[str], done, timeout: float = 30.0) -> list[str]:
    """Read `jf dev`'s stdout (in a thread) until ``done(lines)`` or the timeout; the lines read."""
    lines: list[str] = []
    assert proc.stdout is not None
    stream = proc.stdout

    def read() -> None:
        for line in stream:
            lines.append(line.rstrip("\n"))

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not done(lines):
        time.sleep(0.1)
    return lines


def _enqueue(env: dict[str, str], job_type: str, payload: str) -> str:
    sent = subprocess.run(
        [JF, "enqueue", job_type, payload], check=False, env=env, capture_output=True, text=True, timeout=30
    )
    assert sent.returncode == 0, sent.stderr
    return sent.stdout.strip()


def _shell_env(exports: dict[str, str]) -> dict[str, str]:
    return _env({k: v for k, v in exports.items() if not k.startswith(("JF_QUEUE", "JF_DLQ"))})


def test_dev_is_quiet_when_idle_and_prints_one_readable_line_per_outcome():
    proc, exports = start_jf_dev(free_port())
    try:
        time.sleep(4)  # idle: the pollers long-poll; nothing may warn
        env = _shell_env(exports)
        ok = _enqueue(env, "emails.send", '{"to": "a@example.com", "subject": "hi"}')
        declined = _enqueue(
            env, "payments.capture", '{"order_id": "o", "amount_cents": 5, "card_token": "declined"}'
        )
        sqs = boto3.client("sqs", endpoint_url=exports["JF_ENDPOINT_URL"], region_name="us-east-1")
        sqs.send_message(QueueUrl=exports["JF_QUEUE_URL_DEFAULT"], MessageBody="{not json")
        poison = _enqueue(env, "reports.generate", '{"report_id": "poison"}')  # raises, 3 attempts
        lines = _lines_until(proc, lambda ls: sum("dead-lettered" in x for x in ls) >= 3)
    finally:
        rest, stderr = stop_jf_dev(proc)
    lines += rest.splitlines()
    assert "WARNING" not in stderr and "Connection pool" not in stderr, stderr
    assert not [x for x in lines if x.startswith("{") or "_aws" in x], lines  # no JSON, no EMF blob
    (done,) = [x for x in lines if ok in x]
    assert re.search(rf"succeeded +emails\.send +{ok} +high +attempt 1 +[\d,]+ ms$", done), done
    (dead,) = [x for x in lines if declined in x]
    assert re.search(rf"dead-lettered +payments\.capture +{declined} .*permanent: PermanentError", dead)
    (malformed,) = [x for x in lines if "malformed" in x]
    assert re.search(
        r"dead-lettered +\(no job type\) +message \S+ +default .*malformed: body is not JSON", malformed
    )
    assert not [x for x in lines if "WARNING" in x], lines
    first, second, last = [i for i, x in enumerate(lines) if poison in x]
    assert re.search(
        rf"retry in \d+s +reports\.generate +{poison} +low +attempt 1 .*ZeroDivisionError", lines[first]
    )
    # where the job raised, under its line (the framework's frames left out)
    assert lines[first + 1].startswith("    at handlers/jobs.py:"), lines[first : first + 3]
    assert "attempt 2" in lines[second]
    assert re.search(r"dead-lettered .* attempt 3 .*exhausted: ZeroDivisionError", lines[last])


def test_dev_json_prints_json_lines_with_each_outcome():
    proc, exports = start_jf_dev(free_port(), args=("--json",))
    try:
        declined = _enqueue(
            _shell_env(exports),
            "payments.capture",
            '{"order_id": "o", "amount_cents": 5, "card_token": "declined"}',
        )
        lines = _lines_until(proc, lambda ls: any('"outcome"' in x for x in ls))
    finally:
        rest, _ = stop_jf_dev(proc)
    records = [json.loads(x) for x in [*lines, *rest.splitlines()] if x.strip()]
    (outcome,) = [r for r in records if "outcome" in r]
    assert outcome["job_id"] == declined
    assert (outcome["outcome"], outcome["reason"], outcome["job_type"]) == (
        "dead_lettered",
        "permanent",
        "payments.capture",
    )
    assert not [r for r in records if "_aws" in r]  # EMF stays off the console


@pytest.mark.parametrize(
    "name",
    [
        "jobframework.local.console",
        "jobframework.local.demo_summary",
        "jobframework.local.banner",
        "jobframework.local.handbacks",
    ],
)
def test_console_docstring_examples(name):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0
    assert result.failed == 0


def test_dev_on_a_port_in_use_says_so_and_exits():
    """Another program on the port: one line and exit 1, not a hang (moto's server thread would wait)."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [JF, "dev", "--port", str(port), "--jobs", "handlers.jobs"],
            check=False,
            env=_env({}),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 2, result.stderr  # a bad --port, as jf ui says it
    assert f"on 127.0.0.1:{port}: port {port} is in use by another program (stop it" in result.stderr


def test_the_topologys_warnings_print_as_jf_warning_lines(tmp_path):
    """The last trial's `jf schedules` printed Python's `.../topology.py:231: UserWarning: ...` and the
    source line beneath it, unlike the CLI's own `jf: warning:` lines."""
    import subprocess
    import sys
    import textwrap

    (tmp_path / "nightly_jobs.py").write_text(
        textwrap.dedent(
            """
            from pydantic import BaseModel
            from jobframework import job

            class Day(BaseModel):
                day: str = "today"

            @job("w.nightly", timeout=600, schedule="cron(0 2 * * ? *)")
            def nightly(d: Day) -> None: ...

            @job("w.email", priority="high")
            def email(d: Day) -> None: ...
            """
        )
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("JF_")}
    env.update(
        PYTHONPATH=str(tmp_path),
        JF_ENDPOINT_URL="http://127.0.0.1:9",
        JF_TOPOLOGY_PARAMETER="/jf/dev/topology",
    )
    ran = subprocess.run(
        [
            sys.executable,
            "-c",
            "from jobframework.cli import main; main()",
            "schedules",
            "--jobs",
            "nightly_jobs",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    warned = [line for line in ran.stderr.splitlines() if "sizes the shared consumer" in line]
    assert len(warned) == 1 and warned[0].startswith("jf: warning: the default lane (w.nightly"), ran.stderr
    assert "UserWarning" not in ran.stderr and "warnings.warn" not in ran.stderr
