"""Least privilege, cdk-nag and cfn-lint over the synthesized app."""

from __future__ import annotations

import json
from typing import Any

from aws_cdk import Validations
from cfnlint.api import ManualArgs, lint  # type: ignore[import-untyped]

RESOURCE_STAR_ALLOWED = {
    # X-Ray active tracing: PutTraceSegments/PutTelemetryRecords have no resource-level permissions.
    "xray:PutTraceSegments",
    "xray:PutTelemetryRecords",
    # CloudWatch metrics (PutMetricData has no resource-level permissions); the consumer publishes
    # EMF through its logs today, so nothing uses it yet.
    "cloudwatch:PutMetricData",
    # The container workers' task execution role pulls the image: GetAuthorizationToken has no resource.
    "ecr:GetAuthorizationToken",
}


def _identity_statements(template: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    found: list[tuple[str, dict[str, Any]]] = []
    for logical_id, resource in template["Resources"].items():
        props = resource.get("Properties", {})
        if resource["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            documents = [props["PolicyDocument"]]
        elif resource["Type"] == "AWS::IAM::Role":
            documents = [p["PolicyDocument"] for p in props.get("Policies", [])]
        else:
            continue
        for document in documents:
            found.extend((logical_id, s) for s in document["Statement"])
    return found


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_iam_statements_have_no_wildcard_actions(synth):
    statements = _identity_statements(synth.template_json())
    assert statements
    for logical_id, statement in statements:
        for action in _as_list(statement["Action"]):
            assert "*" not in action, f"{logical_id}: {action}"


def test_iam_resource_star_only_where_aws_requires_it(synth):
    star_actions: set[str] = set()
    for logical_id, statement in _identity_statements(synth.template_json()):
        if "*" in _as_list(statement["Resource"]):
            actions = set(_as_list(statement["Action"]))
            assert actions <= RESOURCE_STAR_ALLOWED, f"{logical_id}: {sorted(actions)} on Resource '*'"
            star_actions |= actions
    assert star_actions == {"xray:PutTraceSegments", "xray:PutTelemetryRecords", "ecr:GetAuthorizationToken"}


def _producer_statements(synth) -> list[dict[str, Any]]:
    template = synth.template_json()
    [policy_id] = [k for k in template["Resources"] if k.startswith("ExampleProducerDefaultPolicy")]
    statements: list[dict[str, Any]] = template["Resources"][policy_id]["Properties"]["PolicyDocument"][
        "Statement"
    ]
    return statements


def _with_action_prefix(statements: list[dict[str, Any]], prefix: str) -> list[dict[str, Any]]:
    return [s for s in statements if any(a.startswith(prefix) for a in _as_list(s["Action"]))]


def test_enqueue_grant_is_send_to_the_four_queues_and_read_of_the_topology(synth):
    statements = _producer_statements(synth)
    sqs = _with_action_prefix(statements, "sqs:")
    assert {a for s in sqs for a in s["Action"]} == {
        "sqs:SendMessage",
        "sqs:GetQueueAttributes",
        "sqs:GetQueueUrl",
    }
    queues = {s["Resource"]["Fn::GetAtt"][0] for s in sqs}
    assert {q.split("Queue")[0] for q in queues} == {"Critical", "High", "Default", "Low"}
    assert not any("DeadLetter" in q for q in queues)
    ssm = [s for s in _with_action_prefix(statements, "ssm:") if "TopologyParameter" in json.dumps(s)]
    assert ssm
    assert {a for s in ssm for a in _as_list(s["Action"])} <= {
        "ssm:DescribeParameters",
        "ssm:GetParameters",
        "ssm:GetParameter",
        "ssm:GetParameterHistory",
    }


def test_enqueue_grant_has_nothing_beyond_what_a_producer_uses(synth):
    actions = {a for s in _producer_statements(synth) for a in _as_list(s["Action"])}
    assert actions == {
        "sqs:SendMessage",
        "sqs:GetQueueAttributes",
        "sqs:GetQueueUrl",
        "ssm:DescribeParameters",
        "ssm:GetParameters",
        "ssm:GetParameter",
        "ssm:GetParameterHistory",
        "s3:PutObject",
        "dynamodb:GetItem",
        "dynamodb:Query",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
        "scheduler:CreateSchedule",
        "scheduler:DeleteSchedule",  # client.cancel of a job delayed past 15 minutes
        "iam:PassRole",
    }


def test_enqueue_grant_touches_only_dedup_job_saga_and_debounce_items_of_the_state_table(synth):
    """``JobClient.status`` is a Query of the job's items; a debounced enqueue joins ``debounce#<key>``:
    both were refused (tests on the embedded AWS check no IAM)."""
    [statement, key_records] = _with_action_prefix(_producer_statements(synth), "dynamodb:")
    assert sorted(statement["Action"]) == [
        "dynamodb:DeleteItem",
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:Query",
        "dynamodb:UpdateItem",
    ]
    assert statement["Resource"]["Fn::GetAtt"][0].startswith("TablesStateTable")
    assert statement["Condition"] == {
        "ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["dedup#*", "job#*", "saga#*", "debounce#*"]}
    }
    # status and cancel read a tracked idempotent job's start in its idempotency record
    assert key_records["Action"] == "dynamodb:GetItem"
    assert key_records["Resource"]["Fn::GetAtt"][0].startswith("TablesIdempotencyTable")
    assert key_records["Condition"] == {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["jf#*"]}}


def _role_statements(template: dict[str, Any], role: str) -> list[dict[str, Any]]:
    return [s for logical_id, s in _identity_statements(template) if logical_id.startswith(role)]


def test_every_consumer_may_write_a_batchs_statuses_and_read_ordered_groups(synth):
    """The consumer writes a batch's statuses with BatchWriteItem and reads ordered groups' heads with
    BatchGetItem: without them every tracked job's outcome was refused (logged, never written)."""
    template = synth.template_json()
    for role in ("WorkersCriticalRole", "WorkersSharedRole", "ContainerWorkersLowTaskTaskRole"):
        on_state = [
            s
            for s in _role_statements(template, role)
            if "TablesStateTable" in json.dumps(s["Resource"]) and "dynamodb:GetItem" in _as_list(s["Action"])
        ]
        actions = {a for s in on_state for a in _as_list(s["Action"])}
        assert {"dynamodb:BatchWriteItem", "dynamodb:BatchGetItem"} <= actions, (role, sorted(actions))


def test_every_consumer_may_send_to_every_queue(synth):
    """A consumer hands records back as copies to its own queue (rate and concurrency limits, releases,
    deferred runs) and sends a saga's next step to that step's lane: SendMessage was on its DLQs only."""
    template = synth.template_json()
    for role in ("WorkersCriticalRole", "WorkersSharedRole", "ContainerWorkersLowTaskTaskRole"):
        sends = [s for s in _role_statements(template, role) if "sqs:SendMessage" in _as_list(s["Action"])]
        queues = {json.dumps(s["Resource"]) for s in sends}
        for lane in ("Critical", "High", "Default", "Low"):
            assert any(f'"{lane}Queue' in q for q in queues), (role, lane, sorted(queues))


def test_enqueue_grant_puts_objects_of_the_payload_bucket_only(synth):
    [statement] = _with_action_prefix(_producer_statements(synth), "s3:")
    assert statement["Action"] == "s3:PutObject"
    assert statement["Resource"] == {"Fn::Join": ["", [{"Fn::GetAtt": ["PayloadBucket", "Arn"]}, "/*"]]}


def test_enqueue_grant_creates_schedules_in_the_delay_group_and_passes_only_the_scheduler_role(synth):
    statements = _producer_statements(synth)
    [create] = _with_action_prefix(statements, "scheduler:")
    assert create["Action"] == ["scheduler:CreateSchedule", "scheduler:DeleteSchedule"]  # (a cancel's)
    assert json.dumps(create["Resource"]).endswith(':schedule/jf-dev-delays/*"]]}')
    [pass_role] = _with_action_prefix(statements, "iam:")
    assert pass_role["Action"] == "iam:PassRole"
    assert pass_role["Resource"]["Fn::GetAtt"][0].startswith("DelaysSchedulerRole")
    assert pass_role["Condition"] == {"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}}


def test_signing_keys_are_readable_by_producers_consumers_and_the_api(synth):
    template = synth.template_json()
    readers = set()
    for logical_id, statement in _identity_statements(template):
        if "parameter/jf/dev/signing-keys" in json.dumps(statement["Resource"]):
            assert statement["Action"] == "ssm:GetParameter"
            readers.add(logical_id.split("DefaultPolicy")[0])
    assert readers == {
        "ExampleProducer",
        "WorkersCriticalRole",
        "WorkersSharedRole",
        "ApiRole",
        "ContainerWorkersLowTaskTaskRole",
    }


def test_no_unacknowledged_cdk_nag_finding(synth):
    # app.synth() in the fixture raises on any unacknowledged finding; the report says so too.
    report = json.loads((synth.outdir / "validation-report.json").read_text())
    violations = [v for r in report["pluginReports"] for v in r.get("violations", [])]
    assert violations == []


def test_every_cdk_nag_acknowledgment_is_narrow_and_has_a_reason(synth):
    key = Validations.ACKNOWLEDGED_RULES_METADATA_KEY
    acknowledged = {}
    for construct in synth.stack.node.find_all():
        for entry in construct.node.metadata:
            if entry.type == key:
                for rule_id, reason in entry.data.items():
                    acknowledged[(construct.node.path, rule_id)] = reason
    assert all(reason for reason in acknowledged.values())
    # CDK acknowledges findings of its own template validation (the flow log's and the VPC's AZ lookup).
    acknowledged = {k: v for k, v in acknowledged.items() if not k[1].startswith("CloudFormation-Validate::")}
    stack = synth.stack.stack_name
    xray = "AwsSolutions::AwsSolutions-IAM5[Resource::*]"
    payload_objects = "AwsSolutions::AwsSolutions-IAM5[Resource::<PayloadBucket.Arn>/*]"
    delay_schedules = (
        "AwsSolutions::AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:scheduler:<AWS::Region>:"
        "<AWS::AccountId>:schedule/jf-dev-delays/*]"
    )
    codedeploy_policy = (
        "AwsSolutions::AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
        "AWSCodeDeployRoleForLambdaLimited]"
    )
    jobs = f"{stack}/Default"  # the JobFramework construct of the stack
    assert set(acknowledged) == {
        (f"{jobs}/Workers/CriticalDeploymentGroup/ServiceRole", codedeploy_policy),
        (f"{jobs}/Workers/SharedDeploymentGroup/ServiceRole", codedeploy_policy),
        (f"{jobs}/ContainerWorkers/LowTask", "AwsSolutions::AwsSolutions-ECS2"),
        (f"{jobs}/ContainerWorkers/LowTask/ExecutionRole", xray),
        (f"{jobs}/ContainerWorkers/LowTask/TaskRole", payload_objects),
        (f"{jobs}/Workers/CriticalRole", xray),
        (f"{jobs}/Workers/SharedRole", xray),
        (f"{jobs}/Api/Role", xray),
        (f"{jobs}/Workers/CriticalRole", payload_objects),
        (f"{jobs}/Workers/SharedRole", payload_objects),
        (f"{jobs}/Api/Role", payload_objects),
        (f"{stack}/ExampleProducer", payload_objects),
        (f"{jobs}/Api/Role", delay_schedules),
        (f"{stack}/ExampleProducer", delay_schedules),
        # consumers enqueue too (a saga's wait beyond 15 minutes, a job's own long delay)
        (f"{jobs}/Workers/CriticalRole", delay_schedules),
        (f"{jobs}/Workers/SharedRole", delay_schedules),
        (f"{jobs}/ContainerWorkers/LowTask/TaskRole", delay_schedules),
        (f"{jobs}/Payloads/Bucket", "AwsSolutions::AwsSolutions-S1"),
        (f"{jobs}/Schedules/DeadLetterQueue", "AwsSolutions::AwsSolutions-SQS3"),
    }
    assert all(len(reason) > 40 for reason in acknowledged.values())


def test_cfn_lint_finds_no_errors_in_the_synthesized_template(synth):
    matches = lint(synth.template_path.read_text(), config=ManualArgs(regions=["us-east-1", "eu-west-1"]))
    errors = [m for m in matches if m.rule.severity == "error"]
    assert errors == [], "\n".join(str(m) for m in errors)
