"""The priority queues and their dead-letter queues."""

from __future__ import annotations

from aws_cdk.assertions import Capture, Match

from jobframework.jobs import Priority


def test_four_queues_each_redrive_to_its_own_dlq_with_the_topology_max_receive_count(synth):
    for spec in synth.topology.queues:
        dlq_arn = Capture()
        synth.template.has_resource_properties(
            "AWS::SQS::Queue",
            {
                "QueueName": spec.name,
                "RedrivePolicy": {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": spec.max_receive_count},
            },
        )
        dlq_id = dlq_arn.as_object()["Fn::GetAtt"][0]
        dlq = synth.template.find_resources("AWS::SQS::Queue")[dlq_id]
        assert dlq["Properties"]["QueueName"] == spec.dlq_name
    assert (
        len(
            synth.template.find_resources(
                "AWS::SQS::Queue", {"Properties": {"RedrivePolicy": Match.any_value()}}
            )
        )
        == 4
    )


def test_each_dlq_allows_redrive_only_from_its_source_queue(synth):
    for spec in synth.topology.queues:
        synth.template.has_resource_properties(
            "AWS::SQS::Queue",
            {
                "QueueName": spec.dlq_name,
                "RedriveAllowPolicy": {
                    "redrivePermission": "byQueue",
                    "sourceQueueArns": [
                        {
                            "Fn::Join": [
                                "",
                                Match.array_with([Match.string_like_regexp(f":{spec.name}$")]),
                            ]
                        }
                    ],
                },
            },
        )


def test_dlqs_keep_messages_longer_than_their_source_queues(synth):
    for spec in synth.topology.queues:
        synth.template.has_resource_properties(
            "AWS::SQS::Queue", {"QueueName": spec.name, "MessageRetentionPeriod": spec.retention}
        )
        synth.template.has_resource_properties(
            "AWS::SQS::Queue", {"QueueName": spec.dlq_name, "MessageRetentionPeriod": spec.dlq_retention}
        )
        assert spec.dlq_retention > spec.retention


def test_every_queue_has_server_side_encryption(synth):
    queues = synth.template.find_resources("AWS::SQS::Queue")
    assert len(queues) == 9  # 4 queues, 4 DLQs, the schedules' DLQ
    for logical_id, queue in queues.items():
        assert queue["Properties"].get("SqsManagedSseEnabled") is True, logical_id


def test_every_queue_has_a_policy_denying_requests_without_tls(synth):
    queue_ids = set(synth.template.find_resources("AWS::SQS::Queue"))
    covered: set[str] = set()
    for policy in synth.template.find_resources("AWS::SQS::QueuePolicy").values():
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        if any(
            s["Effect"] == "Deny" and s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}
            for s in statements
        ):
            covered.update(ref["Ref"] for ref in policy["Properties"]["Queues"])
    assert covered == queue_ids


def test_visibility_timeout_is_at_least_six_times_the_consumer_timeout(synth):
    functions = synth.functions()
    timeout_by_name = {
        f["Properties"]["FunctionName"]: f["Properties"]["Timeout"] for f in functions.values()
    }
    for spec in synth.topology.queues:
        consumer = synth.topology.consumer(spec.consumer)
        timeout = timeout_by_name[consumer.function_name]
        visibility = Capture()
        synth.template.has_resource_properties(
            "AWS::SQS::Queue", {"QueueName": spec.name, "VisibilityTimeout": visibility}
        )
        assert visibility.as_number() >= 6 * timeout, spec.name


def test_each_queue_alarms_when_its_oldest_message_is_older_than_the_target_latency(synth):
    expected = {Priority.CRITICAL: 10, Priority.HIGH: 60, Priority.DEFAULT: 900, Priority.LOW: 3600}
    for spec in synth.topology.queues:
        synth.template.has_resource_properties(
            "AWS::CloudWatch::Alarm",
            {
                "MetricName": "ApproximateAgeOfOldestMessage",
                "Namespace": "AWS/SQS",
                "Dimensions": [
                    {"Name": "QueueName", "Value": {"Fn::GetAtt": [Match.any_value(), "QueueName"]}}
                ],
                "Threshold": expected[spec.priority],
                "ComparisonOperator": "GreaterThanThreshold",
                "AlarmActions": [{"Ref": Match.string_like_regexp("^MonitoringAlarmTopic")}],
            },
        )


def test_each_dlq_alarms_on_its_first_dead_letter(synth):
    alarms = synth.template.find_resources(
        "AWS::CloudWatch::Alarm",
        {
            "Properties": {
                "MetricName": "ApproximateNumberOfMessagesVisible",
                "Threshold": 1,
                "ComparisonOperator": "GreaterThanOrEqualToThreshold",
                "AlarmActions": [{"Ref": Match.string_like_regexp("^MonitoringAlarmTopic")}],
            }
        },
    )
    assert len(alarms) == 5  # the four DLQs and the schedules' DLQ
