"""Long delays: the schedule group and the role EventBridge Scheduler assumes."""

from __future__ import annotations

import json

from aws_cdk.assertions import Match


def _scheduler_role(synth):
    roles = synth.template.find_resources(
        "AWS::IAM::Role",
        {
            "Properties": {
                "AssumeRolePolicyDocument": {
                    "Statement": [Match.object_like({"Principal": {"Service": "scheduler.amazonaws.com"}})]
                }
            }
        },
    )
    return {k: r for k, r in roles.items() if k.startswith("DelaysSchedulerRole")}


def test_delay_schedule_group_exists(synth):
    synth.template.has_resource_properties("AWS::Scheduler::ScheduleGroup", {"Name": "jf-dev-delays"})


def test_scheduler_role_is_trusted_by_scheduler_for_this_account_and_group_only(synth):
    [role] = _scheduler_role(synth).values()
    [statement] = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Action"] == "sts:AssumeRole"
    assert statement["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
    sources = json.dumps(statement["Condition"]["ArnLike"]["aws:SourceArn"])
    assert ":schedule-group/jf-dev-delays" in sources
    assert ":schedule/jf-dev-delays/*" in sources


def test_scheduler_role_may_only_send_to_the_four_job_queues(synth):
    [role_id] = _scheduler_role(synth)
    template = synth.template_json()
    [policy] = [
        r
        for r in template["Resources"].values()
        if r["Type"] == "AWS::IAM::Policy" and r["Properties"]["Roles"] == [{"Ref": role_id}]
    ]
    [statement] = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Action"] == "sqs:SendMessage"
    queues = {r["Fn::GetAtt"][0] for r in statement["Resource"]}
    assert {q.split("Queue")[0] for q in queues} == {"Critical", "High", "Default", "Low"}
    assert not any("DeadLetter" in q for q in queues)


def test_functions_get_the_scheduler_role_and_group(synth):
    for function in synth.functions().values():
        variables = function["Properties"]["Environment"]["Variables"]
        assert variables["JF_SCHEDULE_GROUP"] == "jf-dev-delays"  # a literal: no dependency on the group
        assert variables["JF_SCHEDULER_ROLE_ARN"]["Fn::GetAtt"][0].startswith("DelaysSchedulerRole")


def test_failed_delay_deliveries_alarm_to_the_topic(synth):
    synth.template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "AlarmDescription": Match.string_like_regexp("^delayed jobs in jf-dev-delays"),
            "AlarmActions": [{"Ref": Match.string_like_regexp("^MonitoringAlarmTopic")}],
        },
    )
