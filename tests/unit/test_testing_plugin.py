"""The pytest plugin a team enables (``pytest_plugins = ["jobframework.testing"]``): their test
output carries no EMF document of the consumer per handler call and none of the framework's INFO log
lines, unless they ask for them; their jobs' own Powertools metrics and log lines still print."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from jobframework import BatchOptions, JobRegistry, job
from jobframework.testing import EnqueueRecorder

TEST = """
pytest_plugins = ["jobframework.testing"]

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit
from pydantic import BaseModel
from jobframework import job
from jobframework.envelope import Envelope
from jobframework.jobs import JobRegistry
from jobframework.testing import FakeLambdaContext, in_memory_consumer, sqs_event

registry = JobRegistry()


class Ping(BaseModel):
    n: int


@job("plugin.ping", registry=registry, idempotent=False)
def ping(payload: Ping) -> None:
    metrics = Metrics(namespace="Team", service="team")  # the team's own metric
    metrics.add_metric(name="Pinged", unit=MetricUnit.Count, value=1)
    metrics.flush_metrics()


def test_a_handler_call():
    handler, _records = in_memory_consumer(registry)
    event = sqs_event(Envelope.new("plugin.ping", {"n": 1}))
    assert handler(event, FakeLambdaContext()) == {"batchItemFailures": []}
"""


LOGS_TEST = """
from pydantic import BaseModel
from jobframework import JobContext, job
from jobframework.envelope import Envelope
from jobframework.jobs import JobRegistry
from jobframework.status import JobState
from jobframework.testing import FakeLambdaContext, in_memory_consumer, sqs_event

registry = JobRegistry()


class Greeting(BaseModel):
    name: str


@job("plugin.greet", registry=registry, idempotent=False, track=True)
def greet(greeting: Greeting, ctx: JobContext) -> None:
    ctx.logger.info("greeting %s", greeting.name)  # the team's own INFO line


def test_a_cancelled_job_and_one_that_runs():
    handler, records = in_memory_consumer(registry)
    cancelled = Envelope.new("plugin.greet", {"name": "nobody"}, track=True)
    records.mark_cancelled(cancelled.id, 0.0)  # the consumer says so at INFO, and acknowledges it
    event = sqs_event(cancelled, Envelope.new("plugin.greet", {"name": "ada"}, track=True))
    assert handler(event, FakeLambdaContext()) == {"batchItemFailures": []}
    assert records.get_status(cancelled.id).status is JobState.CANCELLED
"""


def _run(tmp_path: Path, test: str = TEST, **env: str) -> str:
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["jobframework.testing"]\n')  # as the README says
    (tmp_path / "test_team.py").write_text(test)
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("POWERTOOLS_", "PYTEST_", "JF_"))}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-s",
            "-q",
            "-p",
            "no:cacheprovider",
            str(tmp_path / "test_team.py"),
        ],
        check=False,
        cwd=tmp_path,
        env={**environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Warning" not in done.stdout, done.stdout
    return done.stdout


@pytest.mark.parametrize(("env", "printed"), [({}, False), ({"JF_METRICS_DISABLED": "false"}, True)])
def test_metrics_are_off_in_a_teams_tests_unless_asked_for(tmp_path, env, printed):
    out = _run(tmp_path, **env)
    assert ('"Namespace":"JobFramework"' in out) is printed, out
    assert '"Pinged"' in out  # the job's own metrics print either way


def _log_lines(out: str) -> dict[str, dict[str, Any]]:
    lines = [json.loads(line) for line in out.splitlines() if line.startswith('{"level"')]
    return {line["message"]: line for line in lines}


def test_the_framework_info_lines_are_off_in_a_teams_tests_but_the_jobs_own_lines_print(tmp_path):
    lines = _log_lines(_run(tmp_path, LOGS_TEST))
    assert "greeting ada" in lines  # the job's ctx.logger, at INFO
    assert not [m for m in lines if "cancelled" in m], lines  # the consumer's INFO line about the cancel


def test_jf_log_level_info_shows_the_framework_info_lines_again_with_the_same_keys(tmp_path):
    lines = _log_lines(_run(tmp_path, LOGS_TEST, JF_LOG_LEVEL="INFO"))
    own = lines["greeting ada"]
    framework = [line for m, line in lines.items() if m.endswith("was cancelled; acknowledged unrun")]
    assert len(framework) == 1, lines
    assert framework[0]["service"] == own["service"] == "jobframework"
    assert framework[0]["level"] == "INFO"
    # the same JSON shape as the job's own line, and the job as correlation keys (job_id, trace_id)
    assert set(own) - {"job_id", "job_type", "job_key", "attempt", "trace_id"} <= set(framework[0]), own


EAGER_TEST = """
import pytest
from pydantic import BaseModel
from jobframework import PermanentError, job
from jobframework.errors import ConfigurationError


class Invoice(BaseModel):
    invoice_id: str


@job("billing.receipt", idempotent=False)
def receipt(invoice: Invoice) -> str:
    if invoice.invoice_id == "bad":
        raise PermanentError("no such invoice")
    return f"receipt {invoice.invoice_id}"


@job("billing.invoice", idempotent=False)
def send_invoice(invoice: Invoice) -> str:
    receipt.enqueue(invoice)  # (a job that enqueues the next)
    return f"sent {invoice.invoice_id}"


def signup_view(invoice_id: str) -> str:  # the web app's handler: enqueue and answer 202
    return send_invoice.enqueue(Invoice(invoice_id=invoice_id)).id


def test_an_enqueue_with_no_client_does_not_reach_the_shells_deployment():
    with pytest.raises(ConfigurationError, match="does not send where the shell's JF_\\\\* variables point"):
        signup_view("i-1")


def test_jf_inline_runs_each_enqueue_and_what_it_enqueues(jf_inline):
    job_id = signup_view("i-2")
    assert jf_inline.results[job_id] == "sent i-2"
    assert [r.payload.invoice_id for r in jf_inline.requests] == ["i-2", "i-2"]
    assert sorted(jf_inline.results.values()) == ["receipt i-2", "sent i-2"]  # (the child ran inside)
    with pytest.raises(PermanentError, match="no such invoice"):  # (a job's failure reaches the test)
        receipt.enqueue(Invoice(invoice_id="bad"))


def status_view(job_id: str) -> str:  # the web app's GET: what became of it
    from jobframework.client import default_client

    found = default_client().status(job_id)
    return "404" if found is None else found.status.value + " " + str(found.result or found.error)


def test_jf_inline_answers_the_status_a_202_api_reads(jf_inline):
    # A web API trial's GET under jf_inline: 'EnqueueRecorder' object has no attribute 'status'
    # The result as the client's status gives it: the value, not its JSON text (a trial's test of
    # the real shape failed under jf_inline, which gave '"sent i-3"').
    assert status_view(signup_view("i-3")) == "succeeded sent i-3"
    assert status_view("no-such-job") == "404"
    jf_inline.propagate = False  # (Celery's task_eager_propagates=False: accepted, then dead)
    dead = receipt.enqueue(Invoice(invoice_id="bad")).id
    assert status_view(dead) == "dead PermanentError: no such invoice"
    assert isinstance(jf_inline.errors[dead], PermanentError)
"""


def test_a_test_enqueue_with_no_client_is_refused_and_jf_inline_runs_jobs_eagerly(tmp_path):
    """A Celery port's test (no jf_config) enqueued onto the `jf dev` whose exports its shell had:
    pointed at a deployed stage, it would have enqueued there. Celery's task_always_eager had no
    equivalent but EnqueueRecorder and run_inline by hand."""
    out = _run(
        tmp_path,
        EAGER_TEST,
        JF_ENDPOINT_URL="http://127.0.0.1:9",
        JF_QUEUE_URL_DEFAULT="http://127.0.0.1:9/123456789012/jf-dev-default",
    )
    assert "3 passed" in out, out


class _Mail(BaseModel):
    to: str


@job("eager.mails", registry=JobRegistry(), idempotent=False, batch=BatchOptions(max_size=10))
def _mails(batch: list[_Mail]) -> list[str]:
    if any(m.to == "bounce" for m in batch):
        raise ValueError("bounced")
    return [f"sent {m.to}" for m in batch]


def test_an_eager_recorder_runs_a_batched_job_as_a_batch_of_one_and_raises_its_failure():
    """jf_inline's recorder gave a batched job (batch=) one payload where it takes a list: TypeError."""
    eager = EnqueueRecorder(run=True)
    sent = eager.enqueue(_mails, {"to": "ada"})
    assert eager.results[sent.id] == "sent ada"
    with pytest.raises(ValueError, match="bounced"):
        eager.enqueue(_mails, {"to": "bounce"})


def test_a_recording_recorder_reads_queued_and_never_ends():
    recorder = EnqueueRecorder()
    sent = recorder.enqueue(_mails, {"to": "ada"})
    found = recorder.status(sent.id)
    assert found is not None and found.status.value == "queued" and found.type == "eager.mails"
    with pytest.raises(TimeoutError, match="recorded, not run"):
        recorder.wait(sent.id)
    with pytest.raises(LookupError):
        recorder.wait("no-such-job")
