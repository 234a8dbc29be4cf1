"""The payload bucket for offloaded payloads."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import App, RemovalPolicy, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Match, Template

from jobframework.cdk import JobFramework, PayloadBucket
from jobframework.cdk.defaults import StageConfig
from jobframework.errors import ConfigurationError, PayloadStoreError
from jobframework.payloads import DAY_SECONDS, RETENTION_CLASSES_DAYS, retention_days, retry_horizon
from jobframework.retry import RetryPolicy

from . import iam_jobs


def test_payload_bucket_is_encrypted_private_and_owner_enforced(synth):
    synth.template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "BucketEncryption": {
                "ServerSideEncryptionConfiguration": [
                    {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
                ]
            },
            "PublicAccessBlockConfiguration": {
                "BlockPublicAcls": True,
                "BlockPublicPolicy": True,
                "IgnorePublicAcls": True,
                "RestrictPublicBuckets": True,
            },
            "OwnershipControls": {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]},
        },
    )


def test_payload_bucket_denies_requests_without_tls(synth):
    synth.template.has_resource_properties(
        "AWS::S3::BucketPolicy",
        {
            "Bucket": {"Ref": "PayloadBucket"},
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Effect": "Deny",
                                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                                "Principal": {"AWS": "*"},
                            }
                        )
                    ]
                )
            },
        },
    )


def _rules(synth) -> dict[str, dict[str, Any]]:
    [bucket] = synth.template.find_resources("AWS::S3::Bucket").values()
    return {r["Id"]: r for r in bucket["Properties"]["LifecycleConfiguration"]["Rules"]}


def test_each_retention_class_expires_under_its_own_prefix_never_before_the_stage_expiry(synth):
    rules = _rules(synth)
    for days in RETENTION_CLASSES_DAYS:
        rule = rules[f"expire-keep-{days}d"]
        assert rule["Prefix"] == f"keep-{days}d/" and rule["Status"] == "Enabled"
        assert rule["ExpirationInDays"] == max(days, 7)
    assert rules["expire-legacy-payloads"]["Prefix"] == "payloads/"
    assert rules["expire-legacy-payloads"]["ExpirationInDays"] == 7
    assert rules["abort-uploads"]["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 1}
    prefixes = [r["Prefix"] for r in rules.values() if "Prefix" in r]
    assert not any(a != b and b.startswith(a) for a in prefixes for b in prefixes)  # no rule overlaps another


@pytest.mark.parametrize("delay", [0, 900, 30 * DAY_SECONDS, 365 * DAY_SECONDS])
@pytest.mark.parametrize(
    "policy", [RetryPolicy(), RetryPolicy(max_attempts=25, max_delay=43_200), RetryPolicy(max_attempts=1000)]
)
def test_the_bucket_keeps_a_payload_through_its_delay_retries_a_dlq_stay_and_a_redrive(synth, delay, policy):
    days = retention_days(delay, policy)
    rule = _rules(synth)[f"expire-keep-{days}d"]
    needed = (delay + 2 * retry_horizon(policy) + 14 * DAY_SECONDS) / DAY_SECONDS
    assert rule["ExpirationInDays"] >= needed


def test_no_class_is_long_enough_for_more_than_the_longest_horizon():
    with pytest.raises(PayloadStoreError, match="longest retention class"):
        retention_days(RETENTION_CLASSES_DAYS[-1] * DAY_SECONDS, RetryPolicy())


def test_prod_keeps_payloads_longer_than_its_dead_letters():
    assert StageConfig.for_stage("prod").payload_expiry_days == 30
    assert StageConfig.for_stage("dev").payload_expiry_days == 7


def test_consumers_may_get_and_put_payload_objects_and_list_the_bucket_and_nothing_else(synth):
    template = synth.template_json()
    checked = 0
    for logical_id, resource in template["Resources"].items():
        if not logical_id.startswith(("WorkersCriticalRoleDefaultPolicy", "WorkersSharedRoleDefaultPolicy")):
            continue
        statements = resource["Properties"]["PolicyDocument"]["Statement"]
        s3 = {s["Action"]: s["Resource"] for s in statements if str(s["Action"]).startswith("s3:")}
        assert s3 == {
            "s3:GetObject": {"Fn::Join": ["", [{"Fn::GetAtt": ["PayloadBucket", "Arn"]}, "/*"]]},
            # ListBucket: a missing key answers 404 (payload-missing), not 403 (a permission error).
            "s3:ListBucket": {"Fn::GetAtt": ["PayloadBucket", "Arn"]},
            # PutObject: a job it sends (a saga's next step, a job's own) may offload its payload.
            "s3:PutObject": {"Fn::Join": ["", [{"Fn::GetAtt": ["PayloadBucket", "Arn"]}, "/*"]]},
        }
        checked += 1
    assert checked


def test_functions_know_the_payload_bucket(synth):
    for function in synth.functions().values():
        assert function["Properties"]["Environment"]["Variables"]["JF_PAYLOAD_BUCKET"] == {
            "Ref": "PayloadBucket"
        }


def test_a_dev_payload_bucket_is_emptied_on_delete_so_that_cdk_destroy_succeeds(synth):
    synth.template.has_resource(
        "AWS::S3::Bucket", {"DeletionPolicy": "Delete", "UpdateReplacePolicy": "Delete"}
    )
    synth.template.has_resource_properties(
        "Custom::S3AutoDeleteObjects", {"BucketName": {"Ref": "PayloadBucket"}}
    )


def test_a_prod_payload_bucket_is_retained_with_its_objects():
    stack = Stack(App(), "Prod")
    JobFramework(
        stack,
        "Jobs",
        job_modules=["tests.infra.iam_jobs"],
        registry=iam_jobs.REGISTRY,
        app_name="iam",
        stage="prod",
        api=False,
        code=lambda_.Code.from_inline("def handler(event, context): ..."),
    )
    template = Template.from_stack(stack)
    template.has_resource("AWS::S3::Bucket", {"DeletionPolicy": "Retain"})
    template.resource_count_is("Custom::S3AutoDeleteObjects", 0)


def test_auto_delete_of_a_retained_bucket_is_refused():
    with pytest.raises(ConfigurationError, match=r"auto_delete_objects=True needs removal_policy=DESTROY"):
        PayloadBucket(
            Stack(App(), "S"), "Payloads", removal_policy=RemovalPolicy.RETAIN, auto_delete_objects=True
        )
