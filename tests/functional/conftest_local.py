"""Fixtures and helpers of the local runtime's and the CLI's tests.

Test modules import what they use: ``from tests.functional.conftest_local import *``.
The embedded AWS fixtures come from :mod:`jobframework.testing`.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import time
import uuid
import zipfile
from collections.abc import Callable
from typing import Any

import pytest
from typer.testing import CliRunner

from jobframework.envelope import Envelope, string_attribute
from jobframework.local.aws import FAKE_CREDENTIALS
from jobframework.testing import jf_aws, jf_config
from jobframework.topology import RuntimeConfig
from jobframework.tracing import new_trace

__all__ = [
    "cli_env",
    "dead_letter",
    "event_source_mapping",
    "invoke",
    "jf_aws",
    "jf_config",
    "queue_counts",
    "sqs",
    "state_table",
    "terminate_when",
]


def cli_env(config: RuntimeConfig) -> dict[str, str]:
    """The environment a `jf` command needs to reach ``config``'s queues on the embedded AWS."""
    env = {**FAKE_CREDENTIALS, **config.to_env()}
    env.pop("JF_TOPOLOGY_PARAMETER", None)
    return env


def send_duplicate(sqs: Any, url: str) -> None:
    """Send a second copy of the queue's only message, as SQS's at-least-once delivery may (the
    original stays visible, its receive count now 1: its next delivery is attempt 2)."""
    [message] = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"], VisibilityTimeout=0)[
        "Messages"
    ]
    sqs.send_message(
        QueueUrl=url, MessageBody=message["Body"], MessageAttributes=message["MessageAttributes"]
    )


def invoke(args: list[str], env: dict[str, str] | None = None, stdin: str | None = None) -> Any:
    """Run `jf ARGS` through the real typer app (CliRunner), with the example jobs (``JF_JOBS``) unless
    ``env`` says otherwise, ``stdin`` on its standard input; returns the click Result."""
    from jobframework.cli import app

    # Tables as wide as a pipe's (cli/base.PIPED_WIDTH): pytest-xdist sets COLUMNS=80 in its workers.
    environ = {"JF_JOBS": "handlers.jobs", "COLUMNS": "200", **(env or {})}
    return CliRunner().invoke(app, args, input=stdin, env=environ, catch_exceptions=False)


@pytest.fixture(name="jf_config")
def example_jobs_config(jf_aws: Any) -> RuntimeConfig:
    """``jf_config`` for a module that imports this: the example jobs' topology (``handlers.jobs``),
    freshly provisioned (they are re-registered if a suite cleared them)."""
    import importlib

    import handlers.jobs
    from jobframework.jobs import registry
    from jobframework.testing import provision_fresh

    if "emails.send" not in registry:
        importlib.reload(handlers.jobs)
    return provision_fresh(jf_aws.endpoint_url, registry)[1]


@pytest.fixture
def sqs(jf_aws: Any) -> Any:
    return jf_aws.client("sqs")


def queue_counts(sqs_client: Any, url: str) -> tuple[int, int]:
    """(visible, in flight) of a queue."""
    attrs = sqs_client.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attrs["ApproximateNumberOfMessages"]), int(attrs["ApproximateNumberOfMessagesNotVisible"])


def dead_letter(
    sqs_client: Any,
    config: RuntimeConfig,
    priority: str,
    job_type: str,
    payload: dict[str, Any],
    *,
    key: str | None = None,
    reason: str = "exhausted",
    attempts: int = 3,
    dead_at: str = "2026-01-01T00:00:00.000+00:00",
    error: str = "RuntimeError: boom",
) -> Envelope:
    """Put a dead letter on ``priority``'s DLQ exactly as the consumer writes one; returns its envelope."""
    env = Envelope.new(job_type, payload, key=key)
    trace = new_trace()
    ep = config.endpoints(priority)
    sqs_client.send_message(
        QueueUrl=ep.dlq_url,
        MessageBody=env.to_body(),
        MessageAttributes={
            "jf-type": string_attribute(job_type),
            "traceparent": string_attribute(trace.traceparent),
            "jf-reason": string_attribute(reason),
            "jf-error": string_attribute(error),
            "jf-attempts": string_attribute(str(attempts)),
            "jf-source": string_attribute(ep.name),
            "jf-dead-at": string_attribute(dead_at),
        },
    )
    return env


def state_table(jf_aws: Any) -> tuple[str, Any]:
    """A fresh, empty table shaped as the state table (``pk``, ``sk``) and a DynamoDB client for it."""
    dynamodb = jf_aws.client("dynamodb")
    table = f"jf-state-{uuid.uuid4().hex[:8]}"
    dynamodb.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    return table, dynamodb


def event_source_mapping(jf_aws: Any, queue_arn: str) -> str:
    """A Lambda function and an event source mapping reading ``queue_arn`` (never invoked); its UUID."""
    iam, lam = jf_aws.client("iam"), jf_aws.client("lambda")
    name = f"fn-{queue_arn.rsplit(':', 1)[-1]}"
    role = iam.create_role(RoleName=name, AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as z:
        z.writestr("h.py", "def h(event, context):\n    return None\n")
    lam.create_function(
        FunctionName=name, Runtime="python3.12", Role=role, Handler="h.h", Code={"ZipFile": code.getvalue()}
    )
    return str(lam.create_event_source_mapping(EventSourceArn=queue_arn, FunctionName=name)["UUID"])


def parse_json(text: str) -> Any:
    return json.loads(text)


def subprocess_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JF_")}
    env.update(extra)
    return env


def terminate_when(
    proc: subprocess.Popen[str], ready: Callable[[], bool], timeout: float, *, drain: float = 60
) -> tuple[str, str | None]:
    """Wait until ``ready()`` (``proc`` still running, within ``timeout`` seconds), then send it SIGTERM
    and return its ``(stdout, stderr)`` once it exits (within ``drain`` seconds). Killed if it outlives
    this, whatever failed."""
    try:
        deadline = time.monotonic() + timeout
        while not ready():
            assert proc.poll() is None, f"the process ended first: {proc.communicate()}"
            assert time.monotonic() < deadline, f"not ready within {timeout}s"
            time.sleep(0.05)  # SIGTERM soon after: a drain test needs the worker stopped mid-queue
        proc.send_signal(signal.SIGTERM)
        return proc.communicate(timeout=drain)
    finally:
        if proc.poll() is None:
            proc.kill()
