"""Scheduled jobs as EventBridge Scheduler schedules."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from aws_cdk.assertions import Capture, Match

from jobframework.envelope import Envelope
from jobframework.scheduling import SCHEDULED_TIME


def test_schedule_input_is_a_valid_envelope_keyed_by_the_scheduled_time(synth):
    [spec] = synth.topology.schedules
    body = Capture()
    synth.template.has_resource_properties(
        "AWS::Scheduler::Schedule",
        {"Name": spec.name, "Target": Match.object_like({"Input": body})},
    )
    assert SCHEDULED_TIME in body.as_string()
    fired = (
        body.as_string()
        .replace(SCHEDULED_TIME, "2026-12-02T13:00:00Z")
        .replace("<aws.scheduler.execution-id>", "6f1c2f0e-3a5b-4a8e-9d8c-0b1e2c3d4e5f")
    )
    envelope = Envelope.model_validate_json(fired)
    assert envelope.type == "maintenance.cleanup"
    assert envelope.key == "schedule:maintenance.cleanup:2026-12-02T13:00:00Z"
    assert envelope.enqueued_at == datetime(2026, 12, 2, 13, tzinfo=UTC)
    assert envelope.payload == {"older_than_days": 30}


def test_schedule_sends_to_its_priority_queue_with_retries_and_a_dlq(synth):
    [spec] = synth.topology.schedules
    synth.template.has_resource_properties(
        "AWS::Scheduler::Schedule",
        {
            "Name": spec.name,
            "ScheduleExpression": spec.expression,
            "ScheduleExpressionTimezone": spec.timezone,
            "Target": Match.object_like(
                {
                    "Arn": {"Fn::GetAtt": [Match.string_like_regexp("^LowQueue"), "Arn"]},
                    "DeadLetterConfig": {
                        "Arn": {"Fn::GetAtt": [Match.string_like_regexp("^SchedulesDeadLetterQueue"), "Arn"]}
                    },
                    "RetryPolicy": {"MaximumRetryAttempts": 3, "MaximumEventAgeInSeconds": 3600},
                }
            ),
        },
    )


def test_schedule_failures_alarm_to_the_topic(synth):
    metrics = Capture()
    synth.template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "AlarmDescription": Match.string_like_regexp("^schedules in "),
            "Metrics": metrics,
            "Threshold": 1,
            "AlarmActions": [{"Ref": Match.string_like_regexp("^MonitoringAlarmTopic")}],
        },
    )
    names = {m["MetricStat"]["Metric"]["MetricName"] for m in metrics.as_array() if "MetricStat" in m}
    assert names == {
        "TargetErrorCount",
        "InvocationDroppedCount",
        "InvocationsFailedToBeSentToDeadLetterCount",
    }
    namespaces = {m["MetricStat"]["Metric"]["Namespace"] for m in metrics.as_array() if "MetricStat" in m}
    assert namespaces == {"AWS/Scheduler"}


def test_missed_run_alarm_on_the_heartbeat_treats_missing_data_as_breaching(synth):
    [spec] = synth.topology.schedules
    synth.template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "Namespace": "JobFramework/jf-dev",
            "MetricName": "Heartbeat",
            "Dimensions": Match.array_with(
                [{"Name": "JobType", "Value": spec.job}, {"Name": "service", "Value": "jobframework"}]
            ),
            "Statistic": "Sum",
            "Period": 3600,  # rate(1 hour): one-hour buckets, two of them empty
            "EvaluationPeriods": 2,
            "DatapointsToAlarm": 2,
            "Threshold": 1,
            "ComparisonOperator": "LessThanThreshold",
            "TreatMissingData": "breaching",
            "AlarmActions": [{"Ref": Match.string_like_regexp("^MonitoringAlarmTopic")}],
        },
    )


def test_dashboard_shows_scheduled_runs_skips_and_deferrals(synth):
    [dashboard] = synth.template.find_resources("AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    for metric in ("Heartbeat", "ScheduleSkipped", "ScheduleDeferred"):
        assert f'\\"{metric}\\"' in body, metric


def test_heartbeat_window_covers_two_intervals_within_cloudwatch_limits():
    from jobframework.cdk.schedules import heartbeat_window, schedule_gap

    assert schedule_gap("rate(15 minutes)") == 900
    assert schedule_gap("cron(0 3 ? * MON-FRI *)") == 3 * 86400  # Friday to Monday
    assert heartbeat_window(900) == (900, 2)
    assert heartbeat_window(60) == (300, 1)  # buckets of at least 5 minutes
    assert heartbeat_window(3 * 86400) == (86400, 6)
    assert heartbeat_window(7 * 86400) is None  # two weeks is beyond an alarm's 7-day look-back
