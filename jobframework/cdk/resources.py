"""The resources of one app and stage of the framework, built from its :class:`Topology` and its code."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Annotations
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_ssm as ssm
from constructs import Construct
from pydantic import ValidationError

from jobframework.cdk.api import JobApi
from jobframework.cdk.container_workers import ContainerWorkers
from jobframework.cdk.defaults import (
    DELAY_GROUP_SUFFIX,
    POWERTOOLS_LAYER_VERSION,
    StageConfig,
    acknowledge_key_wildcards,
    allow_log_groups,
    grant_key_use,
    is_production,
    lane_id,
)
from jobframework.cdk.delays import DelayedJobs
from jobframework.cdk.monitoring import Monitoring
from jobframework.cdk.operate import KEY_RECORD_ACTIONS, grant_operate
from jobframework.cdk.outputs import add_outputs, parameter_value
from jobframework.cdk.payloads import PayloadBucket
from jobframework.cdk.priority_queue import PriorityQueue, check_fifo_event_source
from jobframework.cdk.props import prop_error
from jobframework.cdk.schedules import Schedules
from jobframework.cdk.signing import SigningKeys
from jobframework.cdk.tables import JobTables
from jobframework.cdk.workers import Workers, consumer_environment
from jobframework.core import metrics_namespace
from jobframework.errors import ConfigurationError
from jobframework.jobs import LAMBDA_MAX_TIMEOUT
from jobframework.scheduling import check_signed_schedules
from jobframework.topology import (
    QueueEndpoints,
    RuntimeConfig,
    Topology,
)

PRODUCER_TABLE_ACTIONS: tuple[str, ...] = (
    "dynamodb:GetItem",
    "dynamodb:Query",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
)
PRODUCER_LEADING_KEYS: tuple[str, ...] = ("dedup#*", "job#*", "saga#*", "debounce#*")
"""A producer writes dedup markers and the ``queued`` status, reads status (a ``Query`` of the job's
items), joins debounce windows, and starts sagas (by writing the saga record); nothing else of the
state table (not the budget counters)."""


class JobResources(Construct):
    """Queues, DLQs, consumers, tables, schedules, the payload bucket, the delay group, the example API,
    alarms and the dashboard of one topology, running the given Lambda code.

    :class:`~jobframework.cdk.construct.JobFramework` is this plus the topology derived from job modules
    and the code bundled from the project; use this one to bring a topology and code of your own.

    Props:
        topology: what to build (from :meth:`Topology.from_registry`).
        job_modules: the modules the consumers import (``JF_JOBS``), e.g. ``("mysvc.jobs",)``.
        code: the Lambda code (jobframework, the job modules and their dependencies).
        architecture: of the functions (and the Powertools layer); default x86_64.
        stage_config: default from ``topology.stage`` (prod retains data, keeps logs longer).
        powertools_layer_version: the official Powertools v3 layer's version.
        signing_keys: ``ssm:<parameter>`` or ``secretsmanager:<secret>`` holding the HMAC keys; default
            ``None`` (signing off). Producers and consumers get read of that one item.
        retry_budget: retries allowed per first attempt (``JF_RETRY_BUDGET``); default 0.2, ``None``
            turns the budget off (and its alarms).
        api: build the example HTTP API (``jobframework.entrypoints.api``); default ``True``.
        container_lanes: lanes served by ``jf worker`` on ECS Fargate (:class:`ContainerWorkers`)
            instead of Lambda, e.g. ``("low",)`` for jobs longer than Lambda allows; default none. Such a
            lane gets no event source mapping (a job must never run on both), and a Lambda consumer left
            without lanes is not created.
        container_image: the ``jf worker`` image of the container lanes (required with them).
        vpc: the container workers' VPC; default a new one (see :class:`ContainerWorkers`).
        outputs: add the CloudFormation outputs (queue URLs and ARNs, table names, the topic, the
            topology parameter, exported as ``<app>-<stage>-topology-parameter``); default ``True``.
        reserve_concurrency: reserve the critical consumer's concurrency
            (``TopologySettings.critical_reserved_concurrency``) while a job is routed to the critical
            lane; ``False``: never (for accounts whose concurrency limit is 10); see :class:`Workers`.
        alarm_topic: the alarms' topic, an existing one (``sns.Topic.from_topic_arn``: the team's
            paging topic); default a topic of the deployment's own (see :class:`Monitoring`).
        encryption_key: a customer-managed KMS key for the queues and DLQs, the tables, the payload
            bucket and the log groups; ``True`` makes one (rotated yearly, kept with the data in prod).
            Every role of the deployment, and each ``grant_enqueue`` and ``grant_operate``, may
            encrypt and decrypt with it. Default AWS-managed keys.

    Attributes:
        topology, queues (:class:`PriorityQueue` by lane: ``high``, ``high-cpu``), dead_letter_queues
        (by lane), functions (by consumer), tables, state_table, idempotency_table, alarm_topic,
        payloads, delays, signing_keys (``None`` when off), workers, container_workers (``None``
        without container lanes), api (``None`` when off), schedules (``None`` without scheduled
        jobs), monitoring, runtime_config, topology_parameter, code.

    Raises:
        ConfigurationError: a container lane that the topology does not have, a job longer than Lambda
            allows on a Lambda lane (and the checks of :class:`PriorityQueue` and :class:`Workers`).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        topology: Topology,
        job_modules: Sequence[str],
        code: lambda_.Code,
        architecture: lambda_.Architecture | None = None,
        stage_config: StageConfig | None = None,
        powertools_layer_version: int = POWERTOOLS_LAYER_VERSION,
        signing_keys: str | None = None,
        retry_budget: float | None = 0.2,
        api: bool = True,
        container_lanes: Sequence[str] = (),
        container_image: ecs.ContainerImage | None = None,
        vpc: ec2.IVpc | None = None,
        outputs: bool = True,
        reserve_concurrency: bool = True,
        alarm_topic: sns.ITopic | None = None,
        encryption_key: kms.IKey | bool | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.code = code
        stage = stage_config or StageConfig.for_stage(topology.stage)
        if encryption_key is True:
            encryption_key = kms.Key(
                self,
                "EncryptionKey",
                description=f"jobframework {topology.app}-{topology.stage}: queues, tables, payloads, logs",
                enable_key_rotation=True,
                removal_policy=stage.removal_policy,
            )
        self.encryption_key: kms.IKey | None = encryption_key or None
        encryption_key = self.encryption_key
        if encryption_key is not None:
            allow_log_groups(encryption_key)
            acknowledge_key_wildcards(self)
        self.topology = topology
        if stage_config is None and topology.stage != "dev" and not is_production(topology.stage):
            Annotations.of(self).add_warning_v2(
                "jobframework:stage",
                f"stage {topology.stage!r} gets dev's settings: its queues, tables and bucket are deleted "
                "with the stack and logs kept 2 weeks; only 'prod', 'production' and 'prod-...' retain "
                "data (or pass stage_config=StageConfig(stage=..., retain=True, ...))",
            )
        prefix = f"{topology.app}-{topology.stage}"
        max_attempts = {j.name: j.max_attempts for j in topology.jobs}
        lanes = [q.lane for q in topology.queues]
        unknown = [lane for lane in container_lanes if lane not in lanes]
        if unknown:
            raise ConfigurationError(
                f"container_lanes (the example app's -c container_workers) names {', '.join(unknown)}, "
                f"not a lane of this topology ({', '.join(lanes)})"
            )

        for spec in topology.queues:
            if spec.longest_job_timeout > LAMBDA_MAX_TIMEOUT and spec.lane not in container_lanes:
                longest = max(
                    spec.jobs, key=lambda name: next(j.timeout for j in topology.jobs if j.name == name)
                )
                raise ConfigurationError(
                    f"job {longest} may run {spec.longest_job_timeout}s, longer than Lambda's "
                    f"{LAMBDA_MAX_TIMEOUT:g}s: run its lane on container workers (JobFrameworkStack("
                    f"..., container_lanes=[{spec.lane!r}], container_image=...); the example app's "
                    f"-c container_workers={spec.lane}) or shorten the job"
                )

        self.queues: dict[str, PriorityQueue] = {}
        for spec in topology.queues:
            consumer = topology.consumer(spec.consumer)
            check_fifo_event_source(spec)
            self.queues[spec.lane] = PriorityQueue(
                self,
                f"{lane_id(spec.lane)}Queue",
                queue_name=spec.name,
                dead_letter_queue_name=spec.dlq_name,
                consumer_timeout=consumer.timeout,
                visibility_timeout=spec.visibility_timeout,
                batching_window=spec.batching_window if spec.lane not in container_lanes else 0,
                max_receive_count=spec.max_receive_count,
                job_max_attempts={name: max_attempts[name] for name in spec.jobs},
                retention=spec.retention,
                dead_letter_retention=spec.dlq_retention,
                target_latency=spec.target_latency,
                removal_policy=stage.removal_policy,
                fifo=spec.fifo,
                lane=spec.lane,
                topology_parameter=topology.topology_parameter,
                encryption_key=encryption_key,
            )

        self.tables = JobTables(
            self,
            "Tables",
            state_table_name=topology.state_table,
            idempotency_table_name=topology.idempotency_table,
            removal_policy=stage.removal_policy,
            deletion_protection=stage.retain,
            encryption_key=encryption_key,
        )

        self.payloads = PayloadBucket(
            self,
            "Payloads",
            expiry_days=stage.payload_expiry_days,
            removal_policy=stage.removal_policy,
            encryption_key=encryption_key,
        )
        self.delays = DelayedJobs(
            self,
            "Delays",
            group_name=f"{prefix}-{DELAY_GROUP_SUFFIX}",
            queues=[q.queue for q in self.queues.values()],
            removal_policy=stage.removal_policy,
        )
        if encryption_key is not None:  # (Scheduler sends the delayed jobs to the encrypted queues)
            grant_key_use(encryption_key, self.delays.role)
        self.signing_keys = SigningKeys(self, "SigningKeys", source=signing_keys) if signing_keys else None
        if signing_keys:
            check_signed_schedules(topology.schedules)

        try:
            self.runtime_config = RuntimeConfig(
                queues={
                    lane: QueueEndpoints(url=q.queue.queue_url, dlq_url=q.dead_letter_queue.queue_url)
                    for lane, q in self.queues.items()
                },
                state_table=self.tables.state_table.table_name,
                idempotency_table=self.tables.idempotency_table.table_name,
                payload_bucket=self.payloads.bucket.bucket_name,
                signing_keys=signing_keys,
                scheduler_role_arn=self.delays.role.role_arn,
                schedule_group=self.delays.group_name,
                retry_budget=retry_budget,
                jobs=topology.catalog,  # in the topology parameter only (to_env leaves it out)
            )
        except ValidationError as exc:
            advice = "retries allowed per first attempt, 0 to 10, default 0.2; None turns the budget off"
            raise prop_error(
                type(self).__name__, exc, {"retry_budget": ("retry_budget", retry_budget, advice)}
            ) from None
        environment = consumer_environment(self.runtime_config, job_modules, topology)
        self.workers = Workers(
            self,
            "Workers",
            consumers=topology.consumers,
            queue_specs=topology.queues,
            queues=self.queues,
            tables=self.tables,
            environment=environment,
            skip_lanes=container_lanes,
            code=code,
            architecture=architecture,
            powertools_layer_version=powertools_layer_version,
            log_retention=stage.log_retention,
            removal_policy=stage.removal_policy,
            reserve_concurrency=reserve_concurrency,
            encryption_key=encryption_key,
        )
        self.container_workers: ContainerWorkers | None = None
        if container_lanes:
            if container_image is None:
                raise ConfigurationError(
                    f"container lanes {', '.join(container_lanes)} need container_image= (the `jf worker` "
                    "image, see jobframework.cdk.container_workers.worker_image)"
                )
            self.container_workers = ContainerWorkers(
                self,
                "ContainerWorkers",
                lanes=[topology.queue(lane) for lane in dict.fromkeys(container_lanes)],
                queues=self.queues,
                tables=self.tables,
                environment=environment,
                image=container_image,
                vpc=vpc,
                stage=topology.stage,
                log_retention=stage.log_retention,
                removal_policy=stage.removal_policy,
                encryption_key=encryption_key,
            )
        consumer_roles: list[iam.IRole] = list(self.workers.roles.values())
        if self.container_workers is not None:
            consumer_roles += self.container_workers.task_roles.values()
        for role in consumer_roles:
            self.payloads.grant_get(role)

        self.schedules: Schedules | None = None
        if topology.schedules:
            self.schedules = Schedules(
                self,
                "Schedules",
                schedules=topology.schedules,
                queues={lane: q.queue for lane, q in self.queues.items()},
                group_name=prefix,
                dead_letter_queue_name=f"{prefix}-schedules-dlq",
                removal_policy=stage.removal_policy,
                metrics_namespace=metrics_namespace(topology.app, topology.stage),
                encryption_key=encryption_key,
            )

        self.monitoring = Monitoring(
            self,
            "Monitoring",
            dashboard_name=f"{prefix}-jobs",
            topic_name=f"{prefix}-alarms",
            queues=list(self.queues.values()),
            functions=self.workers.functions,
            removal_policy=stage.removal_policy,
            topology=topology,
            container_lanes=container_lanes,
            metrics_namespace=metrics_namespace(topology.app, topology.stage),
            alarm_topic=alarm_topic,
        )
        for q in self.queues.values():
            self.monitoring.route(*q.alarms)
        self.monitoring.route(*self.workers.alarms)
        if self.schedules is not None:
            self.monitoring.route(*self.schedules.alarms)
            self.monitoring.add_schedule_widgets([s.job for s in topology.schedules])
        self.monitoring.route(*self.delays.alarms)
        if retry_budget is not None:
            self.monitoring.add_budget_alarms(list(dict.fromkeys(s.priority.value for s in topology.queues)))
        self.monitoring.add_saga_alarms(topology.sagas)

        self.topology_parameter = ssm.StringParameter(
            self,
            "TopologyParameter",
            parameter_name=topology.topology_parameter,
            description=f"jobframework {prefix}: queue URLs and ARNs, table names (a RuntimeConfig)",
            string_value=parameter_value(self),
        )

        # A consumer is a producer too: it hands records back as copies to its own queue (limits,
        # releases, deferred runs), sends a saga's next step, and a job may enqueue others.
        for role in consumer_roles:
            self.grant_enqueue(role)

        self.api: JobApi | None = None
        if api:
            self.api = JobApi(
                self,
                "Api",
                api_name=f"{prefix}-jobs",
                function_name=f"{prefix}-api",
                environment=environment,
                code=self.workers.code,
                layers=self.workers.layers,
                architecture=architecture,
                log_retention=stage.log_retention,
                removal_policy=stage.removal_policy,
                encryption_key=encryption_key,
            )
            self.grant_enqueue(self.api.function)
        self.dead_letter_queues: dict[str, sqs.Queue] = {
            lane: q.dead_letter_queue for lane, q in self.queues.items()
        }
        self.functions: dict[str, lambda_.Function] = dict(self.workers.functions)
        self.state_table = self.tables.state_table
        self.idempotency_table = self.tables.idempotency_table
        self.alarm_topic = self.monitoring.topic
        if outputs:
            add_outputs(self, prefix)

    def grant_enqueue(self, grantee: iam.IGrantable) -> None:
        """What a producer service needs and nothing more: SendMessage (and the queue attributes and
        URL lookups boto3 makes) on every lane's queue; read of the topology parameter; PutObject on the
        payload bucket's objects; Get/Query/Put/Update/DeleteItem on the ``dedup#``, ``job#``, ``saga#``
        and ``debounce#`` items of the state table (``dynamodb:LeadingKeys``); GetItem on the
        idempotency table (a tracked job's start, for status and cancel); CreateSchedule in the delay
        group and PassRole of the scheduler role; read of the signing keys when signing is on. Every
        consumer has it too (hand-back copies, a saga's next step, jobs that enqueue jobs).
        """
        for q in self.queues.values():
            q.queue.grant_send_messages(grantee)
        self.topology_parameter.grant_read(grantee)
        self.payloads.grant_put(grantee)
        iam.Grant.add_to_principal(
            grantee=grantee,
            actions=list(PRODUCER_TABLE_ACTIONS),
            resource_arns=[self.tables.state_table.table_arn],
            conditions={"ForAllValues:StringLike": {"dynamodb:LeadingKeys": list(PRODUCER_LEADING_KEYS)}},
        )
        iam.Grant.add_to_principal(
            grantee=grantee,
            actions=list(KEY_RECORD_ACTIONS),
            resource_arns=[self.tables.idempotency_table.table_arn],
            conditions={"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["jf#*"]}},
        )
        self.delays.grant_schedule(grantee)
        if self.signing_keys is not None:
            self.signing_keys.grant_read(grantee)
        if self.encryption_key is not None:  # (the queues', the tables' and the bucket's key)
            grant_key_use(self.encryption_key, grantee)

    def grant_operate(self, grantee: iam.IGrantable) -> None:
        """What an operator needs to run ``jf`` against this deployment: inspect, redrive and purge
        dead letters, pause and resume queues, read statuses, cancel jobs, and the console
        (:mod:`jobframework.cdk.operate`)."""
        grant_operate(self, grantee)
