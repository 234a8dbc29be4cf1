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

from jobframework.cdk import job_widgets
from jobframework.cdk.defaults import (
    ALARM_PERIOD,
    DEPTH_GROWTH_MINUTES,
    DEPTH_GROWTH_PER_MINUTE,
    METRICS_SERVICE,
    alarm_on_any,
    jf_command,
)
from jobframework.cdk.priority_queue import PriorityQueue
from jobframework.core import METRICS_NAMESPACE
from jobframework.errors import ConfigurationError
from jobframework.topology import Topology

GRAPH_PERIOD = Duration.minutes(1)
SCHEDULE_GRAPH_PERIOD = Duration.hours(1)
MAX_EVALUATION_MINUTES = 24 * 60
"""An alarm's periods times their length may not pass a day."""


class Monitoring(Construct):
    """A CloudWatch dashboard over the queues, consumers and job metrics, and an SNS topic for alarms.

    Props:
        dashboard_name, topic_name: physical names.
        queues: the :class:`PriorityQueue` of each lane, in display order.
        functions: the consumer functions by name.
        metrics_namespace: the EMF namespace of the consumer's metrics (default ``JobFramework``;
            :class:`JobFramework` gives its deployment's, ``JobFramework/<app>-<stage>``).
        removal_policy: of the topic's KMS key; default ``DESTROY``.
        topology: when given, the rows per job type (enqueue-to-completion latency p50 and p95,
            processing time p95, first-attempt failure rate, dead-letter rate) and worker utilization
            (each function's concurrent executions over the concurrency it is allowed, with the
            :data:`~jobframework.cdk.defaults.UTILIZATION_BAND` marked); default ``None`` (neither).
        container_lanes: lanes that ``functions`` do not consume (served by container workers); they
            do not count in a function's allowed concurrency. Default none.
        depth_growth_per_minute, depth_growth_minutes: a queue's depth-growth alarm fires when its
            backlog grows by more than this many messages a minute for that many minutes in a row
            (default 50 and 5, :data:`~jobframework.cdk.defaults.DEPTH_GROWTH_PER_MINUTE`).
        alarm_topic: an existing topic (the team's paging topic, imported with
            ``sns.Topic.from_topic_arn``) that the alarms go to instead of a topic of their own (no
            topic and no key are created; ``key`` is ``None``). CloudWatch must be able to publish to
            it: an encrypted topic's key policy lets ``cloudwatch.amazonaws.com`` use the key.

    Attributes:
        topic, key, dashboard, budget_alarms (by priority, after :meth:`add_budget_alarms`),
        depth_growth_alarms (by queue name; routed to the topic), allowed_concurrency (by function
        name, with ``topology``). Call :meth:`route` to send an alarm to the topic,
        :meth:`add_schedule_widgets` for the scheduled jobs' runs, skips and deferrals.

    Raises:
        ConfigurationError: with ``topology``, a function that is not one of its consumers, or one
            whose lanes are all in ``container_lanes``; a growth window outside 1 to 1,440 minutes or a
            negative growth.

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
        topology: Topology | None = None,
        container_lanes: Sequence[str] = (),
        depth_growth_per_minute: float = DEPTH_GROWTH_PER_MINUTE,
        depth_growth_minutes: int = DEPTH_GROWTH_MINUTES,
        alarm_topic: sns.ITopic | None = None,
    ) -> None:
        if not 1 <= depth_growth_minutes <= MAX_EVALUATION_MINUTES or depth_growth_per_minute < 0:
            raise ConfigurationError(
                f"depth_growth_minutes={depth_growth_minutes}, depth_growth_per_minute="
                f"{depth_growth_per_minute:g}: the minutes must be 1 to {MAX_EVALUATION_MINUTES} (CloudWatch "
                "evaluates at most a day of one-minute periods) and the growth 0 or more messages a minute"
            )
        super().__init__(scope, construct_id)
        self._namespace = metrics_namespace
        self._jf = jf_command(topology.topology_parameter if topology is not None else None)
        """``jf`` as the alarms' texts write it (with the topology's parameter when given)."""
        self.budget_alarms: dict[str, cloudwatch.Alarm] = {}
        self.allowed_concurrency: dict[str, int] = {}
        self.depth_growth_alarms: dict[str, cloudwatch.Alarm] = {}
        self.key: kms.Key | None = None
        self.topic: sns.ITopic = alarm_topic or self._own_topic(topic_name, removal_policy)
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
                title="Jobs by type: succeeded, retried, dead-lettered a minute",
                left=[
                    cloudwatch.MathExpression(  # counts only: a sum of latencies would mean nothing
                        expression=(
                            f'SEARCH(\'Namespace="{metrics_namespace}" JobType (MetricName="Succeeded" OR '
                            'MetricName="Retried" OR MetricName="DeadLettered")\', \'Sum\', 60)'
                        ),
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
        growth = self._depth_growth_alarms(queues, depth_growth_per_minute, depth_growth_minutes)
        if topology is not None:
            jobs = list(topology.jobs)
            if jobs:
                self.dashboard.add_widgets(*job_widgets.latency_widgets(metrics_namespace, jobs))
            consumers = {c.name: c for c in topology.consumers}
            unknown = [name for name in functions if name not in consumers]
            if unknown:
                raise ConfigurationError(
                    f"functions {', '.join(unknown)} are not consumers of the topology "
                    f"({', '.join(consumers)}): key each function by its consumer's name, or leave out "
                    "`topology` (no utilization row then)"
                )
            for name in functions:
                self.allowed_concurrency[name] = job_widgets.allowed_concurrency(
                    consumers[name], topology.queues, container_lanes
                )
            row = job_widgets.rate_widgets(metrics_namespace, jobs) if jobs else []
            if self.allowed_concurrency:
                row.append(job_widgets.utilization_widget(functions, self.allowed_concurrency))
            self.dashboard.add_widgets(*row)
        self.dashboard.add_widgets(job_widgets.depth_growth_widget(growth, depth_growth_per_minute))

    def _depth_growth_alarms(
        self, queues: Sequence[PriorityQueue], per_minute: float, minutes: int
    ) -> dict[str, cloudwatch.IMetric]:
        """One alarm per queue on the rate of change of its depth (``DIFF`` of the visible messages a
        minute), routed to the topic: the backlog grows faster than the consumers drain it, long
        before the age of the oldest message reaches the target latency. Returns the growth series."""
        growth: dict[str, cloudwatch.IMetric] = {}
        for i, q in enumerate(queues):
            series = cloudwatch.MathExpression(  # ids unique in the dashboard's growth graph
                expression=f"DIFF(depth{i})",
                using_metrics={
                    f"depth{i}": q.queue.metric_approximate_number_of_messages_visible(
                        period=ALARM_PERIOD, statistic="Maximum"
                    )
                },
                label=q.queue_name,
                period=ALARM_PERIOD,
            )
            alarm = cloudwatch.Alarm(
                self,
                f"{q.node.id}DepthGrowthAlarm",
                alarm_description=(
                    f"{q.queue_name}'s backlog grew by more than {per_minute:g} messages a minute for "
                    f"{minutes} minutes: producers outpace the consumers (throttled, failing and retrying, "
                    "or too little concurrency); see the dashboard's utilization and failure rates"
                ),
                metric=series,
                threshold=per_minute,
                evaluation_periods=minutes,
                datapoints_to_alarm=minutes,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
            self.depth_growth_alarms[q.queue_name] = alarm
            growth[q.queue_name] = series
        self.route(*self.depth_growth_alarms.values())
        return growth

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

    def _own_topic(self, topic_name: str, removal_policy: RemovalPolicy) -> sns.Topic:
        """The alarm topic, encrypted with a key of its own that CloudWatch may use."""
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
        return sns.Topic(self, "AlarmTopic", topic_name=topic_name, master_key=self.key, enforce_ssl=True)

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
                        f"saga {name} ended failed: a compensation was dead-lettered; see "
                        f"`{self._jf} saga ls --status failed`, fix the cause and redrive the compensation's "
                        "dead letter"
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
                    f"a retry budget of the {priority} queues' jobs is exhausted (a queue's, or one a "
                    "job names with retry_budget=; the dead letters' jf-error names it): failing jobs are "
                    "dead-lettered with reason budget instead of retried (a downstream is likely "
                    "failing); redrive them once it recovers"
                ),
                metric=metric,
                threshold=threshold,
            )
            self.budget_alarms[priority] = alarm
            alarms.append(alarm)
        self.route(*alarms)
        return alarms
