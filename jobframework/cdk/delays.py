"""Long delays: the schedule group and role that one-time ``at()`` schedules of the client use.

``client.enqueue(..., delay=...)`` over 15 minutes calls ``scheduler:CreateSchedule`` in this group
with ``ActionAfterCompletion=DELETE`` and this role as the target's role; Scheduler assumes the role
to send the envelope to the job's queue when the time comes.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from jobframework.cdk.defaults import ALARM_PERIOD, acknowledge_wildcard, alarm_on_any, pseudo

SCHEDULER_PRINCIPAL = "scheduler.amazonaws.com"


class DelayedJobs(Construct):
    """A schedule group for one-time delays and the role EventBridge Scheduler assumes to deliver them.

    Props:
        group_name: the schedule group (``JF_SCHEDULE_GROUP``), e.g. ``jf-dev-delays``.
        queues: the queues a delayed job may be sent to (the four priority queues).
        removal_policy: of the group; default ``DESTROY``.

    Attributes:
        group, role (``JF_SCHEDULER_ROLE_ARN``), group_name, schedules_arn (the ARN pattern of the
        group's schedules), failure_alarm, alarms.

    The role trusts ``scheduler.amazonaws.com`` only for schedules of this account and group
    (``aws:SourceAccount``, ``aws:SourceArn``) and may only ``sqs:SendMessage`` to the given queues.
    The group's name, not a reference to it, goes into the functions' environment, so that the
    functions do not depend on the group resource.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        group_name: str,
        queues: Sequence[sqs.IQueue],
        removal_policy: RemovalPolicy = RemovalPolicy.DESTROY,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.group_name = group_name
        self.group = scheduler.ScheduleGroup(
            self, "Group", schedule_group_name=group_name, removal_policy=removal_policy
        )
        self.schedules_arn = stack.format_arn(
            service="scheduler", resource="schedule", resource_name=f"{group_name}/*"
        )
        group_arn = stack.format_arn(service="scheduler", resource="schedule-group", resource_name=group_name)
        self.role = iam.Role(
            self,
            "SchedulerRole",
            assumed_by=iam.ServicePrincipal(
                SCHEDULER_PRINCIPAL,
                conditions={
                    "StringEquals": {"aws:SourceAccount": stack.account},
                    # AWS's confused-deputy example names the group; either form stays in this group.
                    "ArnLike": {"aws:SourceArn": [group_arn, self.schedules_arn]},
                },
            ),
            description=f"EventBridge Scheduler sends delayed jobs of {group_name} to the job queues",
        )
        self.role.add_to_policy(
            iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[q.queue_arn for q in queues])
        )
        self.failure_alarm = alarm_on_any(
            self,
            "FailureAlarm",
            description=(
                f"delayed jobs in {group_name} failed to reach their queue (target errors or dropped "
                "invocations); the jobs are lost unless re-enqueued"
            ),
            metric=cloudwatch.MathExpression(
                expression="errors + dropped",
                using_metrics={
                    "errors": self.group.metric_target_errors(period=ALARM_PERIOD, statistic="Sum"),
                    "dropped": self.group.metric_dropped(period=ALARM_PERIOD, statistic="Sum"),
                },
                label="failed delayed-job deliveries",
                period=ALARM_PERIOD,
            ),
        )
        self.alarms: list[cloudwatch.Alarm] = [self.failure_alarm]

    @property
    def schedules_finding(self) -> str:
        """cdk-nag's IAM5 finding for a grant on the group's schedules."""
        stack = Stack.of(self)  # (a stack pinned to an account and region writes them out)
        arn = ":".join(
            (
                "arn",
                pseudo(stack.partition, "Partition"),
                "scheduler",
                pseudo(stack.region, "Region"),
                pseudo(stack.account, "AccountId"),
            )
        )
        return f"Resource::{arn}:schedule/{self.group_name}/*"

    def grant_schedule(self, grantee: iam.IGrantable) -> None:
        """What a producer needs for a long delay: ``scheduler:CreateSchedule`` on this group's schedules
        and ``iam:PassRole`` of the scheduler role (to Scheduler only); and ``scheduler:DeleteSchedule``
        there, which a cancel of such a job makes (:meth:`grant_unschedule`)."""
        iam.Grant.add_to_principal(
            grantee=grantee,
            actions=["scheduler:CreateSchedule", "scheduler:DeleteSchedule"],
            resource_arns=[self.schedules_arn],
        )
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["iam:PassRole"],
                resources=[self.role.role_arn],
                conditions={"StringEquals": {"iam:PassedToService": SCHEDULER_PRINCIPAL}},
            )
        )
        acknowledge_wildcard(
            grantee,
            self.schedules_finding,
            "one-time schedules are named per job at enqueue time; the grant is CreateSchedule, and "
            "DeleteSchedule for a cancel, in the framework's own delay group",
        )

    def grant_unschedule(self, grantee: iam.IGrantable) -> None:
        """What an operator's cancel of a job delayed past 15 minutes needs: ``scheduler:DeleteSchedule``
        on this group's schedules (the job's one-time schedule goes with it)."""
        iam.Grant.add_to_principal(
            grantee=grantee, actions=["scheduler:DeleteSchedule"], resource_arns=[self.schedules_arn]
        )
        acknowledge_wildcard(
            grantee,
            self.schedules_finding,
            "one-time schedules are named per job; a cancel deletes the cancelled job's, in the "
            "framework's own delay group",
        )
