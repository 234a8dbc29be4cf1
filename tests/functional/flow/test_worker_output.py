"""What `jf worker` prints against a local endpoint: its own lines, no EMF metric JSON (nothing reads
it there) and no urllib3 'Connection pool is full' warnings from its threads sharing a client."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from jobframework.client import JobClient
from jobframework.jobs import registry
from jobframework.testing import provision_fresh
from tests.functional.conftest_local import cli_env, terminate_when
from tests.functional.flow import worker_jobs

ROOT = Path(__file__).parents[3]
JOBS = 40


def test_a_local_worker_with_many_threads_prints_no_metric_json_nor_pool_warnings(jf_aws, tmp_path):
    ledger = tmp_path / "ledger.txt"
    _, config = provision_fresh(jf_aws.endpoint_url, registry)
    client = JobClient(config, sqs_client=jf_aws.client("sqs"))
    sent = client.enqueue_many([worker_jobs.quick_step.request(worker_jobs.Step(n=n)) for n in range(JOBS)])
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("JF_", "AWS_", "POWERTOOLS_"))},
        **cli_env(config),
        "JF_TEST_LEDGER": str(ledger),
        "JF_LOG_LEVEL": "WARNING",  # the framework's own INFO lines off (as the testing plugin sets it)
    }
    command = [sys.executable, "-m", "jobframework.cli", "worker", "--queues", "default", "--workers", "16"]
    command += ["--jobs", "tests.functional.flow.worker_jobs", "--drain-timeout", "5"]
    proc = subprocess.Popen(
        command, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    out, _ = terminate_when(
        proc, lambda: ledger.exists() and len(ledger.read_text().splitlines()) >= JOBS, timeout=60
    )
    assert proc.returncode == 0, out
    summary = re.search(r"(\d+) records? in \d+ batch(?:es)?, (\d+) done, 0 handed back", out)  # its own line
    # (SQS delivers at least once: under load the embedded AWS has handed a message out twice, and the
    # second delivery is done too, as a duplicate)
    assert summary is not None and int(summary.group(1)) == int(summary.group(2)) >= JOBS, out
    assert "Connection pool is full" not in out
    assert '"_aws"' not in out  # no EMF metric lines
    assert "Found credentials" not in out  # botocore's INFO line per client
    # A JSON line per job outcome (as the jobs' own Powertools logs), as Celery's and Sidekiq's workers
    # print a line per task: outcomes are not the framework's chatter, JF_LOG_LEVEL leaves them.
    records = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    done = [r["job_id"] for r in records if r.get("outcome") == "succeeded" and not r.get("duplicate")]
    assert sorted(done) == sorted(r.id for r in sent), out
    # Its own start and stop lines are log lines of the same shape as the outcomes' (not text among them)
    assert not [line for line in out.splitlines() if line.startswith("jf worker")], out
    own = [r for r in records if r["message"].startswith("jf worker: ")]
    assert [r["message"].split(" ")[2] for r in own] == ["polling", "stopped"], own
    assert own[1]["drained"] is True and own[1]["done"] == int(summary.group(2))
    outcome = next(r for r in records if r.get("outcome"))
    shape = {"level", "location", "message", "timestamp", "service"} & set(outcome)
    assert len(shape) == 5 and all(shape <= set(r) and r["service"] == outcome["service"] for r in own), own
