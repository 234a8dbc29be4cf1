"""`jf queue pause|resume`: the event source mapping's Enabled, and the local pollers stop and restart."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from jobframework.errors import ConfigurationError
from jobframework.flow.pause import PauseWatch, lanes_of, pause, paused, resume
from jobframework.jobs import Priority
from jobframework.local.emulator import Emulator, QueuePoller, queue_arn_from_url
from jobframework.state import StateStore
from tests.functional.conftest_local import (
    cli_env,
    event_source_mapping,
    invoke,
    jf_aws,
    jf_config,
    queue_counts,
    sqs,
)

__all__ = ["jf_aws", "jf_config", "sqs"]


def _state(jf_aws: Any, uuid: str) -> str:
    return str(jf_aws.client("lambda").get_event_source_mapping(UUID=uuid)["State"])


def test_pause_disables_the_mapping_and_shows_in_ls_and_dlq_ls(jf_aws, jf_config):
    url = jf_config.endpoints("high").url
    uuid = event_source_mapping(jf_aws, queue_arn_from_url(url, "us-east-1"))
    env = cli_env(jf_config)

    result = invoke(["queue", "pause", "high", "--json"], env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == [
        {"lane": "high", "paused": True, "already_paused_since": None, "flag": True, "mappings": [uuid]}
    ]
    assert _state(jf_aws, uuid) == "Disabled"
    again = invoke(["queue", "pause", "high"], env)  # idempotent, and says it was paused already
    assert again.exit_code == 0
    assert (
        "high: already paused since 20" in again.output
        and "(1 Lambda event source mapping, the pause flag that jf dev and jf worker read)" in again.output
    )

    rows = {r["lane"]: r for r in json.loads(invoke(["queue", "ls", "--json"], env).output)}
    assert rows["high"]["paused"] is True and rows["high"]["paused_at"]
    assert rows["low"]["paused"] is False
    assert "paused since" in invoke(["queue", "ls"], env).output
    dlqs = {r["priority"]: r for r in json.loads(invoke(["dlq", "ls", "--json"], env).output)}
    assert dlqs["high"]["source_paused"] is True and dlqs["default"]["source_paused"] is False
    assert dlqs["high"]["source_paused_since"] == rows["high"]["paused_at"]  # (as jf queue ls says it)
    assert "paused since 20" in invoke(["dlq", "ls"], env).output

    result = invoke(["queue", "resume", "high"], env)
    assert result.exit_code == 0 and "high: resumed (paused since 20" in result.output
    assert _state(jf_aws, uuid) == "Enabled"
    again = invoke(["queue", "resume", "high", "--json"], env)  # idempotent, and says it was not paused
    assert again.exit_code == 0 and json.loads(again.output)[0]["paused_since"] is None
    said = invoke(["queue", "resume", "high"], env).output
    assert "high: was not paused (by jf); enabled all the same (1 Lambda" in said
    assert not json.loads(invoke(["queue", "ls", "--json"], env).output)[1]["paused"]


def test_an_unknown_queue_is_a_usage_error(jf_config):
    result = invoke(["queue", "pause", "urgent"], cli_env(jf_config))
    assert result.exit_code == 2
    assert "no queue 'urgent' is configured; known: critical, high, default, low" in result.output
    typo = invoke(["queue", "pause", "deafult"], cli_env(jf_config))
    assert typo.exit_code == 2 and "no queue 'deafult' is configured (did you mean default?)" in typo.output


def test_a_job_type_given_for_a_queue_is_told_the_queue_it_runs_on(jf_aws):
    """A BullMQ trial paused a job type (mail.send), as it would a BullMQ queue."""
    from jobframework.testing import provision_fresh
    from tests.functional.jobs_under_test import registry

    _, config = provision_fresh(jf_aws.endpoint_url, registry)
    env = {**cli_env(config), "JF_TOPOLOGY_PARAMETER": str(config.topology_parameter)}  # (jf dev's)
    said = invoke(["queue", "pause", "t.ok"], env)
    assert said.exit_code == 2
    lane = config.jobs["t.ok"].lane
    assert f"t.ok is a job type, not a queue: it runs on the {lane} queue" in " ".join(
        said.output.replace("│", " ").split()
    ), said.output


def test_a_priority_names_its_profile_lanes():
    assert lanes_of(["high", "high-cpu", "low"], "high") == ["high", "high-cpu"]
    assert lanes_of(["high", "high-cpu"], "high-cpu") == ["high-cpu"]
    with pytest.raises(ConfigurationError, match=r"known: critical, high, high-cpu, low$"):
        lanes_of(["low", "high-cpu", "critical", "high"], "urgent")  # listed as jf queue ls lists them


def test_the_emulator_stops_and_restarts_polling_a_paused_lane(jf_aws, jf_config, sqs):
    store = StateStore(str(jf_config.state_table), jf_aws.client("dynamodb"))
    url = jf_config.endpoints("low").url
    poller = QueuePoller(
        priority=Priority.LOW,
        url=url,
        arn=queue_arn_from_url(url, "us-east-1"),
        batch_size=10,
        batching_window=0.0,
        max_concurrency=1,
        weight=1,
        function_name="jf-test",
        timeout=30.0,
    )
    handled: list[str] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        handled.extend(r["body"] for r in event["Records"])
        return {"batchItemFailures": []}

    pause(store, "low")
    assert set(paused(store)) == {"low"}
    emulator = Emulator(
        [poller], handler, sqs, idle_seconds=0.02, paused=PauseWatch(store, refresh=0.05).current
    ).start()
    try:
        sqs.send_message(QueueUrl=url, MessageBody="held")
        time.sleep(1.0)
        assert handled == [] and queue_counts(sqs, url) == (1, 0)  # not even received
        resume(store, "low")
        deadline = time.monotonic() + 10
        while not handled and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        emulator.stop(2)
    assert handled == ["held"]


def test_a_redrive_or_an_enqueue_into_a_paused_queue_says_its_jobs_wait_there(jf_config, sqs):
    """An operator redrove into a paused queue and was told only "redrove 1"."""
    from tests.functional.conftest_local import dead_letter

    env = cli_env(jf_config)
    dead_letter(sqs, jf_config, "default", "crm.sync", {"account_id": "a-1"})
    paused_now = invoke(["queue", "pause", "default"], env)
    assert paused_now.exit_code == 0  # and it says when the pause holds (a trial's job ran at once)
    assert "consumers stop taking default's jobs within about 5 s" in " ".join(paused_now.stderr.split())
    moved = invoke(["dlq", "redrive", "default"], env)
    assert moved.exit_code == 0 and "redrove 1" in moved.stdout, moved.output
    said = " ".join(moved.stderr.split())
    assert "the default queue is paused (since " in said, said
    assert "each redriven job waits there until `jf queue resume default`" in said
    # An on-call trial's enqueue and by-hand schedule run into a paused lane printed only an id
    sent = invoke(["enqueue", "crm.sync", '{"account_id": "a-2"}'], env)
    assert sent.exit_code == 0, sent.output
    assert "the job waits there until `jf queue resume default`" in " ".join(sent.stderr.split())
    assert invoke(["queue", "resume", "default"], env).exit_code == 0
    assert "is paused" not in invoke(["dlq", "redrive", "default"], env).stderr
    assert "is paused" not in invoke(["enqueue", "crm.sync", '{"account_id": "a-3"}'], env).stderr


def test_queue_ls_shows_where_each_queue_retry_budget_stands(jf_aws, jf_config):
    """An on-call trial's outage spent the budget: nothing showed it, or when it would refill."""
    import time as clock

    from jobframework.budget import RetryBudget

    env = cli_env(jf_config)
    store = StateStore(str(jf_config.state_table), jf_aws.client("dynamodb"))
    bucket = int(clock.time() // RetryBudget().bucket)
    store.budget_add(jf_config.endpoints("default").name, bucket, first_attempts=40, retries=100, ttl=600)
    rows = {r["lane"]: r for r in json.loads(invoke(["queue", "ls", "--json"], env).stdout)}
    assert rows["default"]["retry_budget"] == {
        "retries": 100,
        "allowed": 100,  # (the floor: 20 % of 40 first attempts is less)
        "first_attempts": 40,
        "spent": True,
    }
    assert rows["high"]["retry_budget"]["spent"] is False and rows["high"]["retry_budget"]["retries"] == 0
    table = invoke(["queue", "ls"], {**env, "COLUMNS": "250"})
    assert "SPENT: 100 of 100 retries" in table.stdout and "0 of 100 retries" in table.stdout, table.stdout
    assert "a spent retry budget dead-letters a failing job's retry at once" in " ".join(table.stderr.split())
    off = json.loads(invoke(["queue", "ls", "--json"], {**env, "JF_RETRY_BUDGET": "off"}).stdout)
    assert {r["retry_budget"] for r in off} == {None}


def test_an_enqueue_seconds_after_a_pause_says_a_consumer_may_still_take_it(jf_aws, jf_config):
    """An operator's trial paused a queue, enqueued at once, was told the job waits there, and it ran
    0.1 s later: a receive under way when the pause came returned it."""
    env = cli_env(jf_config)
    store = StateStore(str(jf_config.state_table), jf_aws.client("dynamodb"))
    pause(store, "default")
    soon = (datetime.now(UTC) + timedelta(seconds=3)).isoformat(timespec="seconds")
    store.client.update_item(  # (paused "now", with room for a slow machine's CLI call)
        TableName=store.table,
        Key={"pk": {"S": "pause"}, "sk": {"S": "default"}},
        UpdateExpression="SET paused_at = :at",
        ExpressionAttributeValues={":at": {"S": soon}},
    )
    sent = invoke(["enqueue", "crm.sync", '{"account_id": "a-1"}'], env)
    said = " ".join(sent.stderr.split())
    assert "the default queue is paused (since " in said and "s ago: a consumer's receive under way" in said
    an_hour_ago = (datetime.now(UTC) - timedelta(hours=1)).isoformat(timespec="seconds")
    store.client.update_item(
        TableName=store.table,
        Key={"pk": {"S": "pause"}, "sk": {"S": "default"}},
        UpdateExpression="SET paused_at = :at",
        ExpressionAttributeValues={":at": {"S": an_hour_ago}},
    )
    later = " ".join(invoke(["enqueue", "crm.sync", '{"account_id": "a-2"}'], env).stderr.split())
    assert f"paused (since {an_hour_ago})" in later and "ago" not in later
