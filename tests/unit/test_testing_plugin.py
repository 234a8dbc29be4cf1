"""The pytest plugin a team enables (``pytest_plugins = ["jobframework.testing"]``): their test
output carries no EMF document of the consumer per handler call, unless they ask for it; their jobs'
own Powertools metrics still print."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

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


def _run(tmp_path: Path, **env: str) -> str:
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["jobframework.testing"]\n')  # as the README says
    (tmp_path / "test_team.py").write_text(TEST)
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
