"""The synthesized roles, enforced: the real producer and consumer paths run on an embedded AWS that
refuses what the consumer role and the enqueue grant do not allow.

The stack is synthesized from a small job package (:mod:`tests.infra.iam_jobs`), its low lane on
container workers; the policies of the shared Lambda consumer's role, of the low lane's task role and
of a role given ``grant_enqueue`` are taken from the template, resolved to a topology provisioned on an
IAM-enforcing moto server (:mod:`tests.infra.iam_aws`), and given to roles there whose credentials the
client and the consumers then use. What moto does not check (resources
other than SQS and S3, ``dynamodb:LeadingKeys``, ``iam:PassRole``) the evaluator of
:mod:`tests.infra.iam_policy` checks on every recorded call, as it checks actions and resources again.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from aws_cdk import App, CfnElement, Stack
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template
from constructs import IConstruct

from jobframework.cdk import JobFramework
from jobframework.client import JobClient
from jobframework.consumer import Consumer, consumer
from jobframework.dlq import DeadLetters
from jobframework.envelope import parse_body
from jobframework.local.aws import provision
from jobframework.outgoing import EnqueueResult
from jobframework.saga import SagaStatus
from jobframework.testing import consume_once, receive_all
from jobframework.topology import RuntimeConfig

from . import iam_jobs
from .iam_aws import ADMIN_POLICY, IamEnforcingAWS, Recorder
from .iam_policy import Evaluator, Resolver, for_moto, role_statements

SIGNING_PARAMETER = "/iam/dev/signing-keys"
SIGNING_KEYS = {"current": "k1", "keys": {"k1": "a-signing-key-of-the-test"}}
CONTAINER_LANES = ("low",)
BLOB = "x" * 2000
"""Over the offload threshold the test sets (1,024 bytes, the least allowed)."""


@dataclass
class Synthesized:
    framework: JobFramework
    template: Mapping[str, Any]
    roles: dict[str, str]
    """The logical id of each principal's role: ``consumer`` (the shared Lambda consumer), ``worker``
    (the low lane's container task role), ``producer`` (given ``grant_enqueue``), ``operator`` (given
    ``grant_operate``)."""

    def logical_id(self, construct: IConstruct) -> str:
        element = construct.node.default_child
        assert isinstance(element, CfnElement)
        return str(Stack.of(self.framework).resolve(element.logical_id))  # overridden ids too


@pytest.fixture(scope="module")
def synthesized() -> Synthesized:
    stack = Stack(App(), "IamEnforced")
    framework = JobFramework(
        stack,
        "Jobs",
        job_modules=["tests.infra.iam_jobs"],
        registry=iam_jobs.REGISTRY,
        app_name="iam",
        api=False,
        signing_keys=f"ssm:{SIGNING_PARAMETER}",
        code=lambda_.Code.from_inline("def handler(event, context): ..."),
        container_lanes=CONTAINER_LANES,
        container_image=ecs.ContainerImage.from_registry("public.ecr.aws/example/jf-worker:latest"),
    )
    producer = iam.Role(stack, "Producer", assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com"))
    framework.grant_enqueue(producer)
    operator = iam.Role(stack, "Operator", assumed_by=iam.AccountRootPrincipal())
    framework.grant_operate(operator)
    assert framework.container_workers is not None
    synthesized = Synthesized(framework, Template.from_stack(stack).to_json(), {})
    synthesized.roles = {
        "consumer": synthesized.logical_id(framework.workers.roles["shared"]),
        "worker": synthesized.logical_id(framework.container_workers.task_roles["low"]),
        "producer": synthesized.logical_id(producer),
        "operator": synthesized.logical_id(operator),
    }
    return synthesized


@dataclass(frozen=True)
class Poller:
    """One lane polled as its consumer polls it (the event source mapping, or ``jf worker``), with that
    consumer's role as the default credentials (as in Lambda and in an ECS task)."""

    lane: str
    handler: Consumer
    sqs: Any
    session: boto3.Session


@dataclass
class Enforced:
    aws: IamEnforcingAWS
    config: RuntimeConfig
    statements: dict[str, list[dict[str, Any]]]
    """The resolved statements by principal (``consumer``, ``worker``, ``producer``, ``operator``)."""
    sessions: dict[str, boto3.Session]
    client: JobClient
    pollers: list[Poller]
    admin_sqs: Any
    recorder: Recorder
    evaluator: Evaluator


@pytest.fixture
def enforced(synthesized: Synthesized, monkeypatch: pytest.MonkeyPatch) -> Iterator[Enforced]:
    framework = synthesized.framework
    topology = framework.topology
    with IamEnforcingAWS() as aws:
        admin = aws.fake_session()
        config = provision(topology, admin, aws.endpoint_url).model_copy(
            update={
                "schedule_group": framework.delays.group_name,
                "offload_threshold": 1024,
                "retry_budget": 0.2,
                "signing_keys": f"ssm:{SIGNING_PARAMETER}",
            }
        )
        admin.client("scheduler", endpoint_url=aws.endpoint_url).create_schedule_group(
            Name=framework.delays.group_name
        )
        ssm = admin.client("ssm", endpoint_url=aws.endpoint_url)
        ssm.put_parameter(
            Name=topology.topology_parameter,
            Value=config.model_dump_json(exclude={"endpoint_url"}),
            Type="String",
            Overwrite=True,
        )
        ssm.put_parameter(Name=SIGNING_PARAMETER, Value=json.dumps(SIGNING_KEYS), Type="SecureString")
        assert config.payload_bucket and config.scheduler_role_arn
        resolver = Resolver(
            synthesized.template,
            physical={
                synthesized.logical_id(framework.payloads.bucket): (
                    config.payload_bucket,
                    f"arn:aws:s3:::{config.payload_bucket}",
                ),
                synthesized.logical_id(framework.delays.role): ("scheduler", config.scheduler_role_arn),
            },
            queue_urls={
                url.rsplit("/", 1)[1]: url
                for q in config.queues.values()
                for url in (q.url, q.dlq_url)
                if url is not None
            },
        )
        statements = {
            name: resolver.statements(role_statements(synthesized.template, role))
            for name, role in synthesized.roles.items()
        }
        sessions = {name: aws.role(name, for_moto(s)) for name, s in statements.items()}
        admin_sqs = aws.role("admin", ADMIN_POLICY).client("sqs", endpoint_url=aws.endpoint_url)
        recorder = Recorder()
        for name, session in sessions.items():
            recorder.attach(session, name)
        aws.enforce()

        producer_config = RuntimeConfig.from_parameter(
            topology.topology_parameter,
            ssm_client=sessions["producer"].client("ssm", endpoint_url=aws.endpoint_url),
            endpoint_url=aws.endpoint_url,
        )
        client = JobClient(producer_config, registry=iam_jobs.REGISTRY, session=sessions["producer"])
        monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)  # restored after the test: see _default_session
        pollers = []
        for name, lanes in (
            (
                "consumer",
                [q.lane for q in topology.queues if q.consumer == "shared" and q.lane not in CONTAINER_LANES],
            ),
            ("worker", list(CONTAINER_LANES)),
        ):
            sqs = sessions[name].client("sqs", endpoint_url=aws.endpoint_url)
            handler = consumer(iam_jobs.REGISTRY, config=config, sqs_client=sqs)
            pollers += [Poller(lane, handler, sqs, sessions[name]) for lane in lanes if lane in config.queues]
        iam_jobs.ran.clear()
        yield Enforced(
            aws=aws,
            config=config,
            statements=statements,
            sessions=sessions,
            client=client,
            pollers=pollers,
            admin_sqs=admin_sqs,
            recorder=recorder,
            evaluator=Evaluator(
                partition_keys={topology.state_table: "pk", topology.idempotency_table: "id"}
            ),
        )


@contextlib.contextmanager
def _default_session(session: boto3.Session) -> Iterator[None]:
    """``session`` as boto3's default while a consumer runs: what it makes from the default session (the
    saga hook's client, the signing keys' source) runs with its own role's credentials, as it would in
    its Lambda function or ECS task."""
    before = boto3.DEFAULT_SESSION
    boto3.DEFAULT_SESSION = session
    try:
        yield
    finally:
        boto3.DEFAULT_SESSION = before


def _consume_until(env: Enforced, done: Any, timeout: float = 20) -> None:
    """Poll every lane with its consumer's role until ``done()``."""
    deadline = time.monotonic() + timeout
    while not done():
        assert not env.recorder.denied(), f"refused by the synthesized policies: {_denied(env)}"
        assert time.monotonic() < deadline, f"not done in {timeout}s: ran {dict(iam_jobs.ran)}"
        got = 0
        for poller in env.pollers:
            with _default_session(poller.session):
                records, _ = consume_once(poller.handler, poller.sqs, env.config.queues[poller.lane].url)
            got += len(records)
        if not got:
            time.sleep(0.2)


def _denied(env: Enforced) -> list[str]:
    return [f"{c.principal} {c.service}:{c.operation}" for c in env.recorder.denied()]


def test_the_producer_and_consumer_paths_run_with_only_what_the_synthesized_roles_grant(enforced):
    env = enforced
    client = env.client
    enqueue = client.enqueue
    tracked = enqueue("iam.tracked", {"name": "tracked"})
    offloaded = enqueue("iam.tracked", {"name": "offloaded", "blob": BLOB})
    later = enqueue("iam.tracked", {"name": "next-hour"}, delay=3600)  # a one-time schedule
    to_cancel = enqueue("iam.tracked", {"name": "cancelled"}, delay=600)
    flaky = enqueue("iam.flaky", {"name": "flaky"})
    results = [
        tracked,
        offloaded,
        later,
        to_cancel,
        flaky,
        enqueue("iam.keyed", {"name": "once"}),
        enqueue("iam.tracked", {"name": "debounced-1"}, key="debounce:a", debounce=1),
        enqueue("iam.tracked", {"name": "debounced-2"}, key="debounce:a", debounce=1),
        enqueue("iam.tracked", {"name": "delayed"}, delay=1),
        enqueue("iam.rated", {"name": "rated-1"}),
        enqueue("iam.rated", {"name": "rated-2"}),
        declined := enqueue("iam.declined", {"name": "declined", "blob": BLOB}),  # low: a container
        enqueue("iam.ordered", {"name": "ordered-1"}),
        enqueue("iam.ordered", {"name": "ordered-2"}),
    ]
    assert all(r.ok for r in results), [r.error for r in results]
    assert enqueue("iam.keyed", {"name": "once"}).duplicate
    saga_id = iam_jobs.order.start({"name": "o-1"}, client=client)

    status = client.status(tracked.id)
    assert status is not None and status.status == "queued"
    assert client.cancel(to_cancel.id).outcome == "cancelled"
    client_status = client.status(later.id)
    assert client_status is not None and client_status.status == "scheduled", client_status

    def done() -> bool:
        saga = client.saga_status(saga_id)
        return bool(
            iam_jobs.ran["tracked"]
            and iam_jobs.ran["offloaded"]
            and iam_jobs.ran["delayed"]
            and iam_jobs.ran["debounced-2"]
            and iam_jobs.ran["flaky"] == 2
            and iam_jobs.ran["declined"]
            and iam_jobs.ran["rated-1"] + iam_jobs.ran["rated-2"] == 1
            and iam_jobs.ran["ordered-1"] == 2
            and iam_jobs.ran["ordered-2"] == 1
            and saga is not None
            and saga.status is SagaStatus.SUCCEEDED
        )

    _consume_until(env, done)

    assert iam_jobs.ran["once"] == 1 and iam_jobs.ran["debounced-1"] == 0 and not iam_jobs.ran["cancelled"]
    for job_id in (tracked.id, offloaded.id, flaky.id):
        status = client.status(job_id)
        assert status is not None and status.status == "succeeded", status
    _operate(env, declined)

    assert not env.recorder.denied(), f"refused by the synthesized policies: {_denied(env)}"
    refused = [
        f"{call.principal} {request.action} {request.resource} {dict(request.context)}"
        for call in env.recorder.calls
        for request in env.evaluator.requests(call.service, call.operation, call.params)
        if not env.evaluator.allowed(env.statements[call.principal], request)
    ]
    assert not refused, f"IAM would refuse (resource or condition): {refused}"
    assert {
        "ssm:GetParameter",
        "s3:PutObject",
        "scheduler:CreateSchedule",
        "dynamodb:Query",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "sqs:SendMessage",
    } <= env.recorder.operations("producer")
    consumed = {
        "ssm:GetParameter",  # the signing keys
        "s3:GetObject",
        "dynamodb:BatchWriteItem",
        "sqs:SendMessageBatch",
        "sqs:DeleteMessageBatch",
        "sqs:ReceiveMessage",
    }
    assert consumed <= env.recorder.operations("worker")
    assert {"sqs:ReceiveMessage", "sqs:SendMessageBatch", "s3:CopyObject", "dynamodb:Query"} <= (
        env.recorder.operations("operator")
    )
    assert consumed | {
        "dynamodb:BatchGetItem",
        "sqs:ChangeMessageVisibilityBatch",
    } <= env.recorder.operations("consumer")
    # Hand-backs and the saga's next step go to the consumer's own queue, dead letters to the DLQ.
    assert env.config.queues["high"].url in _sent_to(env, "consumer")
    assert env.config.queues["low"].dlq_url in _sent_to(env, "worker")


def _operate(env: Enforced, declined: EnqueueResult) -> None:
    """What an operator does about the dead letter, with the operator role: ``jf dlq ls``, ``peek`` and
    ``redrive`` (which refreshes its offloaded payload and sets the job's status back to queued),
    ``jf status``."""
    session = env.sessions["operator"]
    with _default_session(session):
        letters = DeadLetters(
            env.config,
            session.client("sqs", endpoint_url=env.aws.endpoint_url),
            s3_client=session.client("s3", endpoint_url=env.aws.endpoint_url),
        )
        assert {d.priority: d.depth for d in letters.depths()}["low"] == 1
        [letter] = letters.peek("low")
        assert (letter.job_id, letter.reason) == (declined.id, "permanent")
        assert letters.redrive("low").moved == 1
        status = JobClient(env.config, registry=iam_jobs.REGISTRY, session=session).status(declined.id)
        # The redrive set its status back to queued (the operator role may write the state table)
        assert status is not None and status.status == "queued", status
        assert status.reason == "redriven from the low DLQ (it died: permanent)"
    redriven = receive_all(env.admin_sqs, env.config.queues["low"].url)  # type: ignore[arg-type]
    assert [parse_body(m["Body"]).id for m in redriven] == [declined.id]


def _sent_to(env: Enforced, principal: str) -> set[str]:
    return {
        c.params["QueueUrl"]
        for c in env.recorder.calls
        if c.principal == principal and c.operation in ("SendMessage", "SendMessageBatch")
    }
