"""How a ``jf worker`` lane's Fargate service scales: target tracking on messages visible per running
task (the SQS-recommended backlog metric, as metric math: the L2 policy takes none), and a step policy
that starts the first task when messages wait and none runs."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from constructs import Construct

from jobframework.cdk.defaults import ALARM_PERIOD, alarm_on_any

CONTAINER_INSIGHTS_NAMESPACE = "ECS/ContainerInsights"


def backlog_policy(
    scope: Construct,
    lid: str,
    target: appscaling.ScalableTarget,
    *,
    cluster_name: str,
    queue_name: str,
    service_name: str,
    backlog_per_task: int,
    scale_out_cooldown: int,
    scale_in_cooldown: int,
) -> appscaling.CfnScalingPolicy:
    """Target tracking on ``visible / running`` (the SQS-recommended backlog per task); the L2 policy
    takes no metric math, hence the L1."""
    cfn = appscaling.CfnScalingPolicy
    return cfn(
        scope,
        f"{lid}BacklogPerTaskPolicy",
        policy_name=f"{service_name}-backlog-per-task",
        policy_type="TargetTrackingScaling",
        scaling_target_id=target.scalable_target_id,
        target_tracking_scaling_policy_configuration=cfn.TargetTrackingScalingPolicyConfigurationProperty(
            target_value=backlog_per_task,
            scale_out_cooldown=scale_out_cooldown,
            scale_in_cooldown=scale_in_cooldown,
            customized_metric_specification=cfn.CustomizedMetricSpecificationProperty(
                metrics=[
                    cfn.TargetTrackingMetricDataQueryProperty(
                        id="visible",
                        metric_stat=cfn.TargetTrackingMetricStatProperty(
                            metric=cfn.TargetTrackingMetricProperty(
                                namespace="AWS/SQS",
                                metric_name="ApproximateNumberOfMessagesVisible",
                                dimensions=[
                                    cfn.TargetTrackingMetricDimensionProperty(
                                        name="QueueName", value=queue_name
                                    )
                                ],
                            ),
                            stat="Sum",
                        ),
                        return_data=False,
                    ),
                    cfn.TargetTrackingMetricDataQueryProperty(
                        id="running",
                        metric_stat=cfn.TargetTrackingMetricStatProperty(
                            metric=cfn.TargetTrackingMetricProperty(
                                namespace=CONTAINER_INSIGHTS_NAMESPACE,
                                metric_name="RunningTaskCount",
                                dimensions=[
                                    cfn.TargetTrackingMetricDimensionProperty(
                                        name="ClusterName", value=cluster_name
                                    ),
                                    cfn.TargetTrackingMetricDimensionProperty(
                                        name="ServiceName", value=service_name
                                    ),
                                ],
                            ),
                            stat="Average",
                        ),
                        return_data=False,
                    ),
                    cfn.TargetTrackingMetricDataQueryProperty(
                        id="backlog_per_task",
                        expression="visible / running",
                        label="messages visible per running task",
                        return_data=True,
                    ),
                ]
            ),
        ),
    )


def wake_from_zero(
    scope: Construct,
    lid: str,
    target: appscaling.ScalableTarget,
    *,
    cluster_name: str,
    queue_name: str,
    service_name: str,
) -> cloudwatch.Alarm:
    """With no task running, ``visible / running`` has no value and target tracking cannot act: a
    step policy starts one task when messages wait and none runs (target tracking takes over)."""
    wake = appscaling.StepScalingAction(
        scope,
        f"{lid}WakeFromZero",
        scaling_target=target,
        adjustment_type=appscaling.AdjustmentType.EXACT_CAPACITY,
        cooldown=Duration.seconds(60),
    )
    wake.add_adjustment(adjustment=1, lower_bound=0)
    alarm = alarm_on_any(
        scope,
        f"{lid}WakeAlarm",
        description=f"messages wait in {queue_name} and no worker task runs: start one",
        metric=cloudwatch.MathExpression(
            expression="IF(visible > 0 AND FILL(running, 0) == 0, 1, 0)",
            using_metrics={
                "visible": cloudwatch.Metric(
                    namespace="AWS/SQS",
                    metric_name="ApproximateNumberOfMessagesVisible",
                    dimensions_map={"QueueName": queue_name},
                    statistic="Maximum",
                    period=ALARM_PERIOD,
                ),
                "running": cloudwatch.Metric(
                    namespace=CONTAINER_INSIGHTS_NAMESPACE,
                    metric_name="RunningTaskCount",
                    dimensions_map={
                        "ClusterName": cluster_name,
                        "ServiceName": service_name,
                    },
                    statistic="Maximum",
                    period=ALARM_PERIOD,
                ),
            },
            label="waiting with no task",
            period=ALARM_PERIOD,
        ),
    )
    alarm.add_alarm_action(cw_actions.ApplicationScalingAction(wake))
    return alarm
