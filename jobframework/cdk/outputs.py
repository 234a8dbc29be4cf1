"""What a :class:`~jobframework.cdk.resources.JobResources` publishes: its topology parameter's value and
its CloudFormation outputs (``outputs=True``)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from aws_cdk import CfnOutput, Stack

from jobframework.cdk.defaults import lane_id

if TYPE_CHECKING:
    from jobframework.cdk.resources import JobResources


def add_outputs(resources: JobResources, prefix: str) -> None:
    """The CloudFormation outputs of ``resources``: each lane's queue and DLQ URL and ARN, the tables, the
    alarm topic, the payload bucket, the scheduler role, the API's URL, and the topology parameter's
    name (exported as ``<prefix>-topology-parameter``)."""
    for lane, q in resources.queues.items():
        name = lane_id(lane)
        CfnOutput(resources, f"{name}QueueUrl", value=q.queue.queue_url)
        CfnOutput(resources, f"{name}QueueArn", value=q.queue.queue_arn)
        CfnOutput(resources, f"{name}DeadLetterQueueUrl", value=q.dead_letter_queue.queue_url)
        CfnOutput(resources, f"{name}DeadLetterQueueArn", value=q.dead_letter_queue.queue_arn)
    CfnOutput(resources, "StateTableName", value=resources.tables.state_table.table_name)
    CfnOutput(resources, "IdempotencyTableName", value=resources.tables.idempotency_table.table_name)
    CfnOutput(resources, "AlarmTopicArn", value=resources.monitoring.topic.topic_arn)
    CfnOutput(resources, "PayloadBucketName", value=resources.payloads.bucket.bucket_name)
    CfnOutput(resources, "SchedulerRoleArn", value=resources.delays.role.role_arn)
    if resources.api is not None:
        CfnOutput(
            resources, "ApiUrl", value=resources.api.url, description="POST /jobs/{type}, GET /jobs/{id}"
        )
    CfnOutput(
        resources,
        "TopologyParameterName",
        value=resources.topology_parameter.parameter_name,
        export_name=f"{prefix}-topology-parameter",
        description="set JF_TOPOLOGY_PARAMETER to this in services that enqueue jobs",
    )


def parameter_value(resources: JobResources) -> str:
    """``RuntimeConfig`` JSON (what ``RuntimeConfig.from_parameter`` reads) plus the queue ARNs."""
    region = Stack.of(resources).region
    value = json.loads(resources.runtime_config.model_copy(update={"region": region}).model_dump_json())
    value["queue_arns"] = {
        lane: {"arn": q.queue.queue_arn, "dlq_arn": q.dead_letter_queue.queue_arn}
        for lane, q in resources.queues.items()
    }
    return json.dumps(value, separators=(",", ":"))
