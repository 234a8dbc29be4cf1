"""The synthesized template deployed into the embedded AWS's CloudFormation (moto).

What moto does not model is left out before deploying: Scheduler resources and whatever refers to
them, alarms, the dashboard, queue, topic and bucket policies, the HTTP API and its permission to
invoke the API function, CodeDeploy, the Lambda aliases, the container workers' VPC, ECS cluster,
services and scaling (moto would skip most of them with a warning, but a skipped resource breaks the
``Fn::GetAtt`` of its dependants); and the AWS-owned Powertools layer, which moto cannot resolve. An
event source mapping that invokes a ``live`` alias invokes its function instead. The queues, DLQs,
functions and their versions (the API function too), event source mappings, tables, the payload
bucket, the delay scheduler's role, the container task roles and the SSM parameter are deployed as
synthesized.
"""

from __future__ import annotations

import copy
import json
import logging
import shutil
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer

from jobframework.topology import RuntimeConfig
from tests.infra.conftest import CONTAINER_LANES

ACCOUNT = "123456789012"
REGION = "us-east-1"
BOOTSTRAP_BUCKET = f"cdk-hnb659fds-assets-{ACCOUNT}-{REGION}"


@pytest.fixture(scope="module")
def endpoint(monkeypatch_module: pytest.MonkeyPatch) -> Iterator[str]:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch_module.setenv(name, value)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[pytest.MonkeyPatch]:
    with pytest.MonkeyPatch.context() as mp:
        yield mp


def _client(service: str, endpoint: str) -> Any:
    return boto3.client(service, endpoint_url=endpoint, region_name=REGION)  # type: ignore[call-overload]


NOT_MODELLED = (
    "AWS::Scheduler::",
    "AWS::CloudWatch::",
    "AWS::SQS::QueuePolicy",
    "AWS::SNS::TopicPolicy",
    "AWS::S3::BucketPolicy",
    "AWS::ApiGatewayV2::",
    "AWS::CodeDeploy::",
    "AWS::Lambda::Alias",
    "AWS::EC2::",
    "AWS::ECS::",
    "AWS::ApplicationAutoScaling::",
)


def _refers_to(resource: dict[str, Any], logical_ids: set[str]) -> bool:
    text = json.dumps(resource)
    depends = resource.get("DependsOn", [])
    return any(f'"{i}"' in text for i in logical_ids) or bool(set(_listed(depends)) & logical_ids)


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def deployable(template: dict[str, Any]) -> dict[str, Any]:
    """The template without what moto cannot deploy (see the module docstring)."""
    result = copy.deepcopy(template)
    resources = result["Resources"]
    aliases = {
        k: r["Properties"]["FunctionName"] for k, r in resources.items() if r["Type"] == "AWS::Lambda::Alias"
    }
    for resource in resources.values():
        if resource["Type"] == "AWS::Lambda::EventSourceMapping":
            target = json.dumps(resource["Properties"]["FunctionName"])
            for alias_id, function in aliases.items():
                if f'"{alias_id}"' in target:
                    resource["Properties"]["FunctionName"] = function
    removed = {k for k, r in resources.items() if r["Type"].startswith(NOT_MODELLED)}
    while True:
        dependants = {k for k, r in resources.items() if k not in removed and _refers_to(r, removed)}
        if not dependants:
            break
        removed |= dependants
    for logical_id in removed:
        del resources[logical_id]
    result["Outputs"] = {k: o for k, o in result.get("Outputs", {}).items() if not _refers_to(o, removed)}
    for resource in resources.values():
        if resource["Type"] == "AWS::Lambda::Function":
            resource["Properties"].pop("Layers", None)
    return result


@pytest.fixture(scope="module")
def deployed(synth, endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    ssm = _client("ssm", endpoint)
    ssm.put_parameter(Name="/cdk-bootstrap/hnb659fds/version", Value="30", Type="String")
    s3 = _client("s3", endpoint)
    s3.create_bucket(Bucket=BOOTSTRAP_BUCKET)
    zips = tmp_path_factory.mktemp("assets")
    for asset in synth.zip_assets():
        archive = shutil.make_archive(str(zips / "code"), "zip", synth.outdir / asset["source"]["path"])
        for destination in asset["destinations"].values():
            s3.upload_file(archive, BOOTSTRAP_BUCKET, destination["objectKey"])
    cfn = _client("cloudformation", endpoint)
    name = synth.stack.stack_name
    cfn.create_stack(
        StackName=name,
        TemplateBody=json.dumps(deployable(synth.template_json())),
        Capabilities=["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM"],
    )
    stack = cfn.describe_stacks(StackName=name)["Stacks"][0]
    assert stack["StackStatus"] == "CREATE_COMPLETE", stack.get("StackStatusReason")
    return {"outputs": {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}}


def test_deployed_queues_have_the_topology_visibility_and_redrive(synth, endpoint, deployed):
    sqs = _client("sqs", endpoint)
    for spec in synth.topology.queues:
        url = sqs.get_queue_url(QueueName=spec.name)["QueueUrl"]
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        assert int(attributes["VisibilityTimeout"]) == spec.visibility_timeout
        assert int(attributes["MessageRetentionPeriod"]) == spec.retention
        redrive = json.loads(attributes["RedrivePolicy"])
        assert int(redrive["maxReceiveCount"]) == spec.max_receive_count
        assert redrive["deadLetterTargetArn"].endswith(f":{spec.dlq_name}")
        dlq_url = sqs.get_queue_url(QueueName=spec.dlq_name)["QueueUrl"]
        dlq = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["All"])["Attributes"]
        assert int(dlq["MessageRetentionPeriod"]) == spec.dlq_retention


def test_deployed_event_source_mappings_match_the_topology(synth, endpoint, deployed):
    lam = _client("lambda", endpoint)
    sqs = _client("sqs", endpoint)
    for consumer in synth.topology.consumers:
        lanes = [lane for lane in consumer.lanes if lane not in CONTAINER_LANES]
        mappings = lam.list_event_source_mappings(FunctionName=consumer.function_name)["EventSourceMappings"]
        by_queue = {m["EventSourceArn"].rsplit(":", 1)[-1]: m for m in mappings}
        assert set(by_queue) == {synth.topology.queue(lane).name for lane in lanes}
        for lane in lanes:
            spec = synth.topology.queue(lane)
            mapping = by_queue[spec.name]
            url = sqs.get_queue_url(QueueName=spec.name)["QueueUrl"]
            arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
                "QueueArn"
            ]
            assert mapping["EventSourceArn"] == arn
            assert mapping["BatchSize"] == spec.batch_size
            assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
            assert mapping["ScalingConfig"] == {"MaximumConcurrency": spec.max_concurrency}


def test_deployed_topology_parameter_is_a_runtime_config_with_the_real_urls(synth, endpoint, deployed):
    ssm = _client("ssm", endpoint)
    config = RuntimeConfig.from_parameter(synth.topology.topology_parameter, ssm_client=ssm)
    for spec in synth.topology.queues:
        endpoints = config.endpoints(spec.priority)
        assert endpoints.url.endswith(f"/{ACCOUNT}/{spec.name}")  # moto's Ref gives the AWS-style URL
        assert endpoints.dlq_url.endswith(f"/{ACCOUNT}/{spec.dlq_name}")
    assert config.state_table == synth.topology.state_table
    assert config.idempotency_table == synth.topology.idempotency_table
    assert deployed["outputs"]["TopologyParameterName"] == synth.topology.topology_parameter


def test_deployed_topology_parameter_names_the_payload_bucket_and_the_delay_scheduler(
    synth, endpoint, deployed
):
    config = RuntimeConfig.from_parameter(
        synth.topology.topology_parameter, ssm_client=_client("ssm", endpoint)
    )
    buckets = {b["Name"] for b in _client("s3", endpoint).list_buckets()["Buckets"]}
    assert config.payload_bucket in buckets
    assert config.schedule_group == "jf-dev-delays"
    assert config.scheduler_role_arn is not None and ":role/" in config.scheduler_role_arn
    assert config.signing_keys == "ssm:/jf/dev/signing-keys"
