"""``grant_operate``: an operator's role may run `jf` against the deployment (pause and resume queues,
redrive dead letters, read statuses, cancel), on this deployment's resources only."""

from __future__ import annotations

import json
from typing import Any

from aws_cdk import App, CfnElement, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template
from pydantic import BaseModel

from jobframework.cdk import JobFramework
from jobframework.cdk.operate import OPERATOR_ACTIONS
from jobframework.jobs import JobRegistry, job
from tests.infra.test_construct import _framework, _project


def _operator_statements(tmp_path: Any) -> tuple[Stack, Any, list[dict[str, Any]]]:
    package, registry = _project(tmp_path / "src")
    stack = Stack(App(), "ShopService")
    jobs = _framework(stack, tmp_path / "src", package, registry, requirements=())
    operator = iam.Role(stack, "OnCall", assumed_by=iam.AccountRootPrincipal())
    jobs.grant_operate(operator)
    role = operator.node.default_child
    assert isinstance(role, CfnElement)
    [policy] = [
        p
        for p in Template.from_stack(stack).find_resources("AWS::IAM::Policy").values()
        if p["Properties"]["Roles"] == [{"Ref": stack.get_logical_id(role)}]
    ]
    return stack, jobs, policy["Properties"]["PolicyDocument"]["Statement"]


def _granting(statements: list[dict[str, Any]], action: str) -> list[Any]:
    found = []
    for s in statements:
        actions = s["Action"] if isinstance(s["Action"], list) else [s["Action"]]
        if action in actions:
            found += s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]]
    return found


def test_pausing_a_queue_may_update_this_stacks_event_source_mappings_only(tmp_path):
    stack, jobs, statements = _operator_statements(tmp_path)
    mappings = Template.from_stack(stack).find_resources("AWS::Lambda::EventSourceMapping")
    updatable = _granting(statements, "lambda:UpdateEventSourceMapping")
    assert updatable and "*" not in updatable
    assert len(updatable) == len(mappings) == len(jobs.workers.event_sources)
    assert _granting(statements, "lambda:ListEventSourceMappings") == ["*"]  # takes no resource


def test_queue_ls_may_list_the_delay_schedules(tmp_path):
    _stack, _jobs, statements = _operator_statements(tmp_path)
    # jf queue ls counts the jobs the delay group holds; ListSchedules takes no resource
    assert _granting(statements, "scheduler:ListSchedules") == ["*"]
    assert not _granting(statements, "scheduler:GetSchedule")  # the list says each one's queue
    # a cancel of a job delayed past 15 minutes deletes its one-time schedule, in the delay group only
    [deletable] = _granting(statements, "scheduler:DeleteSchedule")
    assert json.dumps(deletable).endswith(':schedule/shop-dev-delays/*"]]}'), deletable


def test_dead_letters_may_be_read_redriven_and_deleted_on_this_stacks_queues(tmp_path):
    stack, jobs, statements = _operator_statements(tmp_path)
    ids = {
        stack.get_logical_id(q.node.default_child)
        for pq in jobs.queues.values()
        for q in (pq.queue, pq.dead_letter_queue)
    }
    for action in ("sqs:ReceiveMessage", "sqs:SendMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"):
        assert {r["Fn::GetAtt"][0] for r in _granting(statements, action)} == ids, action


def test_statuses_and_cancels_are_on_the_state_table(tmp_path):
    stack, jobs, statements = _operator_statements(tmp_path)
    table = stack.get_logical_id(jobs.state_table.node.default_child)
    keys = stack.get_logical_id(jobs.idempotency_table.node.default_child)
    for action in OPERATOR_ACTIONS["dynamodb"]:
        # status and cancel also read a tracked idempotent job's start and end, the console's lists
        # and bulk cancel a page's (stores/key_records.py)
        also = [keys] if action in ("GetItem", "BatchGetItem") else []
        assert [r["Fn::GetAtt"][0] for r in _granting(statements, f"dynamodb:{action}")] == [table, *also]
    assert _granting(statements, "ssm:GetParameter")  # the topology parameter
    assert _granting(statements, "s3:GetObject")  # offloaded payloads in dead letters


def test_the_wildcards_aws_requires_are_acknowledged_for_cdk_nag_with_a_reason(tmp_path):
    from aws_cdk import Validations

    package, registry = _project(tmp_path / "src")
    stack = Stack(App(), "ShopService")
    jobs = _framework(stack, tmp_path / "src", package, registry, requirements=())
    operator = iam.Role(stack, "OnCall", assumed_by=iam.AccountRootPrincipal())
    jobs.grant_operate(operator)
    acknowledged = {
        rule: reason
        for entry in operator.node.metadata
        if entry.type == Validations.ACKNOWLEDGED_RULES_METADATA_KEY
        for rule, reason in entry.data.items()
    }
    assert "ListEventSourceMappings" in acknowledged["AwsSolutions::AwsSolutions-IAM5[Resource::*]"]
    assert "ListSchedules" in acknowledged["AwsSolutions::AwsSolutions-IAM5[Resource::*]"]
    assert acknowledged["AwsSolutions::AwsSolutions-IAM5[Resource::<PayloadBucket.Arn>/*]"]


class Tick(BaseModel):
    n: int = 0


def test_the_schedules_dead_letter_queue_may_be_inspected_and_redriven():
    registry = JobRegistry()

    @job("ops.cleanup", schedule="rate(1 hour)", registry=registry)
    def cleanup(p: Tick) -> None: ...

    stack = Stack(App(), "Scheduled")
    jobs = JobFramework(
        stack,
        "Jobs",
        job_modules=["tests.infra.iam_jobs"],
        registry=registry,
        api=False,
        code=lambda_.Code.from_inline("def handler(event, context): ..."),
    )
    operator = iam.Role(stack, "OnCall", assumed_by=iam.AccountRootPrincipal())
    jobs.grant_operate(operator)
    assert jobs.schedules is not None
    dlq = stack.get_logical_id(jobs.schedules.dead_letter_queue.node.default_child)  # type: ignore[arg-type]
    role = stack.get_logical_id(operator.node.default_child)  # type: ignore[arg-type]
    [policy] = [
        p
        for p in Template.from_stack(stack).find_resources("AWS::IAM::Policy").values()
        if p["Properties"]["Roles"] == [{"Ref": role}]
    ]
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    for action in OPERATOR_ACTIONS["sqs"]:
        assert dlq in {r["Fn::GetAtt"][0] for r in _granting(statements, f"sqs:{action}")}, action
