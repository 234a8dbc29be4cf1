"""The consumer functions: a dedicated one for critical, one shared by high, default and low."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from aws_cdk import Acknowledgment, Duration, RemovalPolicy, Stack, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_logs as logs
from constructs import Construct

from jobframework.errors import ConfigurationError
from jobframework.jobs import Priority
from jobframework.topology import ConsumerSpec, QueueSpec
from stacks.defaults import POWERTOOLS_LAYER_ACCOUNT, POWERTOOLS_LAYER_VERSION
from stacks.priority_queue import PriorityQueue
from stacks.tables import JobTables

HANDLER = "handlers.worker.lambda_handler"
RUNTIME = lambda_.Runtime.PYTHON_3_14
"""The newest Python runtime that CDK offers and the Powertools v3 layer is published for."""
CODE_PACKAGES: tuple[str, ...] = ("jobframework", "handlers")
REPO_ROOT = Path(__file__).resolve().parent.parent
MAX_BATCH_WITHOUT_WINDOW = 10
TABLE_ACTIONS: tuple[str, ...] = (
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:ConditionCheckItem",
    "dynamodb:Query",
)
"""Item-level read/write (idempotency records, dedup markers, status, saga records, budget counters):
no Scan, no streams, no table management."""


def powertools_layer_arn(runtime: lambda_.Runtime, version: int, region: str) -> str:
    """The official Powertools for AWS Lambda (Python) v3 layer (x86_64) for ``runtime``.

    Example:
        >>> powertools_layer_arn(lambda_.Runtime.PYTHON_3_13, 27, "eu-west-1")
        'arn:aws:lambda:eu-west-1:017000801446:layer:AWSLambdaPowertoolsPythonV3-python313-x86_64:27'
    """
    python = runtime.name.replace(".", "")
    return (
        f"arn:aws:lambda:{region}:{POWERTOOLS_LAYER_ACCOUNT}:layer:"
        f"AWSLambdaPowertoolsPythonV3-{python}-x86_64:{version}"
    )


def code_asset(root: Path = REPO_ROOT, packages: Sequence[str] = CODE_PACKAGES) -> lambda_.Code:
    """The Lambda code: ``packages`` from ``root`` as a plain asset (no Docker bundling).

    Powertools and pydantic come from the Powertools layer, boto3 from the runtime.
    """
    exclude = ["*", ".*", "**/__pycache__", "**/*.pyc"]
    for package in packages:
        exclude[1:1] = [f"!{package}", f"!{package}/**"]
    return lambda_.Code.from_asset(str(root), exclude=exclude)


class Workers(Construct):
    """One Lambda function per consumer of the topology, each with an SQS event source per queue.

    Props:
        consumers: the topology's consumer specs (``critical`` gets reserved concurrency).
        queue_specs: the topology's queue specs (batch size, window, maximum concurrency, consumer).
        queues: the :class:`PriorityQueue` of each priority.
        tables: the framework's tables (read/write for every consumer).
        environment: the ``JF_*`` and Powertools variables every function gets.
        code: default :func:`code_asset`; layers: default the official Powertools v3 layer.
        powertools_layer_version: default :data:`~stacks.defaults.POWERTOOLS_LAYER_VERSION`.
        log_retention: default two weeks; removal_policy (of the log groups): default ``DESTROY``.

    Attributes:
        functions (by consumer name), roles, event_sources (by priority), log_groups, code, layers.

    Grants are least privilege: consume (receive, delete, change visibility, get attributes) on its
    own queues, SendMessage on its own queues' DLQs, item read/write on the two tables, logs on its own
    log group; X-Ray ``PutTraceSegments`` needs ``Resource: *`` (acknowledged for cdk-nag).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        consumers: Sequence[ConsumerSpec],
        queue_specs: Sequence[QueueSpec],
        queues: Mapping[Priority, PriorityQueue],
        tables: JobTables,
        environment: Mapping[str, str],
        code: lambda_.Code | None = None,
        layers: Sequence[lambda_.ILayerVersion] | None = None,
        powertools_layer_version: int = POWERTOOLS_LAYER_VERSION,
        log_retention: logs.RetentionDays = logs.RetentionDays.TWO_WEEKS,
        removal_policy: RemovalPolicy = RemovalPolicy.DESTROY,
    ) -> None:
        super().__init__(scope, construct_id)
        code = code or code_asset()
        self.code = code
        if layers is None:
            arn = powertools_layer_arn(RUNTIME, powertools_layer_version, Stack.of(self).region)
            layers = [lambda_.LayerVersion.from_layer_version_arn(self, "PowertoolsLayer", arn)]
        self.layers: list[lambda_.ILayerVersion] = list(layers)
        self.functions: dict[str, lambda_.Function] = {}
        self.roles: dict[str, iam.Role] = {}
        self.log_groups: dict[str, logs.LogGroup] = {}
        self.event_sources: dict[Priority, event_sources.SqsEventSource] = {}
        specs_by_priority = {q.priority: q for q in queue_specs}

        for consumer in consumers:
            cid = consumer.name.capitalize()
            log_group = logs.LogGroup(
                self,
                f"{cid}LogGroup",
                log_group_name=f"/aws/lambda/{consumer.function_name}",
                retention=log_retention,
                removal_policy=removal_policy,
            )
            role = iam.Role(
                self,
                f"{cid}Role",
                assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                description=f"jobframework consumer {consumer.function_name}",
            )
            log_group.grant_write(role)
            function = lambda_.Function(
                self,
                f"{cid}Function",
                function_name=consumer.function_name,
                description=f"jobframework consumer of the {'/'.join(consumer.priorities)} queue(s)",
                runtime=RUNTIME,
                handler=HANDLER,
                code=code,
                layers=list(layers),
                timeout=Duration.seconds(consumer.timeout),
                memory_size=consumer.memory_mb,
                reserved_concurrent_executions=consumer.reserved_concurrency,
                tracing=lambda_.Tracing.ACTIVE,
                environment=dict(environment),
                role=role,
                log_group=log_group,
            )
            for table in (tables.state_table, tables.idempotency_table):
                table.grant(role, *TABLE_ACTIONS)
            for priority in consumer.priorities:
                spec = specs_by_priority[priority]
                pq = queues[priority]
                if spec.batch_size > MAX_BATCH_WITHOUT_WINDOW and spec.batching_window < 1:
                    raise ConfigurationError(
                        f"queue {spec.name}: batch_size={spec.batch_size} needs a batching window of at "
                        f"least 1 s (an SQS event source takes more than {MAX_BATCH_WITHOUT_WINDOW} "
                        "only with one)"
                    )
                source = event_sources.SqsEventSource(
                    pq.queue,
                    batch_size=spec.batch_size,
                    max_batching_window=(
                        Duration.seconds(spec.batching_window) if spec.batching_window else None
                    ),
                    max_concurrency=spec.max_concurrency,
                    report_batch_item_failures=True,
                )
                function.add_event_source(source)
                pq.dead_letter_queue.grant_send_messages(role)
                self.event_sources[priority] = source
            Validations.of(role).acknowledge(
                Acknowledgment(
                    id="AwsSolutions::AwsSolutions-IAM5[Resource::*]",
                    reason="X-Ray active tracing: xray:PutTraceSegments and xray:PutTelemetryRecords do not "
                    "support resource-level permissions, AWS requires Resource '*'",
                )
            )
            self.functions[consumer.name] = function
            self.roles[consumer.name] = role
            self.log_groups[consumer.name] = log_group

    @property
    def critical_function(self) -> lambda_.Function:
        return self.functions["critical"]

    @property
    def shared_function(self) -> lambda_.Function:
        return self.functions["shared"]
