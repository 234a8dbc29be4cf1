"""`jf worker` and `jf dev` name their log lines' service after the app, as the stack does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from jobframework.client import JobClient
from jobframework.jobs import registry
from jobframework.testing import provision_fresh
from jobframework.topology_settings import TopologySettings, app_of_parameter
from tests.functional.conftest_local import cli_env, jf_aws, queue_counts, sqs, terminate_when

__all__ = ["jf_aws", "sqs"]

ROOT = Path(__file__).parents[2]


@pytest.fixture
def billing(jf_aws: Any) -> Any:
    """The example jobs' topology of the app ``billing``, freshly provisioned."""
    import handlers.jobs

    if "emails.send" not in registry:
        import importlib

        importlib.reload(handlers.jobs)
    return provision_fresh(jf_aws.endpoint_url, registry, TopologySettings(app="billing"))[1]


@pytest.mark.parametrize(("preset", "service"), [(None, "billing"), ("checkout", "checkout")])
def test_jf_worker_names_the_service_after_the_app_of_its_topology(billing, sqs, preset, service):
    JobClient(billing, sqs_client=sqs).enqueue("emails.send", {"to": "a@example.com", "subject": "hi"})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JF_", "AWS_", "POWERTOOLS_"))}
    env.update(cli_env(billing), JF_TOPOLOGY_PARAMETER=billing.topology_parameter)  # as the stack sets
    if preset is not None:
        env["POWERTOOLS_SERVICE_NAME"] = preset  # said: kept
    command = [sys.executable, "-m", "jobframework.cli", "worker", "--queues", "high", "--exact-lanes"]
    proc = subprocess.Popen(
        [*command, "--jobs", "handlers.jobs"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = billing.endpoints("high").url
    out, _ = terminate_when(proc, lambda: queue_counts(sqs, url) == (0, 0), timeout=60)
    assert proc.returncode == 0, out
    records = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    # The outcome record is the framework's own (jobframework.outcomes): it still goes through
    # Powertools' handler, whose logger is now named after the service.
    [outcome] = [r for r in records if r.get("outcome")]
    assert (outcome["job_type"], outcome["service"]) == ("emails.send", service)


def test_the_app_of_a_topology_parameter():
    assert app_of_parameter("/billing/prod/topology") == "billing"
    assert app_of_parameter("/jf/t1a2b3c/topology") == "jf"
    assert app_of_parameter("/billing/prod/other") is None
    assert app_of_parameter("billing") is None and app_of_parameter(None) is None
