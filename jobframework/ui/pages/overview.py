"""Overview: per queue its depth, in flight, delayed, age of oldest and DLQ; per job type the last hour."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from jobframework.budget import BudgetState, budget_state
from jobframework.dlq import DlqDepth
from jobframework.flow.pause import paused
from jobframework.ui.console import Console
from jobframework.ui.records import activity
from jobframework.ui.templating import render

log = logging.getLogger(__name__)

DLQ_SAMPLE = 100
"""Dead letters read per DLQ to find the oldest (the age is a lower bound past that)."""


@dataclass
class QueueRow:
    lane: str
    name: str
    depth: int
    in_flight: int
    delayed: int
    oldest_seconds: float | None
    dlq: DlqDepth
    paused_at: str | None = None
    """Since when ``jf queue pause`` (or the console) paused it; ``None``: consuming."""
    budget: BudgetState | None = None
    """Where the queue's retry budget stands (``None``: off, or no state table)."""


def budget_of(console: Console, queue_name: str) -> BudgetState | None:
    """The queue's retry budget in its window (an on-call trial's outage spent it unseen)."""
    try:
        return budget_state(console.store, queue_name, console.config.retry_budget, time.time())
    except Exception as exc:
        log.warning("cannot read the retry budget of %s: %s", queue_name, exc)
        return None


@dataclass
class SharedBudget:
    name: str
    jobs: list[str]
    state: BudgetState | None


def shared_budget_rows(console: Console) -> list[SharedBudget]:
    """The named retry budgets (``@job(retry_budget="crm")``) of the catalog's and the loaded jobs: a
    data team's outage spent one while every queue's read 0 retries."""
    from jobframework.budget_keys import named_budget_key, shared_budgets

    options: list[tuple[str, object]] = [(t, r.retry_budget) for t, r in console.config.jobs.items()]
    options += [(j.name, j.retry_budget) for j in console.registry or ()]
    return [
        SharedBudget(name, jobs, budget_of(console, named_budget_key(name)))
        for name, jobs in shared_budgets(options).items()
    ]


def oldest_age(console: Console, queue_name: str) -> float | None:
    """``ApproximateAgeOfOldestMessage`` of the last five minutes from CloudWatch (real AWS only).

    SQS itself does not report it; the embedded AWS has no CloudWatch metrics (``None`` there). A
    failed read (no ``cloudwatch:GetMetricStatistics`` permission, say) is logged and shows as unknown.
    """
    if console.cloudwatch is None:
        return None
    from botocore.exceptions import BotoCoreError, ClientError

    now = datetime.now(UTC)
    try:
        points = console.cloudwatch.get_metric_statistics(
            Namespace="AWS/SQS",
            MetricName="ApproximateAgeOfOldestMessage",
            Dimensions=[{"Name": "QueueName", "Value": queue_name}],
            StartTime=now - timedelta(minutes=5),
            EndTime=now + timedelta(minutes=1),
            Period=60,
            Statistics=["Maximum"],
        ).get("Datapoints", [])
    except (BotoCoreError, ClientError) as exc:
        log.warning("cannot read the age of the oldest message of %s from CloudWatch: %s", queue_name, exc)
        return None
    return max((float(p["Maximum"]) for p in points), default=None)


def queue_rows(console: Console) -> list[QueueRow]:
    dlqs = {d.priority: d for d in console.letters.depths(sample=DLQ_SAMPLE)}
    store = console.store
    stopped = paused(store) if store is not None else {}
    rows = []
    for lane in console.lanes:
        ep = console.config.endpoints(lane)
        attrs: dict[str, Any] = console.sqs.get_queue_attributes(
            QueueUrl=ep.url,
            AttributeNames=[
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesNotVisible",
                "ApproximateNumberOfMessagesDelayed",
            ],
        )["Attributes"]
        rows.append(
            QueueRow(
                lane=lane,
                name=ep.name,
                depth=int(attrs.get("ApproximateNumberOfMessages", 0)),
                in_flight=int(attrs.get("ApproximateNumberOfMessagesNotVisible", 0)),
                delayed=int(attrs.get("ApproximateNumberOfMessagesDelayed", 0)),
                oldest_seconds=oldest_age(console, ep.name),
                dlq=dlqs[lane],
                paused_at=stopped.get(lane),
                budget=budget_of(console, ep.name),
            )
        )
    return rows


def overview(request: Request) -> Response:
    console: Console = request.app.state.console
    store = console.store
    types, found = activity(store) if store is not None else ([], None)
    return render(
        request,
        "overview.html",
        page="overview",
        queues=queue_rows(console),
        shared_budgets=shared_budget_rows(console),
        activity=types,
        activity_complete=found.complete if found is not None else True,
        has_store=store is not None,
    )


routes = [Route("/", overview, name="overview")]
