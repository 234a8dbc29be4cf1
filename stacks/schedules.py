"""``@job(schedule=...)`` as EventBridge Scheduler schedules that send an envelope to the job's queue."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aws_cdk import Acknowledgment, Duration, RemovalPolicy, TimeZone, Validations
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_scheduler_targets as targets
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from jobframework.jobs import Priority
from jobframework.scheduling import schedule_input
from jobframework.topology import MAX_RETENTION, ScheduleSpec
from stacks.defaults import ALARM_PERIOD, secure_queue


class Schedules(Construct):
    """One EventBridge Scheduler schedule per scheduled job, in the app's own schedule group.

    Each firing sends :func:`jobframework.scheduling.schedule_input`: a valid envelope whose key
    includes ``<aws.scheduler.scheduled-time>``, so a duplicate firing is a duplicate key.

    Props:
        schedules: the topology's schedule specs; queues: the SQS queue of each priority.
        group_name: the schedule group (the alarm watches the group's metrics).
        dead_letter_queue_name: where Scheduler puts firings it could not deliver.
        retry_attempts: default 3; max_event_age: seconds, default 3600.
        removal_policy: default ``DESTROY``.

    Attributes:
        group, schedules (by job name), dead_letter_queue, failure_alarm, dead_letter_alarm, alarms.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        schedules: Sequence[ScheduleSpec],
        queues: Mapping[Priority, sqs.IQueue],
        group_name: str,
        dead_letter_queue_name: str,
        retry_attempts: int = 3,
        max_event_age: int = 3600,
        removal_policy: RemovalPolicy = RemovalPolicy.DESTROY,
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
        )
        Validations.of(self.dead_letter_queue).acknowledge(
            Acknowledgment(
                id="AwsSolutions::AwsSolutions-SQS3",
                reason="this queue is itself a dead-letter queue: EventBridge Scheduler's, for firings it "
                "could not deliver to the job queues",
            )
        )
        self.schedules: dict[str, scheduler.Schedule] = {}
        for spec in schedules:
            target = targets.SqsSendMessage(
                queues[spec.priority],
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
        self.failure_alarm = cloudwatch.Alarm(
            self,
            "FailureAlarm",
            alarm_description=(
                f"schedules in {group_name} failed to enqueue their job (target errors, dropped invocations "
                "or failed dead-letter sends)"
            ),
            metric=failures,
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        self.dead_letter_alarm = cloudwatch.Alarm(
            self,
            "DeadLetterAlarm",
            alarm_description=(
                f"{dead_letter_queue_name} holds schedule firings that never reached their queue"
            ),
            metric=self.dead_letter_queue.metric_approximate_number_of_messages_visible(
                period=ALARM_PERIOD, statistic="Maximum"
            ),
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        self.alarms: list[cloudwatch.Alarm] = [self.failure_alarm, self.dead_letter_alarm]
