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
    assert star_actions == {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}


def test_enqueue_grant_is_send_to_the_four_queues_and_read_of_the_topology(synth):
    template = synth.template_json()
    [policy_id] = [k for k in template["Resources"] if k.startswith("ExampleProducerDefaultPolicy")]
    statements = template["Resources"][policy_id]["Properties"]["PolicyDocument"]["Statement"]
    sqs = [s for s in statements if any(a.startswith("sqs:") for a in _as_list(s["Action"]))]
    assert {a for s in sqs for a in s["Action"]} == {
        "sqs:SendMessage",
        "sqs:GetQueueAttributes",
        "sqs:GetQueueUrl",
    }
    queues = {s["Resource"]["Fn::GetAtt"][0] for s in sqs}
    assert {q.split("Queue")[0] for q in queues} == {"Critical", "High", "Default", "Low"}
    assert not any("DeadLetter" in q for q in queues)
    ssm = [s for s in statements if s not in sqs]
    assert {a for s in ssm for a in _as_list(s["Action"])} <= {
        "ssm:DescribeParameters",
        "ssm:GetParameters",
        "ssm:GetParameter",
        "ssm:GetParameterHistory",
    }
    assert all("TopologyParameter" in json.dumps(s["Resource"]) for s in ssm)


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
    stack = synth.stack.stack_name
    assert set(acknowledged) == {
        (f"{stack}/Workers/CriticalRole", "AwsSolutions::AwsSolutions-IAM5[Resource::*]"),
        (f"{stack}/Workers/SharedRole", "AwsSolutions::AwsSolutions-IAM5[Resource::*]"),
        (f"{stack}/Schedules/DeadLetterQueue", "AwsSolutions::AwsSolutions-SQS3"),
    }
    assert all(len(reason) > 40 for reason in acknowledged.values())


def test_cfn_lint_finds_no_errors_in_the_synthesized_template(synth):
    matches = lint(synth.template_path.read_text(), config=ManualArgs(regions=["us-east-1", "eu-west-1"]))
    errors = [m for m in matches if m.rule.severity == "error"]
    assert errors == [], "\n".join(str(m) for m in errors)
