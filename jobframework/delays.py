"""Delays beyond SQS's 15 minutes: EventBridge Scheduler one-time ``at()`` schedules.

The client creates a schedule that sends the envelope to the job's queue at the
due time and deletes itself afterwards (``ActionAfterCompletion=DELETE``). The
embedded AWS's Scheduler never fires, so ``jf dev`` calls :func:`fire_due` to do
what Scheduler would.
"""

from __future__ import annotations

import contextlib
import logging
import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from jobframework.errors import ConfigurationError

if TYPE_CHECKING:
    from jobframework.config import RuntimeConfig
    from jobframework.envelope import Envelope

log = logging.getLogger(__name__)

SCHEDULE_PREFIX = "jf-delay-"
_AT = re.compile(r"^at\((\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\)$")
_URL = re.compile(r"^https?://(?:sqs\.)?(?P<host>[^/]+)/(?P<account>\d{12})/(?P<name>[^/]+)$")


def queue_arn(url: str, region: str | None) -> str:
    """The ARN of the queue at ``url`` (``https://sqs.us-east-1.amazonaws.com/123456789012/q``)."""
    match = _URL.match(url)
    if not match:
        raise ConfigurationError(f"cannot tell the queue ARN from its URL {url!r}")
    host = match["host"]
    found = re.match(r"^([a-z]{2}(?:-[a-z]+)+-\d)\.", host)
    region = found.group(1) if found else region or "us-east-1"
    return f"arn:aws:sqs:{region}:{match['account']}:{match['name']}"


def schedule_name(job_id: str) -> str:
    return f"{SCHEDULE_PREFIX}{job_id}"[:64]


def create_one_time_schedule(
    scheduler: Any, config: RuntimeConfig, envelope: Envelope, delay: int, queue_url: str
) -> str:
    """Create the ``at()`` schedule that sends ``envelope`` to ``queue_url`` after ``delay`` seconds.

    Returns the schedule's name.

    Raises:
        ConfigurationError: no Scheduler role is configured (``JF_SCHEDULER_ROLE_ARN``).
    """
    if not config.scheduler_role_arn:
        raise ConfigurationError(
            "delays over 15 minutes need EventBridge Scheduler: set JF_SCHEDULER_ROLE_ARN "
            "(the stack's SchedulerRoleArn output)"
        )
    due = datetime.now(UTC) + timedelta(seconds=delay)
    name = schedule_name(envelope.id)
    scheduler.create_schedule(
        Name=name,
        GroupName=config.schedule_group,
        ScheduleExpression=f"at({due:%Y-%m-%dT%H:%M:%S})",
        ScheduleExpressionTimezone="UTC",
        FlexibleTimeWindow={"Mode": "OFF"},
        ActionAfterCompletion="DELETE",
        Target={
            "Arn": queue_arn(queue_url, config.region),
            "RoleArn": config.scheduler_role_arn,
            "Input": envelope.to_body(),
            "RetryPolicy": {"MaximumEventAgeInSeconds": 86_400, "MaximumRetryAttempts": 185},
        },
        Description=f"jobframework: {envelope.type} job {envelope.id}",
    )
    return name


def delete_one_time_schedule(scheduler: Any, group: str, job_id: str) -> None:
    """Delete the ``at()`` schedule of ``job_id`` (a cancel of a job delayed past 15 minutes); one that
    is gone already (it fired, or was deleted) is not an error."""
    with contextlib.suppress(scheduler.exceptions.ResourceNotFoundException):
        scheduler.delete_schedule(Name=schedule_name(job_id), GroupName=group)


def due_time(expression: str) -> datetime | None:
    """The UTC time of an ``at(...)`` expression, ``None`` for other expressions."""
    match = _AT.match(expression.strip())
    return datetime.fromisoformat(match.group(1)).replace(tzinfo=UTC) if match else None


def fire_due(scheduler: Any, sqs: Any, group: str = "default", now: datetime | None = None) -> int:
    """Do what Scheduler does for one-time delay schedules that are due: send, then delete.

    Returns how many were fired. A schedule whose send fails is kept and fired on a later call.
    ``now``: the time to fire as of, an aware ``datetime`` (a test's way to move time on).
    """
    if now is not None and (not isinstance(now, datetime) or now.tzinfo is None):
        raise TypeError(
            f"now must be an aware datetime, e.g. datetime.now(UTC) + timedelta(days=30); got {now!r}"
        )
    now = now or datetime.now(UTC)
    fired = 0
    pages = scheduler.get_paginator("list_schedules").paginate(GroupName=group, NamePrefix=SCHEDULE_PREFIX)
    for page in pages:
        for summary in page.get("Schedules", []):
            schedule = scheduler.get_schedule(Name=summary["Name"], GroupName=group)
            due = due_time(schedule.get("ScheduleExpression", ""))
            if due is None or due > now:
                continue
            target = schedule["Target"]
            name = target["Arn"].rsplit(":", 1)[-1]
            try:
                url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
                sqs.send_message(QueueUrl=url, MessageBody=target["Input"])
            except Exception:
                log.warning("firing delay schedule %s failed; will try again", summary["Name"], exc_info=True)
                continue
            scheduler.delete_schedule(Name=summary["Name"], GroupName=group)
            fired += 1
    return fired


def held_by_queue(scheduler: Any, group: str = "default") -> dict[str, int]:
    """How many delay schedules of ``group`` wait to send a job to each queue, by queue name.

    One ``ListSchedules`` call a page (of up to 100): each summary's ``Target.Arn`` names the queue,
    so no schedule is read on its own.

    Raises:
        botocore.exceptions.ClientError: the group cannot be listed (missing, or not allowed).

    Example:
        >>> held_by_queue(scheduler, "jf-dev-delays")  # doctest: +SKIP
        {'jf-dev-high': 2}
    """
    held: dict[str, int] = {}
    pages = scheduler.get_paginator("list_schedules").paginate(GroupName=group, NamePrefix=SCHEDULE_PREFIX)
    for page in pages:
        for summary in page.get("Schedules", []):
            arn = summary.get("Target", {}).get("Arn", "")
            if arn.startswith("arn:aws:sqs:"):
                name = arn.rsplit(":", 1)[-1]
                held[name] = held.get(name, 0) + 1
    return held
