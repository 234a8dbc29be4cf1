"""`jf queue purge`: the jobs waiting in a queue deleted before they run (a backfill called off), the
tracked ones cancelled; what a purge cannot see is said."""

from __future__ import annotations

import json
from typing import Any

from jobframework.state import JobState
from jobframework.testing import receive_all
from tests.functional.conftest_local import cli_env, invoke

from . import flow_jobs
from .flow_jobs import Item


def _purge(flow: Any, *args: str) -> Any:
    env = {
        **cli_env(flow.config),
        "JF_JOBS": "",
        "JF_TOPOLOGY_PARAMETER": str(flow.config.topology_parameter),
    }
    return invoke(["queue", "purge", *args], env)


def _visible(flow: Any) -> int:
    attrs = flow.sqs.get_queue_attributes(
        QueueUrl=flow.url("default"), AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    return int(attrs["ApproximateNumberOfMessages"])


def test_a_purge_deletes_what_it_selects_and_cancels_the_tracked_ones(flow):
    backfill = flow.client.enqueue_many(
        [flow_jobs.by_tenant.request(Item(name=f"b{n}", tenant="bigco")) for n in range(3)]
    )
    kept = flow.client.enqueue(flow_jobs.by_tenant, Item(name="s0", tenant="smallco"))
    flow.client.enqueue_many([flow_jobs.fast.request(Item(name=f"bigco-fast{n}")) for n in range(2)])

    dry = _purge(flow, "default", "--type", "f.tenant", "--match", "bigco", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert dry.output.splitlines()[0] == "would delete 3 jobs from the default queue (3 f.tenant)"
    assert _visible(flow) == 6  # (the messages it held are visible again at once)

    done = _purge(flow, "default", "--type", "f.tenant", "--match", "bigco", "--yes", "--json")
    assert done.exit_code == 0, done.output
    said = json.loads(done.stdout)
    assert (said["deleted"], said["by_type"], said["cancelled"]) == (3, {"f.tenant": 3}, 3)
    for result in backfill:
        status = flow.client.status(result.id)
        assert status is not None and status.status is JobState.CANCELLED, status
    left = receive_all(flow.sqs, flow.url("default"), attempts=1)
    names = sorted(json.loads(m["Body"])["payload"]["name"] for m in left)
    assert names == ["bigco-fast0", "bigco-fast1", "s0"]
    status = flow.client.status(kept.id)
    assert status is not None and status.status is JobState.QUEUED


def test_a_purge_of_everything_says_what_it_could_not_see(flow):
    flow.client.enqueue_many([flow_jobs.fast.request(Item(name=f"f{n}")) for n in range(3)])
    flow.sqs.receive_message(
        QueueUrl=flow.url("default"), MaxNumberOfMessages=1, VisibilityTimeout=60
    )  # "running"
    done = _purge(flow, "default", "--yes")
    assert done.exit_code == 0, done.output
    assert "deleted 2 jobs from the default queue (2 f.fast)" in done.output
    assert "jf: note: 1 in flight is left (running, a retry's delay" in done.output  # (stderr)


def test_a_purge_needs_yes_and_a_lane_of_the_topology(flow):
    flow.client.enqueue(flow_jobs.fast, Item(name="f"))
    refused = _purge(flow, "default")
    assert refused.exit_code == 2 and "add --yes to confirm" in refused.output
    unknown = _purge(flow, "low-cpu", "--yes")
    assert unknown.exit_code == 2 and "this topology has no low-cpu queue" in unknown.output
    assert len(receive_all(flow.sqs, flow.url("default"), attempts=1)) == 1


def test_dry_runs_spend_no_receive_of_the_jobs_they_leave(flow):
    """An on-call trial's six dry runs moved every job left to the DLQ (maxReceiveCount 5), and each
    pass had counted as an attempt of each job."""
    sent = flow.client.enqueue_many([flow_jobs.by_tenant.request(Item(name=f"k{n}")) for n in range(3)])
    for _ in range(6):
        dry = _purge(flow, "default", "--type", "f.nothing", "--dry-run")
        assert dry.exit_code == 0, dry.output
    assert receive_all(flow.sqs, flow.config.endpoints("default").dlq_url, attempts=1) == []
    assert _visible(flow) == 3
    flow.consume("default")
    assert sorted((r["name"], r["attempt"]) for r in flow_jobs.ran) == [("k0", 1), ("k1", 1), ("k2", 1)]
    assert all(flow.client.status(r.id).status is JobState.SUCCEEDED for r in sent)


def test_a_purge_names_ids_it_did_not_find_the_lane_of_a_type_and_refuses_a_fifo_lane(flow):
    flow.client.enqueue(flow_jobs.fast, Item(name="f"))
    missing = _purge(flow, "default", "--id", "no-such-job", "--yes")
    assert (
        missing.exit_code == 1
        and "no job waiting in the default queue has the id no-such-job" in missing.output
    )
    elsewhere = _purge(flow, "default", "--type", "f.ok", "--dry-run")  # (f.ok runs on high)
    assert elsewhere.exit_code == 0
    assert "no job waiting in the default queue matched: f.ok runs on the high queue" in elsewhere.stderr
    fifo = _purge(flow, "default-fifo", "--yes")
    assert fifo.exit_code == 2 and "an ordered (FIFO) lane is not purged job by job" in fifo.output
    assert _visible(flow) == 1
