"""Synth-time errors that name what to change."""

from __future__ import annotations

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_lambda as lambda_
from pydantic import BaseModel

from jobframework.cdk import JobFramework
from jobframework.cdk.priority_queue import PriorityQueue
from jobframework.errors import ConfigurationError
from jobframework.jobs import JobRegistry, Priority, job
from jobframework.retry import RetryPolicy
from jobframework.topology import Topology, TopologySettings
from stacks.application import build_app
from tests.infra import iam_jobs


class Ping(BaseModel):
    n: int = 0


def test_max_receive_count_not_above_a_jobs_max_attempts_fails_the_synth_naming_the_job():
    registry = JobRegistry()

    @job(
        "billing.retry_forever", priority=Priority.HIGH, retry=RetryPolicy(max_attempts=8), registry=registry
    )
    def retry_forever(p: Ping) -> None: ...

    settings = TopologySettings(max_receive_count={Priority.HIGH: 8})
    with pytest.raises(ConfigurationError, match=r"billing\.retry_forever.*max_attempts=8"):
        build_app(App(context={"jobs": "handlers.jobs"}), registry=registry, settings=settings, nag=False)


def test_priority_queue_refuses_a_max_receive_count_below_a_jobs_attempts():
    stack = Stack(App(), "S")
    with pytest.raises(ConfigurationError, match=r"job reports\.huge has max_attempts=7.*maxReceiveCount=5"):
        PriorityQueue(
            stack,
            "Q",
            queue_name="q",
            dead_letter_queue_name="q-dlq",
            consumer_timeout=30,
            max_receive_count=5,
            job_max_attempts={"reports.small": 3, "reports.huge": 7},
        )


def test_priority_queue_refuses_a_visibility_under_six_times_the_consumer_timeout():
    stack = Stack(App(), "S")
    with pytest.raises(ConfigurationError, match=r"visibility timeout 60s is under 6x.*at least 180s"):
        PriorityQueue(
            stack,
            "Q",
            queue_name="q",
            dead_letter_queue_name="q-dlq",
            consumer_timeout=30,
            visibility_timeout=60,
            max_receive_count=5,
        )


def test_topology_and_stack_agree_on_names():
    topology = Topology.from_registry(JobRegistry(), TopologySettings(app="shop", stage="prod"))
    assert topology.queue(Priority.LOW).name == "shop-prod-low"


def test_signing_keys_of_an_unknown_kind_fail_the_synth_saying_what_is_expected():
    from jobframework.cdk.signing import SigningKeys

    with pytest.raises(ConfigurationError, match=r"signing_keys='vault:/x'.*ssm:<parameter name>"):
        SigningKeys(Stack(App(), "S"), "K", source="vault:/x")


def test_signing_keys_in_secrets_manager_by_name_grant_the_secret_with_its_random_suffix():
    from aws_cdk import aws_iam as iam
    from aws_cdk.assertions import Template

    from jobframework.cdk.signing import SigningKeys

    stack = Stack(App(), "S")
    role = iam.Role(stack, "R", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    SigningKeys(stack, "K", source="secretsmanager:jf/prod/signing-keys").grant_read(role)
    [policy] = Template.from_stack(stack).find_resources("AWS::IAM::Policy").values()
    [statement] = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Action"] == "secretsmanager:GetSecretValue"
    assert str(statement["Resource"]).endswith(":secret:jf/prod/signing-keys-??????']]}")


def test_retry_budget_and_api_come_from_context():
    from stacks.application import flag_from_context, retry_budget_from_context

    assert retry_budget_from_context(App()) == 0.2
    assert retry_budget_from_context(App(context={"retry_budget": "off"})) is None
    assert retry_budget_from_context(App(context={"retry_budget": "0.1"})) == 0.1
    assert flag_from_context(App(context={"api": "false"}), "api", default=True) is False
    assert flag_from_context(App(), "api", default=True) is True


def test_a_job_longer_than_lambda_allows_needs_a_container_lane_naming_the_job():
    registry = JobRegistry()

    @job("video.transcode", priority=Priority.LOW, profile="cpu", timeout=3600, registry=registry)
    def transcode(p: Ping) -> None: ...

    with pytest.raises(
        ConfigurationError,
        # (the construct's props first: a trial's own app has no -c container_workers)
        match=r"job video\.transcode may run 3600s.*container_lanes=\['low-cpu'\], container_image=\.\.\.\); "
        r"the example app's -c container_workers=low-cpu\)",
    ):
        build_app(App(context={"jobs": "handlers.jobs"}), registry=registry, nag=False)


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            {"stage": "Prod"},
            r"^JobFramework: stage='Prod': String should match pattern .*e\.g\. 'dev' or 'prod'",
        ),
        ({"stage": 5}, r"^JobFramework: stage=5: Input should be a valid string"),
        ({"app_name": "my_app"}, r"^JobFramework: app_name='my_app': String should match .*e\.g\. 'billing'"),
        (
            {"retry_budget": 50},
            r"^JobFramework: retry_budget=50: Input should be less than or equal to 10 .*None",
        ),
    ],
)
def test_a_bad_stage_app_name_or_retry_budget_is_one_line_naming_the_prop(props, message):
    with pytest.raises(ConfigurationError, match=message) as raised:
        JobFramework(
            Stack(App(), "S"),
            "Jobs",
            job_modules=["tests.infra.iam_jobs"],
            registry=iam_jobs.REGISTRY,
            api=False,
            code=lambda_.Code.from_inline("def handler(event, context): ..."),
            **props,
        )
    assert "\n" not in str(raised.value)
