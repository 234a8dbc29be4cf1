"""The consumer's own log lines where the stack deploys it: ``POWERTOOLS_SERVICE_NAME`` is the app's
name, and the Lambda runtime has put a plain-text handler on the root logger. The framework's lines are
JSON of the app's service with the job's keys, once (not a second, plain copy through the root), and its
INFO lines are not lost."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


def _run(script: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in a fresh interpreter as a deployed consumer would, with none of this process's
    ``POWERTOOLS_``/``JF_`` settings but ``env``'s."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("POWERTOOLS_", "JF_"))}
    return subprocess.run(
        [sys.executable, "-c", script],
        env=clean | env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )


SCRIPT = """
import logging, sys
logging.basicConfig(stream=sys.stderr, level=logging.WARNING)  # the Lambda runtime's root handler
from pydantic import BaseModel
from jobframework.envelope import Envelope
from jobframework.jobs import JobRegistry, job
from jobframework.testing import FakeLambdaContext, in_memory_consumer, sqs_event


class Order(BaseModel):
    order_id: str


registry = JobRegistry()


@job("orders.charge", registry=registry, idempotent=False)
def charge(order: Order) -> None:
    raise RuntimeError("card service down")


handler, _ = in_memory_consumer(registry)
handler(sqs_event(Envelope.new("orders.charge", {"order_id": "o-1"})), FakeLambdaContext())
print("info on:", logging.getLogger("jobframework.consumer").isEnabledFor(logging.INFO))
"""


def test_the_framework_lines_are_json_of_the_apps_service_with_the_jobs_keys_once():
    done = _run(SCRIPT, POWERTOOLS_SERVICE_NAME="orders", JF_METRICS_DISABLED="true")
    lines = done.stdout.splitlines()
    assert lines[-1] == "info on: True"  # the level of the Logger (INFO), not the root's (WARNING)
    retry = next(json.loads(line) for line in lines if "attempt 1/3 failed" in line)
    assert retry["service"] == "orders" and retry["level"] == "ERROR"
    assert retry["job_type"] == "orders.charge" and retry["job_id"]
    assert "attempt 1/3 failed" not in done.stderr, done.stderr  # no plain copy through the root


GATE_SCRIPT = """
import time
from pydantic import BaseModel
from jobframework.envelope import Envelope
from jobframework.jobs import JobRegistry, job
from jobframework.testing import FakeLambdaContext, in_memory_consumer, sqs_event


class Order(BaseModel):
    order_id: str


registry = JobRegistry()


@job("orders.ship", registry=registry, idempotent=False, track=True)
def ship(order: Order) -> None:
    raise AssertionError("a cancelled job ran")


handler, records = in_memory_consumer(registry)
env = Envelope.new("orders.ship", {"order_id": "o-1"}, track=True)
records.mark_cancelled(env.id, time.time())
handler(sqs_event(env), FakeLambdaContext())
print("job id:", env.id)
"""


def test_a_line_a_gate_logs_carries_the_jobs_keys():
    """A record stopped before its job runs (here by its cancel) is logged with the job's keys, as the
    job's own lines are: an operator filtering the logs by job id finds why it did not run."""
    done = _run(GATE_SCRIPT, JF_METRICS_DISABLED="true")
    lines = done.stdout.splitlines()
    job_id = lines[-1].removeprefix("job id: ")
    cancelled = next(json.loads(line) for line in lines if "acknowledged unrun" in line)
    assert cancelled["job_id"] == job_id and cancelled["job_type"] == "orders.ship"
    assert cancelled["trace_id"] and cancelled["attempt"] == 1


BATCH_SCRIPT = """
from pydantic import BaseModel
from jobframework.envelope import Envelope
from jobframework.jobs import BatchOptions, JobContext, JobRegistry, job
from jobframework.testing import FakeLambdaContext, in_memory_consumer, sqs_event


class Mail(BaseModel):
    to: str


registry = JobRegistry()


@job("mail.bulk", registry=registry, batch=BatchOptions(max_size=10))
def bulk(mails: list[Mail], ctx: JobContext) -> list[object]:
    ctx.logger.thread_safe_append_keys(smtp_host="mx-1")
    ctx.logger.warning("sending %d", len(mails))
    return [ConnectionError("smtp down") if m.to == "bad" else None for m in mails]


handler, records = in_memory_consumer(registry)
bad = Envelope.new("mail.bulk", {"to": "bad"}, key="mail:bad")
good = Envelope.new("mail.bulk", {"to": "good"})
handler(sqs_event(bad, good), FakeLambdaContext())
print("bad id:", bad.id)
"""


def test_a_batched_items_failure_is_logged_with_that_items_keys():
    """The line of a batched job's failed item carried the id of the batch's last admitted item (the
    keys admit() left for execute(), which a batch does not use), and no job type or trace id."""
    done = _run(BATCH_SCRIPT, JF_METRICS_DISABLED="true")
    lines = done.stdout.splitlines()
    bad_id = lines[-1].removeprefix("bad id: ")
    at = next(i for i, line in enumerate(lines) if "failed, retry in" in line)
    failed = json.loads(lines[at])
    assert failed["job_id"] == bad_id, failed
    assert failed["job_type"] == "mail.bulk" and failed["job_key"] == "mail:bad", failed
    assert failed["trace_id"] and failed["attempt"] == 1, failed
    after = [json.loads(line) for line in lines[at + 1 :] if line.startswith("{")]
    assert all("job_id" not in line for line in after), after  # removed once the item's verdict is in
    sending = next(json.loads(line) for line in lines if "sending 2" in line)
    assert sending["job_type"] == "mail.bulk" and sending["batch_size"] == 2, sending
    assert sending["smtp_host"] == "mx-1"  # the job's own key, on its own lines only:
    assert "smtp_host" not in failed and all("smtp_host" not in line for line in after), failed


APPENDED_SCRIPT = """
from pydantic import BaseModel
from jobframework.envelope import Envelope
from jobframework.jobs import JobContext, JobRegistry, job
from jobframework.testing import FakeLambdaContext, in_memory_consumer, sqs_event


class Order(BaseModel):
    order_id: str


registry = JobRegistry()


@job("orders.note", registry=registry, idempotent=False)
def note(order: Order, ctx: JobContext) -> None:
    if order.order_id == "first":
        ctx.logger.thread_safe_append_keys(order_id=order.order_id)
    ctx.logger.warning("noting %s", order.order_id)


handler, records = in_memory_consumer(registry)
handler(sqs_event(Envelope.new("orders.note", {"order_id": "first"}),
                  Envelope.new("orders.note", {"order_id": "second"})), FakeLambdaContext())
"""


def test_a_key_a_job_appends_does_not_outlive_its_record():
    """Keys a job appended with thread_safe_append_keys stayed on the lines of the records after it."""
    # (one thread: the records in turn)
    done = _run(APPENDED_SCRIPT, JF_METRICS_DISABLED="true", JF_CONCURRENCY="1")
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    first = next(line for line in lines if line["message"] == "noting first")
    second = next(line for line in lines if line["message"] == "noting second")
    assert first["order_id"] == "first" and first["job_type"] == "orders.note"
    assert "order_id" not in second and second["job_id"] != first["job_id"], second


SERVICE_SCRIPT = """
import logging, sys
logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="root %(name)s: %(message)s")
from jobframework.telemetry import job_logger

job_logger().warning("the job's own line")
logging.getLogger("jobframework.consumer").warning("the framework's line")
logging.getLogger("acme.jobframework_glue").warning("the team's glue line")
"""


@pytest.mark.parametrize("service", ["billing", "jobframework.billing", "jobframework"])
def test_each_line_prints_once_and_a_teams_logger_named_like_the_framework_keeps_the_root(service):
    """A dotted service under ``jobframework.`` printed every job line twice, and a team's logger whose
    name only contains ``jobframework`` lost its lines on the root's handlers (a substring filter)."""
    done = _run(SERVICE_SCRIPT, POWERTOOLS_SERVICE_NAME=service)
    printed = [json.loads(line)["message"] for line in done.stdout.splitlines()]
    assert printed == ["the job's own line", "the framework's line"]
    assert done.stderr.splitlines() == ["root acme.jobframework_glue: the team's glue line"]
