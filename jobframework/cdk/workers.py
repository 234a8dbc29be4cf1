"""The consumer functions: one per consumer of the topology (a dedicated one for critical, one shared by
high, default and low, and one per worker profile in use), each deployed through a ``live`` alias that
CodeDeploy shifts to a new version gradually, rolling back on alarms."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aws_cdk import Acknowledgment, Duration, RemovalPolicy, Stack, Validations
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_codedeploy as codedeploy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_logs as logs
from constructs import Construct

from jobframework.cdk.defaults import (
    ALARM_PERIOD,
    CANARY_ALIAS,
    POWERTOOLS_LAYER_ACCOUNT,
    POWERTOOLS_LAYER_VERSION,
    alarm_on_any,
    lane_id,
)
from jobframework.cdk.priority_queue import PriorityQueue
from jobframework.cdk.tables import JobTables
from jobframework.concurrency import lane_variable
from jobframework.core import metrics_namespace
from jobframework.errors import ConfigurationError
from jobframework.topology import (
    ENV_JOBS,
    ENV_TOPOLOGY_PARAMETER,
    ConsumerSpec,
    QueueSpec,
    RuntimeConfig,
    Topology,
)
from jobframework.topology_settings import MAX_MAX_CONCURRENCY, MIN_MAX_CONCURRENCY

HANDLER = "jobframework.entrypoints.worker.lambda_handler"
RUNTIME = lambda_.Runtime.PYTHON_3_14
"""The newest Python runtime that CDK offers and the Powertools v3 layer is published for."""
MAX_BATCH_WITHOUT_WINDOW = 10
TABLE_ACTIONS: tuple[str, ...] = (
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:ConditionCheckItem",
    "dynamodb:Query",
    "dynamodb:BatchWriteItem",
    "dynamodb:BatchGetItem",
)
"""Item-level read/write (idempotency records, dedup markers, status, saga records, budget counters;
a batch's statuses in ``BatchWriteItem``, ordered groups' heads in ``BatchGetItem``): no Scan, no
streams, no table management."""
DEFAULT_DEPLOYMENT_CONFIG = codedeploy.LambdaDeploymentConfig.CANARY_10_PERCENT_5_MINUTES
"""10 % of invocations go to the new version for 5 minutes, then all of them (unless an alarm fires)."""
CODEDEPLOY_MANAGED_POLICY = (
    "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSCodeDeployRoleForLambdaLimited"
)


def powertools_layer_arn(
    runtime: lambda_.Runtime, version: int, region: str, architecture: str = "x86_64"
) -> str:
    """The official Powertools for AWS Lambda (Python) v3 layer for ``runtime`` and ``architecture``
    (``x86_64`` or ``arm64``).

    Example:
        >>> powertools_layer_arn(lambda_.Runtime.PYTHON_3_13, 27, "eu-west-1")
        'arn:aws:lambda:eu-west-1:017000801446:layer:AWSLambdaPowertoolsPythonV3-python313-x86_64:27'
    """
    python = runtime.name.replace(".", "")
    return (
        f"arn:aws:lambda:{region}:{POWERTOOLS_LAYER_ACCOUNT}:layer:"
        f"AWSLambdaPowertoolsPythonV3-{python}-{architecture}:{version}"
    )


def consumer_environment(
    config: RuntimeConfig, job_modules: Sequence[str], topology: Topology
) -> dict[str, str]:
    """What every consumer (a function, a ``jf worker`` task) gets: the runtime configuration, the job
    modules, the topology parameter, Powertools' service and namespace, and the record bound of each
    lane whose settings give one (its consumer's timeout is sized for it: :mod:`jobframework.sizing`)."""
    return {
        **config.to_env(),
        ENV_JOBS: ",".join(job_modules),
        ENV_TOPOLOGY_PARAMETER: topology.topology_parameter,
        "POWERTOOLS_SERVICE_NAME": topology.app,
        "POWERTOOLS_METRICS_NAMESPACE": metrics_namespace(topology.app, topology.stage),
        **{lane_variable(q.lane): str(q.record_concurrency) for q in topology.queues if q.record_concurrency},
    }


class Workers(Construct):
    """One Lambda function per consumer of the topology, each with an SQS event source per lane, invoked
    through a ``live`` alias that CodeDeploy moves to each new version as a canary.

    Props:
        consumers: the topology's consumer specs (``critical`` gets reserved concurrency; ``io`` and
            ``cpu`` their profile's memory).
        queue_specs: the topology's queue specs (batch size, window, maximum concurrency, consumer).
        queues: the :class:`PriorityQueue` of each lane (``high``, ``high-cpu``).
        tables: the framework's tables (read/write for every consumer).
        environment: the ``JF_*`` and Powertools variables every function gets.
        skip_lanes: lanes another worker (e.g. :class:`~jobframework.cdk.container_workers.ContainerWorkers`)
            consumes; they get no event source mapping, and a consumer left without lanes no function.
        deployment_config: default canary 10 % for 5 minutes.
        code: the Lambda code (jobframework, the job modules, their dependencies: see
            :mod:`jobframework.cdk.bundling`); layers: default the official Powertools v3 layer.
        architecture: default x86_64 (the layer follows it).
        powertools_layer_version: default :data:`~jobframework.cdk.defaults.POWERTOOLS_LAYER_VERSION`.
        log_retention: default two weeks; removal_policy (of the log groups): default ``DESTROY``.
        reserve_concurrency: give a consumer with a ``reserved_concurrency`` (``critical``) that
            reservation, but only while a job is routed to its lanes (an empty critical lane gets a
            function, for sends with ``priority="critical"``, that reserves nothing); ``False``: never
            (AWS keeps 10 executions unreserved, so an account whose limit is 10, as new accounts'
            often is, refuses any reservation). Default ``True``.

    Attributes:
        functions, aliases, roles, error_alarms, throttle_alarms, deployment_groups (by consumer name),
        event_sources (by lane), log_groups, application (the CodeDeploy application), code, layers,
        alarms (the errors and throttles alarms, for the alarm topic: a crashing or throttled consumer
        pages at once, before the age-of-oldest alarms would), reserved_concurrency (by consumer name:
        what its function reserves, ``None`` for nothing).

    Safe deploys: the event source mappings invoke the ``live`` alias, never ``$LATEST``; each deploy
    publishes a version and CodeDeploy shifts the alias to it with ``deployment_config``, rolling back
    when the consumer's errors alarm (``Errors`` of the alias) or the dead-letter inflow alarm of one of
    its queues fires while the canary runs.

    Grants are least privilege: consume (receive, delete, change visibility, get attributes) on its
    own queues, SendMessage on its own queues' DLQs, item read/write on the two tables, logs on its own
    log group (and, from :class:`~jobframework.cdk.resources.JobResources`, what a producer has: a
    consumer hands records back to its queue and sends a saga's next steps); X-Ray
    ``PutTraceSegments`` needs ``Resource: *`` (acknowledged for cdk-nag).

    Raises:
        ConfigurationError: a lane batches more than 10 records without a batching window; a lane's
            maximum concurrency outside 2 to 1,000 (e.g. ``critical_reserved_concurrency=1``).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        consumers: Sequence[ConsumerSpec],
        queue_specs: Sequence[QueueSpec],
        queues: Mapping[str, PriorityQueue],
        tables: JobTables,
        environment: Mapping[str, str],
        code: lambda_.Code,
        skip_lanes: Sequence[str] = (),
        deployment_config: codedeploy.ILambdaDeploymentConfig = DEFAULT_DEPLOYMENT_CONFIG,
        architecture: lambda_.Architecture | None = None,
        layers: Sequence[lambda_.ILayerVersion] | None = None,
        powertools_layer_version: int = POWERTOOLS_LAYER_VERSION,
        log_retention: logs.RetentionDays = logs.RetentionDays.TWO_WEEKS,
        removal_policy: RemovalPolicy = RemovalPolicy.DESTROY,
        reserve_concurrency: bool = True,
        encryption_key: kms.IKey | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self._encryption_key = encryption_key
        self.code = code
        self.architecture = architecture or lambda_.Architecture.X86_64
        if layers is None:
            arn = powertools_layer_arn(
                RUNTIME, powertools_layer_version, Stack.of(self).region, self.architecture.name
            )
            layers = [lambda_.LayerVersion.from_layer_version_arn(self, "PowertoolsLayer", arn)]
        self.layers: list[lambda_.ILayerVersion] = list(layers)
        self.functions: dict[str, lambda_.Function] = {}
        self.aliases: dict[str, lambda_.Alias] = {}
        self.roles: dict[str, iam.Role] = {}
        self.log_groups: dict[str, logs.LogGroup] = {}
        self.error_alarms: dict[str, cloudwatch.Alarm] = {}
        self.throttle_alarms: dict[str, cloudwatch.Alarm] = {}
        self.deployment_groups: dict[str, codedeploy.LambdaDeploymentGroup] = {}
        self.event_sources: dict[str, event_sources.SqsEventSource] = {}
        self.reserved_concurrency: dict[str, int | None] = {}
        self.application = codedeploy.LambdaApplication(self, "Deployments")
        specs_by_lane = {q.lane: q for q in queue_specs}
        skipped = set(skip_lanes)

        for consumer in consumers:
            lanes = [lane for lane in (consumer.lanes or consumer.priorities) if lane not in skipped]
            if not lanes:
                continue
            cid = lane_id(consumer.name)
            has_jobs = any(specs_by_lane[lane].jobs for lane in lanes)
            reserved = consumer.reserved_concurrency if reserve_concurrency and has_jobs else None
            self.reserved_concurrency[consumer.name] = reserved
            log_group = logs.LogGroup(
                self,
                f"{cid}LogGroup",
                log_group_name=f"/aws/lambda/{consumer.function_name}",
                retention=log_retention,
                removal_policy=removal_policy,
                encryption_key=self._encryption_key,
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
                description=f"jobframework consumer of the {'/'.join(lanes)} queue(s)",
                runtime=RUNTIME,
                architecture=architecture,
                handler=HANDLER,
                code=code,
                layers=list(layers),
                timeout=Duration.seconds(consumer.timeout),
                memory_size=consumer.memory_mb,
                reserved_concurrent_executions=reserved,
                tracing=lambda_.Tracing.ACTIVE,
                environment=dict(environment),
                role=role,
                log_group=log_group,
            )
            alias = lambda_.Alias(
                self, f"{cid}Alias", alias_name=CANARY_ALIAS, version=function.current_version
            )
            for table in (tables.state_table, tables.idempotency_table):
                table.grant(role, *TABLE_ACTIONS)
            rollback_alarms: list[cloudwatch.IAlarm] = []
            for lane in lanes:
                spec = specs_by_lane[lane]
                pq = queues[lane]
                if spec.batch_size > MAX_BATCH_WITHOUT_WINDOW and spec.batching_window < 1:
                    raise ConfigurationError(
                        f"queue {spec.name}: batch_size={spec.batch_size} needs a batching window of at "
                        f"least 1 s (an SQS event source takes more than {MAX_BATCH_WITHOUT_WINDOW} "
                        "only with one)"
                    )
                if (
                    not spec.pollers
                    and not MIN_MAX_CONCURRENCY <= spec.max_concurrency <= MAX_MAX_CONCURRENCY
                ):
                    setting = (
                        "critical_reserved_concurrency=n"
                        if consumer.reserved_concurrency is not None
                        else f"max_concurrency={{{lane!r}: n}}"
                    )
                    raise ConfigurationError(
                        f"queue {spec.name}: its event source's maximum concurrency would be "
                        f"{spec.max_concurrency}, AWS takes {MIN_MAX_CONCURRENCY} to {MAX_MAX_CONCURRENCY}: "
                        f"set TopologySettings({setting}) within that"
                    )
                source = event_sources.SqsEventSource(
                    pq.queue,
                    batch_size=spec.batch_size,
                    max_batching_window=(
                        Duration.seconds(spec.batching_window) if spec.batching_window else None
                    ),
                    # AWS refuses MaximumConcurrency beside ProvisionedPollerConfig (the topology's
                    # settings refuse both for one lane): a provisioned lane is bounded by its pollers.
                    max_concurrency=None if spec.pollers else spec.max_concurrency,
                    provisioned_poller_config=(
                        lambda_.ProvisionedPollerConfig(
                            minimum_pollers=spec.pollers[0], maximum_pollers=spec.pollers[1]
                        )
                        if spec.pollers
                        else None
                    ),
                    report_batch_item_failures=True,
                )
                alias.add_event_source(source)
                pq.dead_letter_queue.grant_send_messages(role)
                rollback_alarms.append(pq.dead_letter_inflow_alarm)
                self.event_sources[lane] = source
            errors = alarm_on_any(
                self,
                f"{cid}ErrorsAlarm",
                description=(
                    f"{consumer.function_name}:{CANARY_ALIAS} failed invocations (the handler crashed, timed "
                    "out or could not start; job failures are reported per record, not here): CodeDeploy "
                    "rolls a canary back on it"
                ),
                metric=alias.metric_errors(period=ALARM_PERIOD, statistic="Sum"),
            )
            rollback_alarms.insert(0, errors)
            throttles = alarm_on_any(
                self,
                f"{cid}ThrottlesAlarm",
                description=(
                    f"{consumer.function_name}:{CANARY_ALIAS} invocations were throttled (reserved or "
                    "account concurrency reached): records wait and age; raise the concurrency or lower "
                    "the event sources' maximum concurrency"
                ),
                metric=alias.metric_throttles(period=ALARM_PERIOD, statistic="Sum"),
            )
            group = codedeploy.LambdaDeploymentGroup(
                self,
                f"{cid}DeploymentGroup",
                application=self.application,
                alias=alias,
                deployment_config=deployment_config,
                alarms=rollback_alarms,
                auto_rollback=codedeploy.AutoRollbackConfig(
                    failed_deployment=True, stopped_deployment=True, deployment_in_alarm=True
                ),
            )
            Validations.of(group.role).acknowledge(
                Acknowledgment(
                    id=f"AwsSolutions::AwsSolutions-IAM4[{CODEDEPLOY_MANAGED_POLICY}]",
                    reason="CodeDeploy's own service-role policy for Lambda deployments, limited by AWS to "
                    "invoking the hooks and updating the aliases of the deployment",
                )
            )
            Validations.of(role).acknowledge(
                Acknowledgment(
                    id="AwsSolutions::AwsSolutions-IAM5[Resource::*]",
                    reason="X-Ray active tracing: xray:PutTraceSegments and xray:PutTelemetryRecords do not "
                    "support resource-level permissions, AWS requires Resource '*'",
                )
            )
            self.functions[consumer.name] = function
            self.aliases[consumer.name] = alias
            self.roles[consumer.name] = role
            self.log_groups[consumer.name] = log_group
            self.error_alarms[consumer.name] = errors
            self.throttle_alarms[consumer.name] = throttles
            self.deployment_groups[consumer.name] = group

    @property
    def alarms(self) -> list[cloudwatch.Alarm]:
        """Every consumer's errors and throttles alarms (route them to the alarm topic)."""
        return [*self.error_alarms.values(), *self.throttle_alarms.values()]

    @property
    def critical_function(self) -> lambda_.Function:
        return self.functions["critical"]

    @property
    def shared_function(self) -> lambda_.Function:
        return self.functions["shared"]
