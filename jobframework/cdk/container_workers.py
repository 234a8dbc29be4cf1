"""``jf worker`` on ECS Fargate: for jobs longer than Lambda allows, scaled on the backlog per task.

One Fargate service per lane (``jf worker --queues <lane>``), each with its own task role and its own
scaling: target tracking on the SQS-recommended metric, messages visible divided by running tasks
(metric math in a customized metric specification), scale-out fast and scale-in slow.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from aws_cdk import Acknowledgment, Duration, RemovalPolicy, Stack, Validations
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from jobframework.cdk.defaults import lane_id
from jobframework.cdk.priority_queue import PriorityQueue
from jobframework.cdk.tables import JobTables
from jobframework.cdk.worker_scaling import backlog_policy, wake_from_zero
from jobframework.cdk.workers import TABLE_ACTIONS
from jobframework.errors import ConfigurationError
from jobframework.jobs import Priority
from jobframework.topology import QueueSpec

DOCKERFILE = "jobframework/cdk/worker_image/Dockerfile"
"""The worker image: the project pip-installed on the official Python image, ``jf`` as entry point."""
FARGATE_MAX_STOP_TIMEOUT = 120
"""Seconds: the longest ECS lets a Fargate container run between SIGTERM and SIGKILL."""
DRAIN_MARGIN = 10
"""Seconds of the stop timeout kept back from ``jf worker --drain-timeout`` (to exit and flush logs)."""


def worker_image(root: Path, packages: Sequence[str]) -> ecs.ContainerImage:
    """The worker image built from :data:`DOCKERFILE` with only ``pyproject.toml``, ``README.md`` and
    ``packages`` of ``root`` in the build context (this repository's layout: ``pip install`` of the
    project installs jobframework). Synth only hashes these files; ``cdk deploy`` builds and pushes.

    Raises:
        ConfigurationError: ``root`` has no :data:`DOCKERFILE`.
    """
    if not (root / DOCKERFILE).is_file():
        raise ConfigurationError(
            f"no {DOCKERFILE} under {root}: pass an image of your own (ecs.ContainerImage) that runs "
            "`jf worker` with your packages installed"
        )
    exclude = ["*", "!pyproject.toml", "!README.md", f"!{DOCKERFILE}", "**/__pycache__", "**/*.pyc"]
    for package in packages:
        exclude[1:1] = [f"!{package}", f"!{package}/**"]
    return ecs.ContainerImage.from_asset(str(root), file=DOCKERFILE, exclude=exclude)


class ContainerWorkers(Construct):
    """Fargate services that run ``jf worker`` on the given lanes, scaled on backlog per task.

    Props (durations are seconds):
        lanes: the topology's queue specs of the lanes to serve (one service each).
        queues: the :class:`PriorityQueue` of each lane.
        tables: the framework's tables (item read/write for every task role).
        environment: ``RuntimeConfig.to_env()`` plus ``JF_JOBS`` (what every task gets).
        vpc: default a new two-AZ VPC with public subnets only (no NAT gateway: tasks get a public IP for
            egress to SQS, ECR and CloudWatch Logs, and a security group with no ingress at all) and free
            gateway endpoints for S3 and DynamoDB (table and image-layer traffic stays in the VPC).
        cluster: default a new cluster with Container Insights (it publishes ``RunningTaskCount``).
        image: the ``jf worker`` image (e.g. :func:`worker_image`); required.
        stage: passed to ``jf worker --stage``.
        cpu, memory_mb: of each task; default 1024 (1 vCPU) and 2048.
        min_tasks: by lane; default 1 for critical lanes (never cold), 0 for the others.
        max_tasks: default 10.
        backlog_per_task: the target of target tracking: messages one task may have waiting, i.e. the
            acceptable latency divided by the average processing time; default 10.
        scale_out_cooldown: default 60 (fast); scale_in_cooldown: default 300 (slow).
        stop_timeout: SIGTERM to SIGKILL, at most 120 (Fargate's limit); default 120. ``jf worker``
            drains (finishes its in-flight batches, receives nothing new) in ``stop_timeout - 10``.
        log_retention: default two weeks; removal_policy: of the log groups, default ``DESTROY``.

    Attributes:
        vpc, cluster, image, services, task_definitions, task_roles, log_groups, scaling_targets,
        scaling_policies, wake_alarms (lanes with min 0: one task when messages wait and none runs).

    Raises:
        ConfigurationError: an unknown lane, a stop timeout over 120 s, or min over max tasks.

    Grants are least privilege, the same as the Lambda consumers': consume its own queue, SendMessage on
    its DLQ, item read/write on the two tables, logs on its own log group.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        lanes: Sequence[QueueSpec],
        queues: Mapping[str, PriorityQueue],
        tables: JobTables,
        environment: Mapping[str, str],
        vpc: ec2.IVpc | None = None,
        cluster: ecs.ICluster | None = None,
        image: ecs.ContainerImage | None = None,
        stage: str = "dev",
        cpu: int = 1024,
        memory_mb: int = 2048,
        min_tasks: Mapping[str, int] | None = None,
        max_tasks: int = 10,
        backlog_per_task: int = 10,
        scale_out_cooldown: int = 60,
        scale_in_cooldown: int = 300,
        stop_timeout: int = FARGATE_MAX_STOP_TIMEOUT,
        log_retention: logs.RetentionDays = logs.RetentionDays.TWO_WEEKS,
        removal_policy: RemovalPolicy = RemovalPolicy.DESTROY,
        encryption_key: kms.IKey | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self._encryption_key = encryption_key
        if not 0 < stop_timeout <= FARGATE_MAX_STOP_TIMEOUT:
            raise ConfigurationError(
                f"container workers: stop_timeout={stop_timeout}s; Fargate allows 1 to "
                f"{FARGATE_MAX_STOP_TIMEOUT} s between SIGTERM and SIGKILL"
            )
        unknown = [spec.lane for spec in lanes if spec.lane not in queues]
        if unknown:
            raise ConfigurationError(
                f"container workers: no queue for lane(s) {', '.join(unknown)} (known: {', '.join(queues)})"
            )
        if vpc is None and cluster is None:
            vpc = self._vpc(log_retention, removal_policy)
        self.vpc = vpc if vpc is not None else cluster.vpc if cluster is not None else None
        self.cluster: ecs.ICluster = cluster or ecs.Cluster(
            self, "Cluster", vpc=vpc, container_insights_v2=ecs.ContainerInsights.ENABLED
        )
        if image is None:
            raise ConfigurationError("container workers need image= (e.g. worker_image(root, packages))")
        self.image = image
        self.services: dict[str, ecs.FargateService] = {}
        self.task_definitions: dict[str, ecs.FargateTaskDefinition] = {}
        self.task_roles: dict[str, iam.IRole] = {}
        self.log_groups: dict[str, logs.LogGroup] = {}
        self.scaling_targets: dict[str, appscaling.ScalableTarget] = {}
        self.scaling_policies: dict[str, appscaling.CfnScalingPolicy] = {}
        self.wake_alarms: dict[str, cloudwatch.Alarm] = {}
        stack = Stack.of(self)
        region = stack.region
        self._scaling_role = iam.Role.from_role_arn(
            self,
            "ScalingRole",
            stack.format_arn(
                service="iam",
                region="",
                resource="role/aws-service-role/ecs.application-autoscaling.amazonaws.com",
                resource_name="AWSServiceRoleForApplicationAutoScaling_ECSService",
            ),
        )
        """Application Auto Scaling's service-linked role for ECS (what ``auto_scale_task_count`` uses)."""

        for spec in lanes:
            lid = lane_id(spec.lane)
            pq = queues[spec.lane]
            least = (min_tasks or {}).get(spec.lane, 1 if spec.priority is Priority.CRITICAL else 0)
            if not 0 <= least <= max_tasks:
                raise ConfigurationError(
                    f"container workers of {spec.lane}: min tasks {least} must be within 0..{max_tasks}"
                )
            log_group = logs.LogGroup(
                self,
                f"{lid}LogGroup",
                log_group_name=f"/jobframework/workers/{spec.name}",
                retention=log_retention,
                removal_policy=removal_policy,
                encryption_key=self._encryption_key,
            )
            task = ecs.FargateTaskDefinition(
                self,
                f"{lid}Task",
                cpu=cpu,
                memory_limit_mib=memory_mb,
                runtime_platform=ecs.RuntimePlatform(
                    cpu_architecture=ecs.CpuArchitecture.X86_64,
                    operating_system_family=ecs.OperatingSystemFamily.LINUX,
                ),
            )
            task.add_container(
                "worker",
                image=self.image,
                command=[
                    "worker",
                    "--queues",
                    spec.lane,
                    "--exact-lanes",  # this lane only: its priority's other lanes keep their consumers
                    "--stage",
                    stage,
                    "--drain-timeout",
                    str(max(1, stop_timeout - DRAIN_MARGIN)),
                ],
                environment={**environment, "JF_REGION": region},
                logging=ecs.LogDrivers.aws_logs(stream_prefix="worker", log_group=log_group),
                stop_timeout=Duration.seconds(stop_timeout),
                readonly_root_filesystem=True,
            )
            task.add_volume(name="tmp")  # the only writable path, as in Lambda
            container = task.default_container
            assert container is not None
            container.add_mount_points(
                ecs.MountPoint(container_path="/tmp", source_volume="tmp", read_only=False)
            )
            Validations.of(task.obtain_execution_role()).acknowledge(
                Acknowledgment(
                    id="AwsSolutions::AwsSolutions-IAM5[Resource::*]",
                    reason="the task execution role pulls the worker image: ecr:GetAuthorizationToken "
                    "has no resource-level permissions, AWS requires Resource '*'",
                )
            )
            role = task.task_role
            pq.queue.grant_consume_messages(role)
            pq.dead_letter_queue.grant_send_messages(role)
            for table in (tables.state_table, tables.idempotency_table):
                table.grant(role, *TABLE_ACTIONS)
            Validations.of(task).acknowledge(
                Acknowledgment(
                    id="AwsSolutions::AwsSolutions-ECS2",
                    reason="the environment holds the JF_* runtime configuration (queue URLs, table and "
                    "bucket names, the job modules), the same values the Lambda consumers get; no secrets "
                    "(the signing keys are read from SSM or Secrets Manager at run time)",
                )
            )
            service = ecs.FargateService(
                self,
                f"{lid}Service",
                cluster=self.cluster,
                task_definition=task,
                service_name=f"{spec.name}-worker",
                assign_public_ip=True,
                vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PUBLIC),
                min_healthy_percent=100,
                max_healthy_percent=200,
                circuit_breaker=ecs.DeploymentCircuitBreaker(enable=True, rollback=True),
            )
            target = appscaling.ScalableTarget(
                self,
                f"{lid}ScalingTarget",
                service_namespace=appscaling.ServiceNamespace.ECS,
                resource_id=f"service/{self.cluster.cluster_name}/{service.service_name}",
                scalable_dimension="ecs:service:DesiredCount",
                min_capacity=least,
                max_capacity=max_tasks,
                role=self._scaling_role,
            )
            target.node.add_dependency(service)
            self.scaling_policies[spec.lane] = backlog_policy(
                self,
                lid,
                target,
                cluster_name=self.cluster.cluster_name,
                queue_name=pq.queue.queue_name,
                service_name=service.service_name,
                backlog_per_task=backlog_per_task,
                scale_out_cooldown=scale_out_cooldown,
                scale_in_cooldown=scale_in_cooldown,
            )
            if least == 0:
                self.wake_alarms[spec.lane] = wake_from_zero(
                    self,
                    lid,
                    target,
                    cluster_name=self.cluster.cluster_name,
                    queue_name=pq.queue.queue_name,
                    service_name=service.service_name,
                )
            self.services[spec.lane] = service
            self.task_definitions[spec.lane] = task
            self.task_roles[spec.lane] = role
            self.log_groups[spec.lane] = log_group
            self.scaling_targets[spec.lane] = target

    def _vpc(self, log_retention: logs.RetentionDays, removal_policy: RemovalPolicy) -> ec2.Vpc:
        vpc = ec2.Vpc(
            self,
            "Vpc",
            max_azs=2,
            nat_gateways=0,
            subnet_configuration=[
                ec2.SubnetConfiguration(name="workers", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24)
            ],
            gateway_endpoints={
                "S3": ec2.GatewayVpcEndpointOptions(service=ec2.GatewayVpcEndpointAwsService.S3),
                "DynamoDB": ec2.GatewayVpcEndpointOptions(service=ec2.GatewayVpcEndpointAwsService.DYNAMODB),
            },
        )
        flow_logs = logs.LogGroup(
            self,
            "FlowLogs",
            retention=log_retention,
            removal_policy=removal_policy,
            encryption_key=self._encryption_key,
        )
        vpc.add_flow_log(
            "FlowLog",
            destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_logs),
            traffic_type=ec2.FlowLogTrafficType.REJECT,
        )
        return vpc
