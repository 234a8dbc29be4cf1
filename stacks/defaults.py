"""Secure defaults kept in one place, and what a stage (dev, prod) changes.

Every SQS queue the framework creates goes through :func:`secure_queue`: SSE on (SQS-managed
keys), ``enforceSSL`` on (a queue policy that denies non-TLS requests). Durations are seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration, RemovalPolicy
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

METRICS_NAMESPACE = "JobFramework"


@dataclass(frozen=True, slots=True)
class StageConfig:
    """What the stage decides: whether data outlives the stack, and how long logs are kept.

    ``prod`` retains tables, queues and logs when the stack is deleted and keeps logs a year;
    any other stage (``dev``, ``test``, a developer's name) destroys them and keeps logs two weeks.

    Example:
        >>> StageConfig.for_stage("prod").retain
        True
    """

    stage: str
    retain: bool
    log_retention: logs.RetentionDays

    @classmethod
    def for_stage(cls, stage: str) -> StageConfig:
        if stage == "prod":
            return cls(stage=stage, retain=True, log_retention=logs.RetentionDays.ONE_YEAR)
        return cls(stage=stage, retain=False, log_retention=logs.RetentionDays.TWO_WEEKS)

    @property
    def removal_policy(self) -> RemovalPolicy:
        return RemovalPolicy.RETAIN if self.retain else RemovalPolicy.DESTROY


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
) -> sqs.Queue:
    """An SQS queue with the framework's secure defaults (SSE, TLS only).

    Args:
        retention: seconds a message is kept.
        visibility_timeout: seconds; SQS's default (30) when ``None``.
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
    )
