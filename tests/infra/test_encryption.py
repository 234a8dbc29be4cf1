"""A customer-managed KMS key (``encryption_key=``): a fintech trial's security review asked for one,
and cdk-nag's PCI DSS pack flags its absence. Every queue, DLQ, table, the payload bucket and every log
group use it, and every role that sends, receives, reads or writes them may use it; cdk-nag passes."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
from aws_cdk import App, Stack, Validations
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks
from pydantic import BaseModel

from jobframework.cdk import JobFramework
from jobframework.jobs import JobRegistry, Schedule, job

REGISTRY = JobRegistry()


class Payout(BaseModel):
    payout_id: str = "nightly"


@job("payouts.send", registry=REGISTRY, track=True, priority="high")
def send(p: Payout) -> None: ...


@job("payouts.nightly", registry=REGISTRY, schedule=Schedule("cron(0 2 * * ? *)"))
def nightly(p: Payout) -> None: ...


@job("ledger.reconcile", registry=REGISTRY, priority="low")
def reconcile(p: Payout) -> None: ...


def _framework(stack: Stack, **props: Any) -> JobFramework:
    """The payouts' framework in ``stack`` (its code inline: nothing is bundled), with ``props``."""
    return JobFramework(
        stack,
        "Jobs",
        job_modules=["tests.infra.test_encryption"],
        registry=REGISTRY,
        app_name="payco",
        code=lambda_.Code.from_inline("def handler(event, context): ..."),
        **props,
    )


@pytest.fixture(scope="module")
def encrypted() -> tuple[Mapping[str, Any], str]:
    app = App()
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))  # an unacknowledged finding fails synth
    stack = Stack(app, "Payouts")
    key = kms.Key(stack, "PayoutsKey", enable_key_rotation=True)
    framework = _framework(
        stack,
        container_lanes=["low"],
        container_image=ecs.ContainerImage.from_registry("public.ecr.aws/example/worker:1"),
        encryption_key=key,
    )
    framework.grant_enqueue(
        iam.Role(stack, "Statements", assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com"))
    )
    framework.grant_operate(iam.Role(stack, "OnCall", assumed_by=iam.AccountRootPrincipal()))
    app.synth()
    return Template.from_stack(stack).to_json(), stack.get_logical_id(key.node.default_child)  # type: ignore[arg-type]


def _of(template: Mapping[str, Any], kind: str) -> dict[str, Any]:
    return {k: r["Properties"] for k, r in template["Resources"].items() if r["Type"] == kind}


def _names_key(value: object, key_id: str) -> bool:
    return key_id in json.dumps(value)


def test_every_queue_table_bucket_and_log_group_is_encrypted_with_the_key(encrypted):
    template, key_id = encrypted
    queues = _of(template, "AWS::SQS::Queue")
    assert len(queues) == 2 * 4 + 1  # each lane's queue and DLQ, and the schedules' DLQ
    assert all(_names_key(q.get("KmsMasterKeyId"), key_id) for q in queues.values()), queues
    tables = _of(template, "AWS::DynamoDB::Table")
    assert len(tables) == 2
    for table in tables.values():
        sse = table["SSESpecification"]
        assert sse["SSEEnabled"] is True and sse["SSEType"] == "KMS" and _names_key(sse, key_id)
    [bucket] = _of(template, "AWS::S3::Bucket").values()
    [rule] = bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "aws:kms" and _names_key(rule, key_id)
    groups = _of(template, "AWS::Logs::LogGroup")
    assert len(groups) >= 4 and all(_names_key(g.get("KmsKeyId"), key_id) for g in groups.values()), groups
    policy = template["Resources"][key_id]["Properties"]["KeyPolicy"]
    assert "logs." in json.dumps(policy)  # (CloudWatch Logs may use it for this account's log groups)


def test_every_role_that_touches_the_encrypted_resources_may_use_the_key(encrypted):
    template, key_id = encrypted
    touching = ("sqs:SendMessage", "sqs:ReceiveMessage", "dynamodb:", "s3:GetObject", "s3:PutObject")
    policies = _of(template, "AWS::IAM::Policy")
    checked = 0
    for name, policy in policies.items():
        statements = policy["PolicyDocument"]["Statement"]
        actions = json.dumps([s["Action"] for s in statements])
        if not any(a in actions for a in touching):
            continue
        checked += 1
        kms_statements = [s for s in statements if "kms:Decrypt" in json.dumps(s["Action"])]
        assert any(_names_key(s["Resource"], key_id) for s in kms_statements), (name, statements)
    assert checked >= 6  # consumers, the container task, Scheduler's roles, the producer, the operator


def test_encryption_key_true_makes_a_rotated_key_of_the_deployments_own():
    app = App()
    stack = Stack(app, "Own")
    framework = _framework(stack, api=False, encryption_key=True)
    assert framework.encryption_key is not None
    template = Template.from_stack(stack).to_json()
    key_id = stack.get_logical_id(framework.encryption_key.node.default_child)  # type: ignore[arg-type]
    assert template["Resources"][key_id]["Properties"]["EnableKeyRotation"] is True
    queues = _of(template, "AWS::SQS::Queue")
    assert queues and all(_names_key(q.get("KmsMasterKeyId"), key_id) for q in queues.values())
