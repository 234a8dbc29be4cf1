"""Secure defaults kept in one place, and what a stage (dev, prod) changes.

Every SQS queue the framework creates goes through :func:`secure_queue`: SSE on (SQS-managed
keys), ``enforceSSL`` on (a queue policy that denies non-TLS requests). Durations are seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Acknowledgment, Annotations, ArnFormat, Duration, RemovalPolicy, Stack, Token, Validations
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

QUEUE_ENCRYPTION = sqs.QueueEncryption.SQS_MANAGED
"""SSE with SQS-owned keys: no KMS key policy to manage, and EventBridge Scheduler can send to it."""

ALARM_PERIOD = Duration.minutes(1)
"""SQS publishes its metrics each minute."""

POWERTOOLS_LAYER_ACCOUNT = "017000801446"
POWERTOOLS_LAYER_VERSION = 38
"""Version of the ``AWSLambdaPowertoolsPythonV3-<python>-x86_64`` layer; override with
``-c powertools_layer_version=N`` (check with ``aws lambda get-layer-version-by-arn``)."""

DEPTH_GROWTH_PER_MINUTE = 50
"""Messages a minute by which a queue's backlog must grow, minute after minute, to raise its
depth-growth alarm (``DIFF`` of the visible messages)."""
DEPTH_GROWTH_MINUTES = 5
"""Consecutive minutes of that growth before the alarm fires: a burst drains, a trend does not."""
UTILIZATION_BAND = (30, 80)
"""Worker utilization (concurrent executions over the concurrency allowed), in percent, that a
consumer is sized for: below the band it is oversized, above it messages start to wait for a slot."""

METRICS_SERVICE = "jobframework"
"""The ``service`` dimension Powertools adds to every EMF metric of the consumer
(``jobframework.telemetry.SERVICE``); an alarm must name it or it watches a metric nobody writes."""

DELAY_GROUP_SUFFIX = "delays"
"""The schedule group of one-time delays is ``<app>-<stage>-delays``."""
CANARY_ALIAS = "live"
"""The alias every consumer's event source mappings invoke; CodeDeploy shifts it to each new version."""


def lane_id(lane: str) -> str:
    """The construct-id stem of a lane: ``high`` -> ``High``, ``high-cpu`` -> ``HighCpu``.

    Example:
        >>> lane_id("low-io")
        'LowIo'
    """
    return "".join(part.capitalize() for part in str(lane).split("-"))


@dataclass(frozen=True, slots=True)
class StageConfig:
    """What the stage decides: whether data outlives the stack, how long logs and payloads are kept.

    ``prod`` retains tables, queues and logs when the stack is deleted, keeps logs a year and offloaded
    payloads 30 days; any other stage (``dev``, ``test``, a developer's name) destroys them, keeps logs
    two weeks and payloads 7 days.

    Example:
        >>> StageConfig.for_stage("prod").retain
        True
    """

    stage: str
    retain: bool
    log_retention: logs.RetentionDays
    payload_expiry_days: int = 7
    """Days an offloaded payload is kept. Prod keeps them longer than a DLQ keeps messages (14 days), so
    that a dead letter's pointer still resolves when it is redriven; dev's 7 days do not."""

    @classmethod
    def for_stage(cls, stage: str) -> StageConfig:
        """Production's settings (data retained, logs a year) for ``prod``, ``production`` and a stage
        named ``prod-...`` (``prod-eu``); dev's for any other (deleted with the stack, logs two weeks).

        Example:
            >>> [StageConfig.for_stage(s).retain for s in ("prod", "production", "prod-eu", "staging")]
            [True, True, True, False]
        """
        if is_production(stage):
            return cls(
                stage=stage, retain=True, log_retention=logs.RetentionDays.ONE_YEAR, payload_expiry_days=30
            )
        return cls(stage=stage, retain=False, log_retention=logs.RetentionDays.TWO_WEEKS)

    @property
    def removal_policy(self) -> RemovalPolicy:
        return RemovalPolicy.RETAIN if self.retain else RemovalPolicy.DESTROY


def pseudo(value: str, name: str) -> str:
    """A stack's partition, region or account as cdk-nag writes it in a finding: ``<AWS::Region>``
    while a token, the value itself where the stack is pinned (``env=``) or CDK writes literals
    (``@aws-cdk/core:enablePartitionLiterals``, which ``jf new`` turns on)."""
    return f"<AWS::{name}>" if Token.is_unresolved(value) else value


def is_production(stage: str) -> bool:
    """Whether a stage's name says it is production (``prod``, ``production``, ``prod-eu``)."""
    return stage in ("prod", "production") or stage.startswith(("prod-", "prod_"))


def secure_queue(
    scope: Construct,
    construct_id: str,
    *,
    queue_name: str,
    retention: int,
    removal_policy: RemovalPolicy,
    visibility_timeout: int | None = None,
    dead_letter_queue: sqs.DeadLetterQueue | None = None,
    redrive_allow_policy: sqs.RedriveAllowPolicy | None = None,
    fifo: bool = False,
    encryption_key: kms.IKey | None = None,
) -> sqs.Queue:
    """An SQS queue with the framework's secure defaults (SSE, TLS only).

    Args:
        retention: seconds a message is kept.
        visibility_timeout: seconds; SQS's default (30) when ``None``.
        fifo: a FIFO queue (its name ends ``.fifo``), deduplicated by the id each send carries
            (content-based deduplication off: two jobs with equal bodies are different jobs).
        encryption_key: a customer-managed KMS key to encrypt it with; default SQS-managed SSE.
    """
    return sqs.Queue(
        scope,
        construct_id,
        queue_name=queue_name,
        encryption=QUEUE_ENCRYPTION if encryption_key is None else sqs.QueueEncryption.KMS,
        encryption_master_key=encryption_key,
        enforce_ssl=True,
        retention_period=Duration.seconds(retention),
        visibility_timeout=Duration.seconds(visibility_timeout) if visibility_timeout is not None else None,
        dead_letter_queue=dead_letter_queue,
        redrive_allow_policy=redrive_allow_policy,
        removal_policy=removal_policy,
        fifo=True if fifo else None,
        content_based_deduplication=False if fifo else None,
    )


def allow_log_groups(key: kms.IKey) -> None:
    """Let CloudWatch Logs encrypt the stack's log groups with ``key`` (its key policy must allow the
    service, for log groups of this account and region); a key imported into the stack, whose policy
    it cannot change, gets a warning saying what to add."""
    stack = Stack.of(key)
    added = key.add_to_resource_policy(
        iam.PolicyStatement(
            principals=[iam.ServicePrincipal(f"logs.{stack.region}.amazonaws.com")],
            actions=[
                "kms:Encrypt*",
                "kms:Decrypt*",
                "kms:ReEncrypt*",
                "kms:GenerateDataKey*",
                "kms:Describe*",
            ],
            resources=["*"],
            conditions={
                "ArnLike": {
                    "kms:EncryptionContext:aws:logs:arn": stack.format_arn(
                        service="logs",
                        resource="log-group",
                        resource_name="*",
                        arn_format=ArnFormat.COLON_RESOURCE_NAME,
                    )
                }
            },
        )
    ).statement_added
    if not added:
        Annotations.of(stack).add_warning_v2(
            "jobframework:encryption-key",
            "the encryption key is not this stack's, so its policy cannot be changed here: allow "
            f"logs.{stack.region}.amazonaws.com to use it (kms:Encrypt*, Decrypt*, ReEncrypt*, "
            "GenerateDataKey*, Describe*) for this account's log groups, or the log groups fail to create",
        )


KEY_WILDCARDS = ("Action::kms:ReEncrypt*", "Action::kms:GenerateDataKey*")
"""The IAM5 findings of CDK's own grants on an encrypted queue (``grant_send_messages`` grants
``kms:ReEncrypt*`` and ``kms:GenerateDataKey*`` on its key)."""
_KEY_WILDCARD_REASON = (
    "CDK's SQS grant on the deployment's own customer-managed key (encryption_key=): the actions' "
    "wildcards name that one key's encryption and data-key calls, on that key only"
)


def grant_key_use(key: kms.IKey, grantee: iam.IGrantable) -> None:
    """Let ``grantee`` encrypt and decrypt the deployment's data with ``key``: the calls SQS, DynamoDB
    and S3 make for it (no wildcard action, so no cdk-nag finding of its own), and an acknowledgment
    of CDK's SQS grants' wildcards on that key."""
    iam.Grant.add_to_principal(
        grantee=grantee,
        actions=["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey"],
        resource_arns=[key.key_arn],
    )
    for finding in KEY_WILDCARDS:
        acknowledge_wildcard(grantee, finding, _KEY_WILDCARD_REASON)


def acknowledge_key_wildcards(scope: Construct) -> None:
    """Acknowledge :data:`KEY_WILDCARDS` for the roles within ``scope`` (the deployment's own)."""
    Validations.of(scope).acknowledge(
        *(
            Acknowledgment(id=f"AwsSolutions::AwsSolutions-IAM5[{finding}]", reason=_KEY_WILDCARD_REASON)
            for finding in KEY_WILDCARDS
        )
    )


def acknowledge_wildcard(grantee: iam.IGrantable, finding: str, reason: str) -> None:
    """Acknowledge one cdk-nag IAM5 ``finding`` (e.g. ``Resource::<PayloadBucket.Arn>/*``) on the
    grantee's principal, when it is a construct of this app; the acknowledgment names that one
    resource pattern, never the rule as a whole."""
    target = grantee.grant_principal
    if isinstance(target, Construct):
        Validations.of(target).acknowledge(
            Acknowledgment(id=f"AwsSolutions::AwsSolutions-IAM5[{finding}]", reason=reason)
        )


def alarm_on_any(
    scope: Construct,
    construct_id: str,
    *,
    description: str,
    metric: cloudwatch.IMetric,
    threshold: float = 1,
) -> cloudwatch.Alarm:
    """An alarm as soon as ``metric`` reaches ``threshold`` (default 1) in one period; no data is fine.

    The shape of every alarm of the stack: a dead letter, a failed delivery, a spent budget.
    """
    return cloudwatch.Alarm(
        scope,
        construct_id,
        alarm_description=description,
        metric=metric,
        threshold=threshold,
        evaluation_periods=1,
        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
    )


def jf_command(topology_parameter: str | None) -> str:
    """``jf`` as an alarm's text writes it for a topology: with the topology's parameter, which ``jf``
    otherwise takes to be ``/jf/dev/topology`` (a paged operator copies the command as written).

    Example:
        >>> jf_command("/shop/prod/topology"), jf_command(None)
        ('JF_TOPOLOGY_PARAMETER=/shop/prod/topology jf', 'jf')
    """
    return f"JF_TOPOLOGY_PARAMETER={topology_parameter} jf" if topology_parameter else "jf"
