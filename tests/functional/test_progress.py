"""A running job says how far it is (BullMQ's job.updateProgress, which a BullMQ trial's upload and
report pages poll): a tracked job's status shows it while it runs."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from pydantic import BaseModel

from jobframework.client import JobClient
from jobframework.consumer import consumer
from jobframework.jobs import JobContext, JobRegistry, job
from jobframework.state import StateStore
from jobframework.status import JobState
from jobframework.testing import consume_once, provision_fresh, run_inline
from tests.functional.conftest_local import cli_env, invoke, jf_aws

__all__ = ["jf_aws"]

registry = JobRegistry()
reached, release = threading.Event(), threading.Event()


class Report(BaseModel):
    report_id: str


@job("reports.render", registry=registry, track=True, idempotent=False)
def render(report: Report, ctx: JobContext) -> str:
    return _render(report, ctx)


@job("reports.keyed", registry=registry, track=True)  # (idempotent: its key's record holds its outcome)
def keyed(report: Report, ctx: JobContext) -> str:
    return _render(report, ctx)


@job("reports.async", registry=registry, track=True, idempotent=False)
async def rendered_async(report: Report, ctx: JobContext) -> str:
    """An async job's progress is written off its loop (the write is a blocking DynamoDB call)."""
    import asyncio

    ctx.set_progress(30, "on the loop")
    reached.set()
    while not release.is_set():
        await asyncio.sleep(0.01)
    return "done"


def _render(report: Report, ctx: JobContext) -> str:
    ctx.set_progress(10, "page 1 of 10")
    ctx.set_progress(20, "page 2 of 10")  # (within the second: the next write takes the latest)
    reached.set()
    release.wait(20)
    ctx.set_progress(100, "done")
    return f"{report.report_id}.pdf"


@pytest.mark.parametrize(
    "rendering", [render, keyed, rendered_async], ids=["not-idempotent", "idempotent", "async"]
)
def test_a_tracked_jobs_progress_shows_in_its_status_while_it_runs_and_not_after(
    jf_aws: Any, rendering: Any
) -> None:
    reached.clear()
    release.clear()
    _, config = provision_fresh(jf_aws.endpoint_url, registry)
    sqs = jf_aws.client("sqs")
    client = JobClient(config, registry=registry, sqs_client=sqs)
    sent = client.enqueue(rendering, Report(report_id="r-1"))
    handler = consumer(registry, config=config, sqs_client=sqs)
    url = config.endpoints("default").url
    worker = threading.Thread(target=consume_once, args=(handler, sqs, url))
    worker.start()
    try:
        assert reached.wait(20), "the job did not start"
        said = (30.0, "on the loop") if rendering is rendered_async else (10.0, "page 1 of 10")
        deadline = time.monotonic() + 10  # (an async job's write is made on the loop's executor)
        while (running := client.status(sent.id)) is not None and running.progress is None:
            assert time.monotonic() < deadline, "no progress written"
            time.sleep(0.05)
        assert running is not None and (running.progress, running.progress_note) == said
        shown = invoke(["status", sent.id], cli_env(config))
        assert f"progress:     {said[0]:g} % ({said[1]})" in shown.stdout, shown.output
        # A progress write is no change of state: a running job's start stays where it was (a last
        # trial's UI saw it move with each report).
        time.sleep(0.01)  # (times are written to the millisecond)
        StateStore(str(config.state_table), jf_aws.client("dynamodb")).jobs.set_progress(sent.id, 50, "x")
        assert client.status(sent.id).started_at == running.started_at  # type: ignore[union-attr]
    finally:
        release.set()
        worker.join(20)
    done = client.status(sent.id)
    assert done is not None and done.status is JobState.SUCCEEDED and done.progress is None


def test_progress_is_checked_and_kept_on_the_context_under_run_inline() -> None:
    @job("reports.count", registry=JobRegistry())
    def count(report: Report, ctx: JobContext) -> tuple[float, str | None] | None:
        ctx.set_progress(0.5)
        with pytest.raises(ValueError, match=r"from 0 to 100, got 150 \(for 4 of 10 done"):
            ctx.set_progress(150)
        return ctx.progress

    assert run_inline(count, {"report_id": "r-2"}) == (0.5, None)
