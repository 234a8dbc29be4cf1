"""AWS's published guidance for Lambda consumers of SQS (issue 12, item 16): the visibility timeout
covers six function timeouts plus the batching window; a crashing or throttled consumer pages."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import App, Stack

from jobframework.cdk.priority_queue import PriorityQueue
from jobframework.errors import ConfigurationError


def _consumer_of_each_queue(template: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any], int]]:
    """(queue, function, MaximumBatchingWindowInSeconds) for every event source mapping of the template,
    followed from the mapping to the alias it invokes and the function behind it."""
    resources: dict[str, Any] = template["Resources"]
    found = []
    for mapping in (r for r in resources.values() if r["Type"] == "AWS::Lambda::EventSourceMapping"):
        props = mapping["Properties"]
        queue = resources[props["EventSourceArn"]["Fn::GetAtt"][0]]
        alias_id = props["FunctionName"]["Fn::Join"][1][0]["Fn::Select"][1]["Fn::Split"][1]["Ref"]
        function = resources[resources[alias_id]["Properties"]["FunctionName"]["Ref"]]
        found.append((queue, function, props.get("MaximumBatchingWindowInSeconds", 0)))
    return found


@pytest.mark.parametrize("app", ["synth", "profiles"])
def test_visibility_timeout_is_six_function_timeouts_plus_the_batching_window(app, request):
    synth = request.getfixturevalue(app)
    consumers = _consumer_of_each_queue(synth.template_json())
    assert consumers
    windows = []
    for queue, function, window in consumers:
        visibility = queue["Properties"]["VisibilityTimeout"]
        assert visibility >= 6 * function["Properties"]["Timeout"] + window, queue["Properties"]["QueueName"]
        windows.append(window)
    if app == "profiles":
        assert max(windows) >= 5  # the batched lanes really have a window (2 s and 5 s)


def test_profiles_batched_lane_is_not_short_by_its_window(profiles):
    """The batched io lane (window 5 s) gets exactly 6x the timeout plus 5 s, not 6x alone."""
    spec = next(q for q in profiles.topology.queues if q.lane == "high-io")
    consumer = profiles.topology.consumer(spec.consumer)
    assert spec.batching_window == 5
    assert spec.visibility_timeout == 6 * consumer.timeout + 5
    profiles.template.has_resource_properties(
        "AWS::SQS::Queue", {"QueueName": spec.name, "VisibilityTimeout": spec.visibility_timeout}
    )


def test_priority_queue_refuses_a_visibility_short_of_the_batching_window():
    with pytest.raises(
        ConfigurationError, match=r"visibility timeout 180s .* plus its batching window \(5s\).*185s"
    ):
        PriorityQueue(
            Stack(App(), "S"),
            "Q",
            queue_name="q",
            dead_letter_queue_name="q-dlq",
            consumer_timeout=30,
            batching_window=5,
            visibility_timeout=180,
            max_receive_count=5,
        )


def _lambda_alarms(template: dict[str, Any], metric: str) -> list[dict[str, Any]]:
    return [
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::CloudWatch::Alarm"
        and r["Properties"].get("Namespace") == "AWS/Lambda"
        and r["Properties"].get("MetricName") == metric
    ]


def _routed_to_topic(alarm: dict[str, Any]) -> bool:
    actions = alarm.get("AlarmActions", [])
    return bool(actions) and all(a.get("Ref", "").startswith("MonitoringAlarmTopic") for a in actions)


@pytest.mark.parametrize("metric", ["Errors", "Throttles"])
def test_every_consumer_has_an_errors_and_a_throttles_alarm_routed_to_the_topic(synth, metric):
    template = synth.template_json()
    alarms = _lambda_alarms(template, metric)
    consumers = set(synth.stack.jobs.workers.functions)
    assert len(alarms) == len(consumers) == 2  # critical and shared (low runs on Fargate here)
    for alarm in alarms:
        assert _routed_to_topic(alarm), alarm["AlarmDescription"]
        assert alarm["OKActions"] == alarm["AlarmActions"]
        assert alarm["Threshold"] == 1 and alarm["Statistic"] == "Sum"
        assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
        assert alarm["TreatMissingData"] == "notBreaching"


def test_profiles_app_alarms_on_throttles_of_each_lambda_consumer(profiles):
    throttles = _lambda_alarms(profiles.template_json(), "Throttles")
    assert len(throttles) == len(profiles.stack.jobs.workers.functions) >= 2
    assert all(_routed_to_topic(a) for a in throttles)
