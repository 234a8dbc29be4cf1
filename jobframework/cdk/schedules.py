"""``@job(schedule=...)`` as EventBridge Scheduler schedules that send an envelope to the job's queue."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from aws_cdk import Acknowledgment, Annotations, Duration, RemovalPolicy, Stack, TimeZone, Validations
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_scheduler_targets as targets
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from jobframework.cdk.defaults import (
    ALARM_PERIOD,
    METRICS_SERVICE,
    alarm_on_any,
    secure_queue,
)
from jobframework.cdk.delays import SCHEDULER_PRINCIPAL
from jobframework.core import METRICS_NAMESPACE
from jobframework.scheduling import schedule_input
from jobframework.topology import MAX_RETENTION, ScheduleSpec

HEARTBEAT_MIN_PERIOD = 300
"""Seconds: the shortest heartbeat bucket (a run's metric lands when it is processed, not when it fires)."""
DAY = 86_400
MAX_ALARM_WINDOW = 7 * DAY
"""CloudWatch: period x evaluation periods is at most 7 days (1 day for periods under an hour)."""
_SAMPLE_START = datetime(2026, 1, 5, tzinfo=UTC)
"""Where the firing times of a cron schedule are sampled from (fixed, so that synth is deterministic)."""


def schedule_gap(expression: str, timezone: str = "UTC", *, samples: int = 120) -> int:
    """The longest time between two consecutive firings of a schedule expression, in seconds.

    ``rate(...)`` is exact; a ``cron(...)`` is sampled over its next ``samples`` firings (EventBridge
    syntax, via the local scheduler's clock, the one definition of what an expression means).

    Example:
        >>> schedule_gap("rate(1 hour)"), schedule_gap("cron(0 3 ? * MON-FRI *)")
        (3600, 259200)
    """
    from jobframework.local.scheduler import ScheduleClock

    clock = ScheduleClock(expression, timezone, start=_SAMPLE_START)
    if clock.rate is not None:
        return int(clock.rate.total_seconds())
    slots = []
    moment = _SAMPLE_START
    for _ in range(samples):
        slot = clock.next_after(moment)
        if slot is None:
            break
        slots.append(slot)
        moment = slot
    gaps = [int((b - a).total_seconds()) for a, b in itertools.pairwise(slots)]
    return max(gaps, default=MAX_ALARM_WINDOW + 1)


def heartbeat_window(gap: int) -> tuple[int, int] | None:
    """The alarm's ``(period, evaluation_periods)`` for a schedule whose runs are at most ``gap`` seconds
    apart: it alarms when no run was seen for about two gaps (one late run never pages, a stopped
    schedule pages within two intervals). ``None`` when two gaps exceed what an alarm can look back on
    (7 days), e.g. a weekly or monthly schedule.

    Example:
        >>> heartbeat_window(3600), heartbeat_window(60), heartbeat_window(86400), heartbeat_window(7 * 86400)
        ((3600, 2), (300, 1), (86400, 2), None)
    """
    window = 2 * gap
    if window > MAX_ALARM_WINDOW:
        return None
    period = min(DAY, max(HEARTBEAT_MIN_PERIOD, 60 * math.ceil(gap / 60)))
    return period, max(1, math.ceil(window / period))


class Schedules(Construct):
    """One EventBridge Scheduler schedule per scheduled job, in the app's own schedule group.

    Each firing sends :func:`jobframework.scheduling.schedule_input`: a valid envelope whose key
    includes ``<aws.scheduler.scheduled-time>``, so a duplicate firing is a duplicate key.

    Missed runs: the consumer writes the EMF metric ``Heartbeat`` (namespace
    ``JobFramework/<app>-<stage>``, dimensions ``JobType`` and ``service``) each time a scheduled job
    runs; one alarm per job fires when no heartbeat came for about two intervals
    (:func:`heartbeat_window`), and missing data is breaching, so a schedule that stopped firing, a queue
    that stopped draining and a consumer that cannot start all page. A run skipped or deferred because its
    queue is backlogged writes ``ScheduleSkipped`` / ``ScheduleDeferred`` instead (on the dashboard); a
    skipped run sends no heartbeat, so a queue backlogged for two intervals pages too.

    Props:
        schedules: the topology's schedule specs; queues: the SQS queue of each lane (``low``,
            ``low-cpu``).
        group_name: the schedule group (the alarm watches the group's metrics).
        dead_letter_queue_name: where Scheduler puts firings it could not deliver.
        retry_attempts: default 3; max_event_age: seconds, default 3600.
        metrics_namespace: the consumer's EMF namespace (default ``JobFramework``; :class:`JobFramework`
            gives its deployment's, ``JobFramework/<app>-<stage>``).
        removal_policy: default ``DESTROY``.

    Attributes:
        group, schedules, heartbeat_alarms (by job name; none for a schedule sparser than every 3.5
        days, with a synth warning), dead_letter_queue, failure_alarm, dead_letter_alarm, alarms.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        schedules: Sequence[ScheduleSpec],
        queues: Mapping[str, sqs.IQueue],
        group_name: str,
        dead_letter_queue_name: str,
        retry_attempts: int = 3,
        max_event_age: int = 3600,
        metrics_namespace: str = METRICS_NAMESPACE,
        removal_policy: RemovalPolicy = RemovalPolicy.DESTROY,
        encryption_key: kms.IKey | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.group = scheduler.ScheduleGroup(
            self, "Group", schedule_group_name=group_name, removal_policy=removal_policy
        )
        self.dead_letter_queue = secure_queue(
            self,
            "DeadLetterQueue",
            queue_name=dead_letter_queue_name,
            retention=MAX_RETENTION,
            removal_policy=removal_policy,
            encryption_key=encryption_key,
        )
        Validations.of(self.dead_letter_queue).acknowledge(
            Acknowledgment(
                id="AwsSolutions::AwsSolutions-SQS3",
                reason="this queue is itself a dead-letter queue: EventBridge Scheduler's, for firings it "
                "could not deliver to the job queues",
            )
        )
        # With a key of the deployment's, a role of its own (inside it: its key grant is acknowledged with
        # the rest); else the role the targets library shares in the stack.
        role = None
        if encryption_key is not None:
            role = iam.Role(
                self,
                "TargetRole",
                assumed_by=iam.ServicePrincipal(
                    SCHEDULER_PRINCIPAL,
                    conditions={"StringEquals": {"aws:SourceAccount": Stack.of(self).account}},
                ),
                description=f"EventBridge Scheduler sends the schedules of {group_name} to the job queues",
            )
        self.schedules: dict[str, scheduler.Schedule] = {}
        for spec in schedules:
            target = targets.SqsSendMessage(
                queues[spec.lane or spec.priority.value],
                role=role,
                input=scheduler.ScheduleTargetInput.from_text(schedule_input(spec)),
                dead_letter_queue=self.dead_letter_queue,
                retry_attempts=retry_attempts,
                max_event_age=Duration.seconds(max_event_age),
            )
            self.schedules[spec.job] = scheduler.Schedule(
                self,
                f"Schedule-{spec.job}",
                schedule_name=spec.name,
                schedule_group=self.group,
                description=f"jobframework: enqueue {spec.job} on {spec.expression} ({spec.timezone})",
                schedule=scheduler.ScheduleExpression.expression(
                    spec.expression, time_zone=TimeZone.of(spec.timezone)
                ),
                target=target,
            )

        failures = cloudwatch.MathExpression(
            expression="errors + dropped + dlqfailed",
            using_metrics={
                "errors": self.group.metric_target_errors(period=ALARM_PERIOD, statistic="Sum"),
                "dropped": self.group.metric_dropped(period=ALARM_PERIOD, statistic="Sum"),
                "dlqfailed": self.group.metric_failed_to_be_sent_to_dlq(period=ALARM_PERIOD, statistic="Sum"),
            },
            label="failed schedule invocations",
            period=ALARM_PERIOD,
        )
        self.failure_alarm = alarm_on_any(
            self,
            "FailureAlarm",
            description=(
                f"schedules in {group_name} failed to enqueue their job (target errors, dropped invocations "
                "or failed dead-letter sends)"
            ),
            metric=failures,
        )
        self.dead_letter_alarm = alarm_on_any(
            self,
            "DeadLetterAlarm",
            description=(f"{dead_letter_queue_name} holds schedule firings that never reached their queue"),
            metric=self.dead_letter_queue.metric_approximate_number_of_messages_visible(
                period=ALARM_PERIOD, statistic="Maximum"
            ),
        )
        self.heartbeat_alarms: dict[str, cloudwatch.Alarm] = {}
        for spec in schedules:
            window = heartbeat_window(schedule_gap(spec.expression, spec.timezone))
            if window is None:
                Annotations.of(self).add_warning_v2(
                    f"jobframework:heartbeat:{spec.job}",
                    f"{spec.job} runs less often than every 3.5 days ({spec.expression}): no missed-run "
                    "alarm (CloudWatch alarms look back 7 days at most); watch its Heartbeat metric",
                )
                continue
            period, evaluations = window
            self.heartbeat_alarms[spec.job] = cloudwatch.Alarm(
                self,
                f"Heartbeat-{spec.job}",
                alarm_description=(
                    f"scheduled job {spec.job} ({spec.expression}) has not run for "
                    f"{period * evaluations // 60} minutes: the schedule stopped, its queue is not drained "
                    "or backlogged (runs skipped), or the consumer fails before running it"
                ),
                metric=cloudwatch.Metric(
                    namespace=metrics_namespace,
                    metric_name="Heartbeat",
                    dimensions_map={"JobType": spec.job, "service": METRICS_SERVICE},
                    statistic="Sum",
                    period=Duration.seconds(period),
                ),
                threshold=1,
                evaluation_periods=evaluations,
                datapoints_to_alarm=evaluations,
                comparison_operator=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.BREACHING,
            )
        self.alarms: list[cloudwatch.Alarm] = [
            self.failure_alarm,
            self.dead_letter_alarm,
            *self.heartbeat_alarms.values(),
        ]
