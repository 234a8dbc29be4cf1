"""The dashboard and the alarm topic: every alarm of the framework is routed here."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from constructs import Construct

from jobframework.cdk.defaults import ALARM_PERIOD, METRICS_NAMESPACE, METRICS_SERVICE, alarm_on_any
from jobframework.cdk.priority_queue import PriorityQueue

GRAPH_PERIOD = Duration.minutes(1)
SCHEDULE_GRAPH_PERIOD = Duration.hours(1)


class Monitoring(Construct):
    """A CloudWatch dashboard over the queues, consumers and job metrics, and an SNS topic for alarms.

    Props:
        dashboard_name, topic_name: physical names.
        queues: the :class:`PriorityQueue` of each lane, in display order.
        functions: the consumer functions by name.
        metrics_namespace: the EMF namespace of the consumer's metrics (default ``JobFramework``).
        removal_policy: of the topic's KMS key; default ``DESTROY``.

    Attributes:
        topic, key, dashboard, budget_alarms (by priority, after :meth:`add_budget_alarms`).
        Call :meth:`route` to send an alarm to the topic, :meth:`add_schedule_widgets` for the scheduled
        jobs' runs, skips and deferrals.

    The topic is encrypted with a customer-managed key (CloudWatch cannot publish to a topic that
    uses the AWS-managed SNS key) whose policy lets CloudWatch use it; publishers need TLS.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        dashboard_name: str,
        topic_name: str,
        queues: Sequence[PriorityQueue],
        functions: Mapping[str, lambda_.IFunction],
        metrics_namespace: str = METRICS_NAMESPACE,
        removal_policy: RemovalPolicy = RemovalPolicy.DESTROY,
    ) -> None:
        super().__init__(scope, construct_id)
        self._namespace = metrics_namespace
        self.budget_alarms: dict[str, cloudwatch.Alarm] = {}
        self.key = kms.Key(
            self,
            "AlarmTopicKey",
            description=f"encrypts the {topic_name} SNS topic",
            enable_key_rotation=True,
            removal_policy=removal_policy,
        )
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowCloudWatchAlarmsToPublish",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["kms:Decrypt", "kms:GenerateDataKey"],
                resources=["*"],
            )
        )
        self.topic = sns.Topic(
            self, "AlarmTopic", topic_name=topic_name, master_key=self.key, enforce_ssl=True
        )
        self._action = cw_actions.SnsAction(self.topic)

        self.dashboard = cloudwatch.Dashboard(self, "Dashboard", dashboard_name=dashboard_name)
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Queue depth (visible messages)",
                left=[
                    q.queue.metric_approximate_number_of_messages_visible(
                        period=GRAPH_PERIOD, statistic="Maximum", label=q.queue_name
                    )
                    for q in queues
                ],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Age of oldest message (s)",
                left=[
                    q.queue.metric_approximate_age_of_oldest_message(
                        period=GRAPH_PERIOD, statistic="Maximum", label=q.queue_name
                    )
                    for q in queues
                ],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Dead letters (DLQ depth)",
                left=[
                    q.dead_letter_queue.metric_approximate_number_of_messages_visible(
                        period=GRAPH_PERIOD, statistic="Maximum", label=f"{q.queue_name}-dlq"
                    )
                    for q in queues
                ],
                width=8,
            ),
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Jobs by type (framework EMF metrics)",
                left=[
                    cloudwatch.MathExpression(
                        expression=f"SEARCH('Namespace=\"{metrics_namespace}\"', 'Sum', 60)",
                        label="",
                        period=GRAPH_PERIOD,
                    )
                ],
                width=24,
            ),
        )
        functions_in_order = list(functions.items())
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Consumer errors",
                left=[f.metric_errors(period=GRAPH_PERIOD, label=name) for name, f in functions_in_order],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Consumer throttles",
                left=[f.metric_throttles(period=GRAPH_PERIOD, label=name) for name, f in functions_in_order],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Consumer concurrency",
                left=[
                    f.metric("ConcurrentExecutions", period=GRAPH_PERIOD, statistic="Maximum", label=name)
                    for name, f in functions_in_order
                ],
                width=8,
            ),
        )

    def add_schedule_widgets(self, jobs: Sequence[str]) -> None:
        """A row for the scheduled jobs: runs (``Heartbeat``) and the runs skipped or deferred because
        their queue was backlogged (``ScheduleSkipped``, ``ScheduleDeferred``), per job, hourly sums."""
        if not jobs:
            return

        def per_job(metric_name: str) -> list[cloudwatch.IMetric]:
            return [
                cloudwatch.Metric(
                    namespace=self._namespace,
                    metric_name=metric_name,
                    dimensions_map={"JobType": job, "service": METRICS_SERVICE},
                    statistic="Sum",
                    period=SCHEDULE_GRAPH_PERIOD,
                    label=job,
                )
                for job in jobs
            ]

        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(title="Scheduled runs (Heartbeat)", left=per_job("Heartbeat"), width=8),
            cloudwatch.GraphWidget(
                title="Scheduled runs skipped (queue backlogged)", left=per_job("ScheduleSkipped"), width=8
            ),
            cloudwatch.GraphWidget(
                title="Scheduled runs deferred (queue backlogged)", left=per_job("ScheduleDeferred"), width=8
            ),
        )

    def route(self, *alarms: cloudwatch.Alarm) -> None:
        """Send the alarms' ALARM and OK transitions to the topic."""
        for alarm in alarms:
            alarm.add_alarm_action(self._action)
            alarm.add_ok_action(self._action)

    def add_saga_alarms(self, sagas: Sequence[str]) -> list[cloudwatch.Alarm]:
        """One alarm per saga on ``SagaFailed``: a compensation was dead-lettered and the saga stopped
        ``failed`` (never silently stuck). Routed to the topic.

        Args:
            sagas: the saga names, as the metric's ``Saga`` dimension.
        """
        alarms = []
        for name in sagas:
            construct_id = "".join(part.capitalize() for part in re.split(r"[^A-Za-z0-9]+", name))
            metric = cloudwatch.Metric(
                namespace=self._namespace,
                metric_name="SagaFailed",
                dimensions_map={"Saga": name, "service": METRICS_SERVICE},
                statistic="Sum",
                period=ALARM_PERIOD,
            )
            alarms.append(
                alarm_on_any(
                    self,
                    f"SagaFailed{construct_id}Alarm",
                    description=(
                        f"saga {name} ended failed: a compensation was dead-lettered; see `jf saga ls "
                        "--status failed`, fix the cause and redrive the compensation's dead letter"
                    ),
                    metric=metric,
                )
            )
        self.route(*alarms)
        return alarms

    def add_budget_alarms(self, priorities: Sequence[str], *, threshold: int = 1) -> list[cloudwatch.Alarm]:
        """One alarm per priority on the consumer's ``DeadLettered`` metric with ``Reason=budget``: the
        retry budget is spent and failing jobs go straight to the DLQ. Routed to the topic.

        Args:
            priorities: the priority names (``critical``, ``high``, ...), as the metric's dimension.
            threshold: dead letters a minute that raise the alarm; default 1.
        """
        alarms = []
        for priority in priorities:
            metric = cloudwatch.Metric(
                namespace=self._namespace,
                metric_name="DeadLettered",
                dimensions_map={"Reason": "budget", "Priority": priority, "service": METRICS_SERVICE},
                statistic="Sum",
                period=ALARM_PERIOD,
            )
            alarm = alarm_on_any(
                self,
                f"RetryBudget{priority.capitalize()}Alarm",
                description=(
                    f"the {priority} queue's retry budget is exhausted: failing jobs are dead-lettered "
                    "with reason budget instead of retried (a downstream is likely failing); redrive "
                    "them once it recovers"
                ),
                metric=metric,
                threshold=threshold,
            )
            self.budget_alarms[priority] = alarm
            alarms.append(alarm)
        self.route(*alarms)
        return alarms
