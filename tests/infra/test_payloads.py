"""The payload bucket for offloaded payloads."""

from __future__ import annotations

from aws_cdk.assertions import Match

from jobframework.cdk.defaults import StageConfig


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


def test_payloads_expire_after_the_stage_expiry(synth):
    synth.template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "LifecycleConfiguration": {
                "Rules": [Match.object_like({"ExpirationInDays": 7, "Status": "Enabled"})]
            }
        },
    )


def test_prod_keeps_payloads_longer_than_its_dead_letters():
    assert StageConfig.for_stage("prod").payload_expiry_days == 30
    assert StageConfig.for_stage("dev").payload_expiry_days == 7


def test_consumers_may_get_payload_objects_and_nothing_else_of_the_bucket(synth):
    template = synth.template_json()
    for logical_id, resource in template["Resources"].items():
        if not logical_id.startswith(("WorkersCriticalRoleDefaultPolicy", "WorkersSharedRoleDefaultPolicy")):
            continue
        statements = resource["Properties"]["PolicyDocument"]["Statement"]
        s3 = [s for s in statements if str(s["Action"]).startswith("s3:")]
        assert [s["Action"] for s in s3] == ["s3:GetObject"]
        assert s3[0]["Resource"] == {"Fn::Join": ["", [{"Fn::GetAtt": ["PayloadBucket", "Arn"]}, "/*"]]}


def test_functions_know_the_payload_bucket(synth):
    for function in synth.template.find_resources("AWS::Lambda::Function").values():
        assert function["Properties"]["Environment"]["Variables"]["JF_PAYLOAD_BUCKET"] == {
            "Ref": "PayloadBucket"
        }
