"""Safe handler deploys: event source mappings invoke a ``live`` alias that CodeDeploy shifts to each new
version as a canary, rolling back on the consumer's errors or on new dead letters."""

from __future__ import annotations

import json

from aws_cdk.assertions import Match

from tests.infra.conftest import CONTAINER_LANES


def _lambda_consumers(synth):
    return [c for c in synth.topology.consumers if set(c.lanes) - set(CONTAINER_LANES)]


def test_each_consumer_has_a_live_alias_on_a_published_version(synth):
    for consumer in _lambda_consumers(synth):
        cid = consumer.name.capitalize()
        synth.template.has_resource_properties(
            "AWS::Lambda::Alias",
            {
                "Name": "live",
                "FunctionName": {"Ref": Match.string_like_regexp(f"^Workers{cid}Function")},
                "FunctionVersion": {
                    "Fn::GetAtt": [
                        Match.string_like_regexp(f"^Workers{cid}FunctionCurrentVersion"),
                        "Version",
                    ]
                },
            },
        )
    assert len(synth.template.find_resources("AWS::Lambda::Version")) == len(_lambda_consumers(synth))


def test_event_source_mappings_invoke_the_alias_not_latest(synth):
    mappings = synth.template.find_resources("AWS::Lambda::EventSourceMapping")
    assert mappings
    for mapping in mappings.values():
        function_name = json.dumps(mapping["Properties"]["FunctionName"])
        assert "Alias" in function_name and ":live" in function_name, function_name


def test_alias_updates_go_through_a_canary_deployment_group(synth):
    aliases = synth.template.find_resources("AWS::Lambda::Alias")
    for alias in aliases.values():
        update = alias["UpdatePolicy"]["CodeDeployLambdaAliasUpdate"]
        group_id = update["DeploymentGroupName"]["Ref"]
        group = synth.template.find_resources("AWS::CodeDeploy::DeploymentGroup")[group_id]["Properties"]
        assert group["DeploymentConfigName"] == "CodeDeployDefault.LambdaCanary10Percent5Minutes"
        assert group["DeploymentStyle"] == {
            "DeploymentOption": "WITH_TRAFFIC_CONTROL",
            "DeploymentType": "BLUE_GREEN",
        }


def test_deployment_groups_roll_back_on_consumer_errors_and_new_dead_letters(synth):
    groups = synth.template.find_resources("AWS::CodeDeploy::DeploymentGroup")
    alarms = synth.template.find_resources("AWS::CloudWatch::Alarm")
    by_consumer = {}
    for group in groups.values():
        props = group["Properties"]
        assert props["AutoRollbackConfiguration"] == {
            "Enabled": True,
            "Events": ["DEPLOYMENT_FAILURE", "DEPLOYMENT_STOP_ON_REQUEST", "DEPLOYMENT_STOP_ON_ALARM"],
        }
        assert props["AlarmConfiguration"]["Enabled"] is True
        names = [a["Name"]["Ref"] for a in props["AlarmConfiguration"]["Alarms"]]
        metrics = sorted(alarms[n]["Properties"]["MetricName"] for n in names)
        by_consumer[names[0]] = metrics
    assert sorted(by_consumer.values()) == [
        ["Errors", "NumberOfMessagesSent"],  # critical: its one lane
        # shared: high and default (low is on Fargate)
        ["Errors", "NumberOfMessagesSent", "NumberOfMessagesSent"],
    ]


def test_errors_alarm_watches_the_alias_and_dead_letter_inflow_watches_the_dlq(synth):
    synth.template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "MetricName": "Errors",
            "Namespace": "AWS/Lambda",
            "Dimensions": Match.array_with([Match.object_like({"Name": "Resource"})]),
            "Statistic": "Sum",
            "Threshold": 1,
            "TreatMissingData": "notBreaching",
        },
    )
    inflow = synth.template.find_resources(
        "AWS::CloudWatch::Alarm", {"Properties": {"MetricName": "NumberOfMessagesSent"}}
    )
    assert len(inflow) == len(synth.topology.queues)
    for alarm in inflow.values():
        [dimension] = alarm["Properties"]["Dimensions"]
        assert "DeadLetterQueue" in dimension["Value"]["Fn::GetAtt"][0]
        assert "AlarmActions" not in alarm["Properties"]  # a rollback signal; the DLQ depth alarm pages
