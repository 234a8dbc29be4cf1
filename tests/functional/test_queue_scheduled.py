"""`jf queue ls`: jobs delayed over 15 minutes wait in EventBridge Scheduler, and it counts them."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from jobframework.client import JobClient
from jobframework.delays import schedule_name
from tests.functional.conftest_local import cli_env, example_jobs_config, invoke, jf_aws, sqs

__all__ = ["example_jobs_config", "jf_aws", "sqs"]


def _rows(env: dict[str, str]) -> dict[str, dict[str, Any]]:
    result = invoke(["queue", "ls", "--json"], env)
    assert result.exit_code == 0, result.output
    return {r["lane"]: r for r in json.loads(result.stdout)}


def test_queue_ls_counts_the_jobs_scheduler_holds_per_queue(jf_aws, jf_config, sqs):
    scheduler = jf_aws.client("scheduler")
    client = JobClient(jf_config, sqs_client=sqs, clients={"scheduler": scheduler})
    in_two_hours = timedelta(hours=2)
    later = [
        client.enqueue("emails.send", {"to": f"{n}@example.com", "subject": "later"}, delay=in_two_hours)
        for n in range(2)
    ]
    later.append(client.enqueue("reports.generate", {"report_id": "r-later"}, delay=timedelta(days=3)))
    soon = client.enqueue("emails.send", {"to": "soon@example.com", "subject": "soon"}, delay=60)
    # Not a delay schedule (no jf-delay- prefix), though it targets the same queue: not counted.
    scheduler.create_schedule(
        Name=f"other-{soon.id}"[:64],
        GroupName=jf_config.schedule_group,
        ScheduleExpression="rate(1 hour)",
        FlexibleTimeWindow={"Mode": "OFF"},
        Target={
            "Arn": f"arn:aws:sqs:us-east-1:123456789012:{jf_config.endpoints('high').name}",
            "RoleArn": str(jf_config.scheduler_role_arn),
        },
    )
    try:
        env = cli_env(jf_config)
        rows = _rows(env)
        assert (rows["high"]["scheduled"], rows["high"]["delayed"]) == (2, 1)
        assert rows["low"]["scheduled"] == 1
        # This test's queues are its own (a fresh stage): no other test's schedule targets them.
        assert rows["critical"]["scheduled"] == rows["default"]["scheduled"] == 0
        table = invoke(["queue", "ls"], env)
        assert table.exit_code == 0, table.output
        assert "scheduled" in table.stdout
    finally:  # the session's Scheduler group is shared: leave no schedule for another test's fire_due
        for sent in later:
            scheduler.delete_schedule(Name=schedule_name(sent.id), GroupName=jf_config.schedule_group)
        scheduler.delete_schedule(Name=f"other-{soon.id}"[:64], GroupName=jf_config.schedule_group)


def test_queue_ls_leaves_scheduled_out_when_no_schedule_group_is_configured(jf_config):
    unscheduled = jf_config.model_copy(update={"scheduler_role_arn": None})
    env = cli_env(unscheduled)
    assert "JF_SCHEDULE_GROUP" not in env and "JF_SCHEDULER_ROLE_ARN" not in env
    rows = _rows(env)
    assert rows["high"]["depth"] == 0 and all("scheduled" not in r for r in rows.values())
    table = invoke(["queue", "ls"], env)
    assert table.exit_code == 0, table.output
    assert "delayed" in table.stdout and "scheduled" not in table.stdout
