"""Secure defaults kept in one place, and what a stage (dev, prod) changes.

Every SQS queue the framework creates goes through :func:`secure_queue`: SSE on (SQS-managed
keys), ``enforceSSL`` on (a queue policy that denies non-TLS requests). Durations are seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Acknowledgment, Duration, RemovalPolicy, Token, Validations
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
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
) -> sqs.Queue:
    """An SQS queue with the framework's secure defaults (SSE, TLS only).

    Args:
        retention: seconds a message is kept.
        visibility_timeout: seconds; SQS's default (30) when ``None``.
        fifo: a FIFO queue (its name ends ``.fifo``), deduplicated by the id each send carries
            (content-based deduplication off: two jobs with equal bodies are different jobs).
    """
    return sqs.Queue(
        scope,
        construct_id,
        queue_name=queue_name,
        encryption=QUEUE_ENCRYPTION,
        enforce_ssl=True,
        retention_period=Duration.seconds(retention),
        visibility_timeout=Duration.seconds(visibility_timeout) if visibility_timeout is not None else None,
        dead_letter_queue=dead_letter_queue,
        redrive_allow_policy=redrive_allow_policy,
        removal_policy=removal_policy,
        fifo=True if fifo else None,
        content_based_deduplication=False if fifo else None,
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
