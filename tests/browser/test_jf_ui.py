"""`jf ui` as a command, and the console's pure parts (no browser needed)."""

from __future__ import annotations

import doctest
import importlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from jobframework.jobs import Priority
from jobframework.local.aws import free_port
from jobframework.scheduling import schedule_key
from jobframework.state import JobState
from jobframework.topology import ScheduleSpec
from jobframework.ui.schedule_runs import schedule_runs, slot_stamp
from tests.browser.harness import Shop

JF = os.path.join(os.path.dirname(sys.executable), "jf")


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _request(url: str, *, method: str = "GET", headers: dict[str, str] | None = None) -> tuple[int, str]:
    req = urllib.request.Request(
        url, method=method, headers=headers or {}, data=b"" if method == "POST" else None
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _start_ui(the_shop: Shop, *, sigint_ignored: bool = False) -> tuple[subprocess.Popen[str], int, str]:
    """``jf ui --read-only`` against the shop, listening; its process, port and first line
    (``sigint_ignored``: as a shell starts a job in the background)."""
    port = free_port()
    env = {
        **os.environ,
        **the_shop.config.to_env(),
        "JF_TOPOLOGY_PARAMETER": str(the_shop.config.topology_parameter),  # (as jf dev's exports)
        "JF_JOBS": "handlers.jobs",
        "POWERTOOLS_METRICS_DISABLED": "true",
    }
    # (a shell's trap '' INT is inherited through exec: SIGINT ignored, as in a background job)
    shell = ["sh", "-c", 'trap "" INT; exec "$0" "$@"'] if sigint_ignored else []
    proc = subprocess.Popen(
        [*shell, JF, "ui", "--port", str(port), "--read-only"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    deadline = time.monotonic() + 20
    while not _listening(port):
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else "jf ui exited"
        assert time.monotonic() < deadline, "jf ui did not start listening"
        time.sleep(0.05)
    return proc, port, first


@pytest.fixture
def jf_ui(the_shop: Shop) -> Any:
    proc, port, first = _start_ui(the_shop)
    try:
        yield port, first
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.parametrize(
    ("sig", "sigint_ignored"), [(signal.SIGTERM, False), (signal.SIGINT, False), (signal.SIGINT, True)]
)
def test_jf_ui_says_it_stopped_and_what_it_did(the_shop: Shop, sig: signal.Signals, sigint_ignored: bool):
    """An operator's trial: jf ui ended without a word (jf dev and jf worker print a stop line); then,
    started in the background (SIGINT ignored until uvicorn listens), a SIGINT read "its server ended"."""
    proc, port, _ = _start_ui(the_shop, sigint_ignored=sigint_ignored)
    try:
        status, _ = _request(f"http://127.0.0.1:{port}/dlq/high/purge", method="POST")
        assert status == 403  # (read-only, and no token: refused, and counted)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 0, err
    last = out.splitlines()[-1]
    said = rf"jf ui: stopped \({sig.name}\) after [\d.]+( ms|s); 0 actions, 1 request refused"
    assert re.fullmatch(said, last), last


def test_jf_ui_serves_the_console_on_loopback_with_the_jobs_loaded(jf_ui: Any, the_shop: Shop):
    port, first = jf_ui
    assert first.startswith(f"jf ui: http://127.0.0.1:{port}/ (read-only;")
    assert "jobs from handlers.jobs" in first
    status, body = _request(f"http://127.0.0.1:{port}/retry-plans")
    assert status == 200
    assert "payments.capture" in body and "read-only" in body
    # The app and stage it reads, beside the brand and in the title (a trial's app read "jf").
    where = str(the_shop.config.topology_parameter).removeprefix("/").removesuffix("/topology")
    assert f'jf console · <span id="deployment">{where}</span>' in body
    assert f"· {where}</title>" in body
    status, body = _request(
        f"http://127.0.0.1:{port}/dlq/high/purge",
        method="POST",
        headers={"Origin": f"http://127.0.0.1:{port}"},
    )
    assert status == 403 and "read-only" in body


def test_a_host_name_the_console_does_not_know_is_refused(jf_ui: Any):
    """DNS rebinding: a page of evil.example resolving to 127.0.0.1 reads nothing."""
    port, _ = jf_ui
    status, _ = _request(f"http://127.0.0.1:{port}/", headers={"Host": f"evil.example:{port}"})
    assert status == 400


def test_jf_ui_says_when_the_endpoint_cannot_be_reached():
    dead = f"http://127.0.0.1:{free_port()}"
    env = {
        **os.environ,
        "JF_QUEUE_URL_HIGH": f"{dead}/123456789012/q",
        "JF_DLQ_URL_HIGH": f"{dead}/123456789012/q-dlq",
        "JF_ENDPOINT_URL": dead,
    }
    env.pop("JF_JOBS", None)
    done = subprocess.run(
        [JF, "ui", "--port", str(free_port())],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 3
    assert done.stderr.startswith("jf: error: cannot reach the AWS endpoint")
    assert "Traceback" not in done.stderr


def test_a_page_whose_table_is_not_there_says_the_exports_may_be_an_earlier_jf_devs(monkeypatch):
    """A trial restarted jf dev with another --app: the console's pages said only "AWS refused the
    request: ResourceNotFoundException", where the CLI says what to do."""
    from botocore.exceptions import ClientError

    from jobframework.ui.app import describe_error

    monkeypatch.setenv("JF_ENDPOINT_URL", "http://127.0.0.1:4566")
    gone = ClientError(
        {"Error": {"Code": "ResourceNotFoundException", "Message": "Requested resource not found"}}, "Query"
    )
    status, line = describe_error(gone)
    assert status == 502 and line.startswith("AWS refused the request: ResourceNotFoundException")
    assert "may be from an earlier `jf dev` with another --app or --stage" in line


def test_jf_ui_on_a_taken_port_says_so_in_one_line_before_announcing_anything(the_shop: Shop):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [JF, "ui", "--port", str(port)],
            check=False,
            env={**os.environ, **the_shop.config.to_env()},
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 2  # a bad argument, as docs/cli.md's exit codes say
    assert done.stdout == ""
    assert done.stderr == (
        f"jf: error: cannot listen on 127.0.0.1:{port}: port {port} is in use by another program "
        "(stop it, or pick another with --port)\n"
    )


@pytest.mark.parametrize(
    "name", ["jobframework.ui.security", "jobframework.ui.templating", "jobframework.ui.schedule_runs"]
)
def test_docstring_examples(name: str):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0


def _runs(shop: Shop, job: str, slots: list[datetime], state: JobState = JobState.SUCCEEDED) -> None:
    store = shop.console().require_store()
    for slot in slots:
        store.jobs.set_status(str(uuid.uuid4()), state, job_type=job, key=schedule_key(job, slot_stamp(slot)))


def _spec(job: str, expression: str) -> ScheduleSpec:
    return ScheduleSpec(
        job=job, name=job, expression=expression, timezone="UTC", payload={}, priority=Priority.LOW
    )


def test_missed_runs_of_a_cron_schedule_are_its_slots_without_a_run(the_shop: Shop):
    job = f"t.cron{uuid.uuid4().hex[:6]}"
    now = datetime(2026, 12, 3, 12, 30, tzinfo=UTC)
    slots = [now.replace(minute=0) - timedelta(hours=h) for h in (5, 4, 3, 2, 1, 0)]
    _runs(the_shop, job, [s for s in slots if s != slots[2]])
    view = schedule_runs(the_shop.console().require_store(), _spec(job, "cron(0 * * * ? *)"), now=now)
    assert view.missed == [slots[2]]
    assert view.expected == 6
    assert view.heartbeat is not None and view.next_slot == now.replace(minute=0) + timedelta(hours=1)


def test_missed_runs_of_a_rate_schedule_are_anchored_on_its_runs(the_shop: Shop):
    job = f"t.rate{uuid.uuid4().hex[:6]}"
    now = datetime(2026, 12, 3, 12, 30, tzinfo=UTC)
    anchor = now - timedelta(minutes=13)
    slots = [anchor - timedelta(hours=h) for h in range(4)]
    _runs(the_shop, job, [slots[0], slots[1], slots[3]])
    _runs(the_shop, job, [anchor - timedelta(hours=5)], JobState.DEAD)
    view = schedule_runs(the_shop.console().require_store(), _spec(job, "rate(1 hour)"), now=now)
    assert view.missed == [anchor - timedelta(hours=4), slots[2]]
    assert view.last_run is not None and view.last_run.status is JobState.SUCCEEDED
    assert view.heartbeat is not None


def test_a_rate_schedule_shows_its_interval_not_a_next_time_counted_from_now(the_shop: Shop):
    """It fires at its interval from its creation (``:37`` each minute), which the runs do not tell."""
    job = f"t.rate{uuid.uuid4().hex[:6]}"
    now = datetime(2026, 12, 3, 8, 49, 20, tzinfo=UTC)
    _runs(the_shop, job, [now.replace(second=37) - timedelta(minutes=m) for m in (1, 2, 3)])
    view = schedule_runs(the_shop.console().require_store(), _spec(job, "rate(1 minute)"), now=now)
    assert view.next_slot is None
    assert view.every == "every 1 minute"
    assert view.missed == []


def test_a_schedule_with_no_run_recorded_has_nothing_missed(the_shop: Shop):
    view = schedule_runs(the_shop.console().require_store(), _spec("t.never", "cron(* * * * ? *)"))
    assert view.runs == [] and view.missed == [] and view.last_run is None


def test_age_of_oldest_comes_from_cloudwatch_and_a_refused_read_is_unknown(the_shop: Shop, jf_aws: Any):
    from botocore.exceptions import ClientError

    from jobframework.ui.pages.overview import oldest_age

    cloudwatch = jf_aws.client("cloudwatch")
    name = the_shop.config.endpoints("low").name
    cloudwatch.put_metric_data(
        Namespace="AWS/SQS",
        MetricData=[
            {
                "MetricName": "ApproximateAgeOfOldestMessage",
                "Dimensions": [{"Name": "QueueName", "Value": name}],
                "Value": 42.0,
                "Unit": "Seconds",
            }
        ],
    )
    console = the_shop.console()
    console.cloudwatch = cloudwatch
    assert oldest_age(console, name) == 42.0

    def refuse(**_: Any) -> None:
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, "GetMetricStatistics")

    cloudwatch.meta.events.register("before-call.cloudwatch.GetMetricStatistics", refuse)
    assert oldest_age(console, name) is None
