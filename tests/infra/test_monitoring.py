"""The dashboard, the alarm topic and the stack outputs."""

from __future__ import annotations

import json

from aws_cdk.assertions import Match


def test_dashboard_shows_queues_dlqs_job_metrics_and_consumers(synth):
    [dashboard] = synth.template.find_resources("AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    for needle in (
        "ApproximateNumberOfMessagesVisible",
        "ApproximateAgeOfOldestMessage",
        '\\\\\\"JobFramework/jf-dev\\\\\\"',  # the SEARCH over the framework's EMF namespace
        '\\"Errors\\"',
        '\\"Throttles\\"',
        '\\"ConcurrentExecutions\\"',
    ):
        assert needle in body, needle
    for spec in synth.topology.queues:
        assert f"{spec.name}-dlq" in body


def test_alarm_topic_is_encrypted_with_a_key_cloudwatch_may_use(synth):
    synth.template.has_resource_properties(
        "AWS::SNS::Topic",
        {"TopicName": "jf-dev-alarms", "KmsMasterKeyId": {"Fn::GetAtt": [Match.any_value(), "Arn"]}},
    )
    synth.template.has_resource_properties(
        "AWS::KMS::Key",
        {
            "EnableKeyRotation": True,
            "KeyPolicy": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Principal": {"Service": "cloudwatch.amazonaws.com"},
                                "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
                            }
                        )
                    ]
                )
            },
        },
    )


def test_stack_writes_the_topology_parameter_and_outputs_the_queues(synth):
    synth.template.has_resource_properties(
        "AWS::SSM::Parameter", {"Name": "/jf/dev/topology", "Type": "String"}
    )
    synth.template.has_output("TopologyParameterName", {"Export": {"Name": "jf-dev-topology-parameter"}})
    for name in ("Critical", "High", "Default", "Low"):
        for suffix in ("QueueUrl", "QueueArn", "DeadLetterQueueUrl", "DeadLetterQueueArn"):
            synth.template.has_output(f"{name}{suffix}", {})
    synth.template.has_output("StateTableName", {})
    synth.template.has_output("IdempotencyTableName", {})


def test_retry_budget_alarms_per_priority_route_to_the_topic(synth):
    from jobframework.telemetry import SERVICE

    alarms = [
        a
        for a in synth.template.find_resources("AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("MetricName") == "DeadLettered"
    ]
    priorities = set()
    for alarm in alarms:
        props = alarm["Properties"]
        dimensions = {d["Name"]: d["Value"] for d in props["Dimensions"]}
        assert dimensions["Reason"] == "budget"
        assert dimensions["service"] == SERVICE  # Powertools adds it to every EMF metric
        assert props["Statistic"] == "Sum"
        [action] = props["AlarmActions"]
        assert action["Ref"].startswith("MonitoringAlarmTopic")
        priorities.add(dimensions["Priority"])
    assert priorities == {"critical", "high", "default", "low"}


def test_a_failed_saga_raises_an_alarm_routed_to_the_topic(synth):
    synth.template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        Match.object_like(
            {
                "MetricName": "SagaFailed",
                "Namespace": "JobFramework/jf-dev",
                "Dimensions": Match.array_with([{"Name": "Saga", "Value": "order.place"}]),
                "Threshold": 1,
                "AlarmActions": Match.any_value(),
            }
        ),
    )


def test_the_alarms_say_the_jf_commands_of_their_own_topology(synth):
    """A paged operator copies the command in the alarm: as plain `jf dlq ls` it read /jf/dev/topology,
    whichever stack paged (a trial's prod stack wrote /acme-notify/prod/topology)."""
    descriptions = [
        alarm["Properties"].get("AlarmDescription", "")
        for alarm in synth.template.find_resources("AWS::CloudWatch::Alarm").values()
    ]
    descriptions = [d for d in descriptions if isinstance(d, str)]  # (not those joined with tokens)
    parameter = synth.topology.topology_parameter
    for spec in synth.topology.queues:
        [dead] = [d for d in descriptions if d.startswith(f"{spec.dlq_name} holds dead letters")]
        assert f"`JF_TOPOLOGY_PARAMETER={parameter} jf dlq peek {spec.lane}`" in dead
        assert f"`JF_TOPOLOGY_PARAMETER={parameter} jf dlq redrive {spec.lane}`" in dead
    [saga] = [d for d in descriptions if d.startswith("saga order.place ended failed")]
    assert f"`JF_TOPOLOGY_PARAMETER={parameter} jf saga ls --status failed`" in saga
