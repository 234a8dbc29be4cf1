"""``jf schedules``: the job modules' schedules with their next slot and last run (a trial moving from
Celery beat found no command-line listing: only jf dev's banner and the console)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import UTC, datetime

from jobframework.consumer import consumer
from jobframework.jobs import registry
from jobframework.scheduling import schedule_key
from jobframework.testing import consume_once
from jobframework.ui.schedule_runs import slot_stamp
from tests.functional.conftest_local import cli_env, invoke, jf_config, sqs

__all__ = ["jf_config", "sqs"]


def test_jf_schedules_lists_each_schedule_with_its_last_run(jf_config, sqs):
    env = cli_env(jf_config)
    before = invoke(["schedules", "--jobs", "handlers.jobs"], env)
    assert before.exit_code == 0, before.output
    assert before.stdout.splitlines()[0].strip() == "1 schedule"
    row = next(line for line in before.stdout.splitlines() if "maintenance.cleanup" in line)
    assert "jf-dev-maintenance-cleanup" in row and "rate(1 hour) UTC" in row and "every 1 hour" in row
    assert "none seen" in row  # tracked, and no run yet

    from jobframework.client import JobClient

    cleanup = registry.find("maintenance.cleanup")
    assert cleanup is not None and cleanup.schedule is not None
    client = JobClient(jf_config, sqs_client=sqs)
    fired = client.enqueue(
        cleanup, cleanup.schedule.payload, key=schedule_key(cleanup.name, slot_stamp(datetime.now(UTC)))
    )
    consume_once(consumer(registry, config=jf_config, sqs_client=sqs), sqs, jf_config.endpoints("low").url)

    after = invoke(["schedules", "--jobs", "handlers.jobs", "--json"], env)
    assert after.exit_code == 0, after.output
    (listed,) = json.loads(after.stdout)
    assert (listed["name"], listed["every"], listed["missed_24h"]) == (
        "jf-dev-maintenance-cleanup",
        "every 1 hour",
        0,
    )
    assert listed["last_run"]["id"] == fired.id and listed["last_run"]["status"] == "succeeded"
    table = invoke(["schedules", "--jobs", "handlers.jobs"], env)
    assert "succeeded" in next(line for line in table.stdout.splitlines() if "maintenance.cleanup" in line)
    assert "paused" not in table.stderr and listed["lane_paused"] is False

    # A paused lane: its schedule fires and the runs wait (an operator saw "missed 0" and nothing else)
    assert invoke(["queue", "pause", "low"], env).exit_code == 0
    held = invoke(["schedules", "--jobs", "handlers.jobs"], env)
    assert "note: the low queue is paused (since " in held.stderr, held.output
    assert "the runs of maintenance.cleanup wait in it until `jf queue resume low`" in held.stderr
    assert json.loads(invoke(["schedules", "--jobs", "handlers.jobs", "--json"], env).stdout)[0][
        "lane_paused"
    ]
    assert invoke(["queue", "resume", "low"], env).exit_code == 0


def test_jf_schedules_of_modules_without_a_schedule_says_what_to_name(jf_config, tmp_path):
    (tmp_path / "unscheduled_jobs.py").write_text(
        "from pydantic import BaseModel\n"
        "from jobframework import job\n\n\n"
        "class P(BaseModel):\n    n: int\n\n\n"
        '@job("plain.work")\n'
        "def work(p: P) -> None: ...\n"
    )
    done = subprocess.run(  # (a process of its own: this one's registry has the example jobs)
        [sys.executable, "-m", "jobframework.cli", "schedules", "--jobs", "unscheduled_jobs"],
        env={**os.environ, **cli_env(jf_config)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith(
        "jf: error: no job of plain.work has a schedule: name the modules with @job(schedule=...)"
    )


def test_jf_schedules_run_enqueues_one_run_of_a_schedule_now_with_its_payload(jf_config, sqs):
    """A team moving from Celery beat runs a nightly job by hand (beat's manual trigger): `jf enqueue`
    sent the model's defaults, not the schedule's payload, and only the console had "Enqueue now"."""
    env = cli_env(jf_config)
    sent = invoke(["schedules", "--jobs", "handlers.jobs", "--run", "maintenance.cleanup", "--json"], env)
    assert sent.exit_code == 0, sent.output
    run = json.loads(sent.stdout)
    assert run["type"] == "maintenance.cleanup" and run["key"].startswith("schedule:maintenance.cleanup:")
    records, _ = consume_once(
        consumer(registry, config=jf_config, sqs_client=sqs), sqs, jf_config.endpoints("low").url
    )
    [body] = [json.loads(r["body"]) for r in records]
    assert (body["id"], body["payload"]) == (run["id"], {"older_than_days": 30})  # the schedule's
    # to the millisecond: never a scheduled slot's key (whole seconds), whose run it would take, and
    # counted among the schedule's runs
    assert re.fullmatch(r"schedule:maintenance\.cleanup:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", run["key"])
    again = json.loads(
        invoke(["schedules", "--jobs", "handlers.jobs", "--run", "maintenance.cleanup", "--json"], env).stdout
    )
    assert again["id"] != run["id"] and not again["duplicate"]  # (two in one second were one)
    listed = json.loads(invoke(["schedules", "--jobs", "handlers.jobs", "--json"], env).stdout)
    assert listed[0]["last_run"] is not None
    typo = invoke(["schedules", "--jobs", "handlers.jobs", "--run", "maintenance.clenup"], env)
    assert typo.exit_code == 2 and "did you mean 'maintenance.cleanup'?" in typo.stderr, typo.output
    assert invoke(["queue", "pause", "low"], env).exit_code == 0  # (an on-call trial's nightly run)
    held = invoke(["schedules", "--jobs", "handlers.jobs", "--run", "maintenance.cleanup"], env)
    assert held.exit_code == 0, held.output
    assert "the low queue is paused (since " in held.stderr and "the run waits there" in held.stderr
