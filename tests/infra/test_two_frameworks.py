"""Two ``JobFramework`` constructs in one stack (two apps side by side): ids do not collide, each keeps
its own grants, and cdk-nag passes; a single construct keeps the payload bucket's fixed logical id."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from aws_cdk import App, Environment, Stack, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks

from jobframework.cdk import JobFramework
from jobframework.cdk.payloads import LOGICAL_ID
from jobframework.errors import ConfigurationError

from . import iam_jobs

INLINE = "def handler(event, context): ..."


def _framework(stack: Stack, construct_id: str, app_name: str, **props: Any) -> JobFramework:
    return JobFramework(
        stack,
        construct_id,
        job_modules=["tests.infra.iam_jobs"],
        registry=iam_jobs.REGISTRY,
        app_name=app_name,
        api=False,
        code=lambda_.Code.from_inline(INLINE),
        **props,
    )


@pytest.fixture(scope="module")
def two() -> tuple[JobFramework, JobFramework, Mapping[str, Any]]:
    app = App()
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))  # an unacknowledged finding fails synth
    stack = Stack(app, "TwoApps")
    billing = _framework(stack, "Billing", "billing")
    shipping = _framework(stack, "Shipping", "shipping")
    app.synth()
    return billing, shipping, Template.from_stack(stack).to_json()


def test_two_frameworks_in_one_stack_get_a_payload_bucket_each(two):
    billing, shipping, template = two
    buckets = [k for k, r in template["Resources"].items() if r["Type"] == "AWS::S3::Bucket"]
    assert sorted(buckets) == sorted([billing.payloads.logical_id, shipping.payloads.logical_id])
    assert billing.payloads.logical_id == LOGICAL_ID  # the first keeps the fixed id
    assert shipping.payloads.logical_id.startswith("ShippingPayloads")


def test_each_frameworks_consumers_read_only_their_own_payload_bucket(two):
    billing, shipping, template = two
    for framework in (billing, shipping):
        role = Stack.of(framework).resolve(framework.workers.roles["shared"].role_name)["Ref"]
        statements = [
            s
            for r in template["Resources"].values()
            if r["Type"] == "AWS::IAM::Policy" and {"Ref": role} in r["Properties"]["Roles"]
            for s in r["Properties"]["PolicyDocument"]["Statement"]
            if "s3:GetObject" in s["Action"]
        ]
        assert [s["Resource"] for s in statements] == [
            {"Fn::Join": ["", [{"Fn::GetAtt": [framework.payloads.logical_id, "Arn"]}, "/*"]]}
        ]


def test_a_single_framework_keeps_the_fixed_payload_bucket_id():
    stack = Stack(App(), "One")
    framework = _framework(stack, "Jobs", "solo")
    assert list(Template.from_stack(stack).find_resources("AWS::S3::Bucket")) == [LOGICAL_ID]
    assert framework.payloads.objects_finding == f"Resource::<{LOGICAL_ID}.Arn>/*"


def test_a_second_framework_of_the_same_app_and_stage_is_refused_naming_the_first():
    stack = Stack(App(), "Twice")
    _framework(stack, "Billing", "billing")
    with pytest.raises(ConfigurationError, match=r"Twice/Billing in this stack has app_name='billing'"):
        _framework(stack, "Billing2", "billing")


def test_the_same_app_and_stage_in_two_stacks_of_one_environment_is_refused():
    app = App()
    _framework(Stack(app, "BillingApi"), "Billing", "billing")
    with pytest.raises(
        ConfigurationError, match=r"BillingApi/Billing in stack BillingApi .* same account and region"
    ):
        _framework(Stack(app, "BillingWorkers"), "Billing", "billing")


def test_the_same_app_and_stage_in_two_regions_is_allowed():
    app = App()
    east = _framework(
        Stack(app, "East", env=Environment(account="123456789012", region="us-east-1")), "B", "billing"
    )
    west = _framework(
        Stack(app, "West", env=Environment(account="123456789012", region="eu-west-1")), "B", "billing"
    )
    assert east.topology.state_table == west.topology.state_table == "billing-dev-state"


def test_each_frameworks_alarms_watch_only_the_metrics_its_own_consumers_write(two):
    """Two apps (or stages) in one account share job types and priorities, the metrics' dimensions:
    each writes and watches its own namespace, so one's runs never keep the other's alarms quiet."""
    _, _, template = two
    watched: dict[str, set[str]] = {"Billing": set(), "Shipping": set()}
    written: dict[str, set[str]] = {"Billing": set(), "Shipping": set()}
    for logical_id, resource in template["Resources"].items():
        owner = "Billing" if logical_id.startswith("Billing") else "Shipping"
        props = resource.get("Properties", {})
        if resource["Type"] == "AWS::CloudWatch::Alarm" and "AWS/" not in str(props.get("Namespace", "AWS/")):
            watched[owner].add(props["Namespace"])
        if resource["Type"] == "AWS::Lambda::Function" and "Environment" in props:
            written[owner].add(props["Environment"]["Variables"]["POWERTOOLS_METRICS_NAMESPACE"])
    assert (
        watched
        == written
        == {"Billing": {"JobFramework/billing-dev"}, "Shipping": {"JobFramework/shipping-dev"}}
    )


@pytest.mark.parametrize("literals", [False, True])
def test_cdk_nag_passes_in_a_stack_pinned_to_an_account_and_region(literals):
    """A platform trial's prod stack (env=Environment(account=..., region=...)) failed cdk-nag on the
    framework's own roles: its acknowledgments named the region and account as tokens, which a pinned
    stack writes out; with the partition literals jf new's cdk.json turns on, the partition too."""
    app = App(context={"@aws-cdk/core:enablePartitionLiterals": literals})
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    stack = Stack(app, "Pinned", env=Environment(account="222222222222", region="eu-west-1"))
    framework = _framework(stack, "Jobs", "pinned")
    producer = iam.Role(stack, "Producer", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    framework.grant_enqueue(producer)
    framework.grant_operate(producer)
    app.synth()  # (an unacknowledged finding raises)


def test_the_alarms_go_to_an_existing_topic_when_given_one():
    """A platform team routes every stage's pages to its own SNS topic: the construct made a topic (and
    a key) per stage, and routing them elsewhere meant walking its alarms by hand."""
    stack = Stack(App(), "Paged", env=Environment(account="222222222222", region="eu-west-1"))
    arn = "arn:aws:sns:eu-west-1:222222222222:platform-pages"
    framework = _framework(stack, "Jobs", "paged", alarm_topic=sns.Topic.from_topic_arn(stack, "Pages", arn))
    template = Template.from_stack(stack)
    assert template.find_resources("AWS::SNS::Topic") == {} and template.find_resources("AWS::KMS::Key") == {}
    alarms = template.find_resources("AWS::CloudWatch::Alarm").values()
    routed = [a["Properties"] for a in alarms if "AlarmActions" in a["Properties"]]
    assert routed and all(p["AlarmActions"] == [arn] and p["OKActions"] == [arn] for p in routed)
    assert framework.alarm_topic.topic_arn == arn and framework.monitoring.key is None
