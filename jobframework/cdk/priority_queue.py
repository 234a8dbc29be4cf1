"""One priority's queue, its dead-letter queue, and the two alarms that say it is unhealthy."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from jobframework.cdk.defaults import ALARM_PERIOD, alarm_on_any, jf_command, secure_queue
from jobframework.errors import ConfigurationError
from jobframework.jobs import FIFO_MAX_BATCH
from jobframework.topology import MAX_RETENTION, MAX_VISIBILITY, QueueSpec

VISIBILITY_FACTOR = 6
"""AWS's advice for Lambda event sources: visibility timeout at least 6x the function timeout plus the
event source's ``MaximumBatchingWindowInSeconds``."""


def minimum_visibility(consumer_timeout: int, batching_window: int = 0) -> int:
    """The shortest visibility timeout AWS advises for a queue behind a Lambda event source (seconds).

    Example:
        >>> minimum_visibility(30, batching_window=5)
        185
    """
    return VISIBILITY_FACTOR * consumer_timeout + batching_window


def check_fifo_event_source(spec: QueueSpec) -> None:
    """A FIFO queue's event source takes at most 10 records a batch and no batching window (AWS).

    Raises:
        ConfigurationError: the lane asks for more, naming what to change.
    """
    if spec.fifo and (spec.batch_size > FIFO_MAX_BATCH or spec.batching_window):
        raise ConfigurationError(
            f"queue {spec.name} is a FIFO queue (lane {spec.lane}, ordered jobs): FIFO event sources allow "
            f"batches of {FIFO_MAX_BATCH} and no batching window, but it asks for batch_size="
            f"{spec.batch_size} and a {spec.batching_window}s window; set batch_size to at most "
            f"{FIFO_MAX_BATCH} and batching_window to 0 for this lane"
        )


class PriorityQueue(Construct):
    """A priority queue and its DLQ, with the framework's safety checks done at synth time.

    Props (flat; durations are seconds):
        queue_name, dead_letter_queue_name: physical names.
        consumer_timeout: the consuming function's timeout; the visibility timeout must be at least
            6x it plus the batching window (AWS's advice, so a retried batch never overlaps a running
            one).
        batching_window: the event source's ``MaximumBatchingWindowInSeconds``; default 0.
        visibility_timeout: default ``min(6 * consumer_timeout + batching_window, 43200)``.
        max_receive_count: the redrive policy's safety net; must be above every routed job's
            ``max_attempts`` (the framework dead-letters itself before SQS would).
        job_max_attempts: ``{job name: max_attempts}`` of the jobs routed here.
        retention: default 4 days; dead_letter_retention: default 14 days (must be longer).
        target_latency: the age of the oldest message above which the queue alarms (default 60).
        removal_policy: default ``DESTROY``.
        fifo: the queue and its DLQ are FIFO queues (both names end ``.fifo``): an ordered lane.
        lane, topology_parameter: the queue's lane and its topology's parameter, which the dead-letter
            alarm's text puts in the ``jf`` commands it names (``JF_TOPOLOGY_PARAMETER=/app/prod/topology
            jf dlq peek high``: as written, ``jf`` reads ``/jf/dev/topology``); default a plain ``jf``.

    Attributes:
        queue, dead_letter_queue, dead_letter_alarm (depth, pages), dead_letter_inflow_alarm (new dead
        letters in the last minute: what a canary deployment rolls back on), age_alarm, alarms.

    Raises:
        ConfigurationError: a job's max attempts is not below ``max_receive_count`` (naming the
            job), the visibility timeout is under 6x the consumer timeout plus the batching window, or
            the DLQ would not
            outlive the queue's messages.

    The DLQ's ``redriveAllowPolicy`` names its source queue by ARN built from the queue's name
    (a reference would be a dependency cycle: the queue's redrive policy already names the DLQ).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        queue_name: str,
        dead_letter_queue_name: str,
        consumer_timeout: int,
        max_receive_count: int,
        job_max_attempts: Mapping[str, int] | None = None,
        visibility_timeout: int | None = None,
        batching_window: int = 0,
        retention: int = 4 * 24 * 3600,
        dead_letter_retention: int = MAX_RETENTION,
        target_latency: int = 60,
        removal_policy: RemovalPolicy = RemovalPolicy.DESTROY,
        fifo: bool = False,
        lane: str | None = None,
        topology_parameter: str | None = None,
        encryption_key: kms.IKey | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        named = [n for n in (queue_name, dead_letter_queue_name) if n.endswith(".fifo") != fifo]
        if named:
            raise ConfigurationError(
                f"queue {', '.join(named)}: a FIFO queue's name ends '.fifo' and a standard queue's does "
                f"not (fifo={fifo}); name both the queue and its DLQ to match"
            )
        least = minimum_visibility(consumer_timeout, batching_window)
        visibility = visibility_timeout if visibility_timeout is not None else min(MAX_VISIBILITY, least)
        for job_name, attempts in sorted((job_max_attempts or {}).items()):
            if attempts >= max_receive_count:
                raise ConfigurationError(
                    f"job {job_name} has max_attempts={attempts} but queue {queue_name} has "
                    f"maxReceiveCount={max_receive_count}: SQS would dead-letter it before its retries run "
                    f"out; raise max_receive_count above {attempts} or lower the job's max_attempts"
                )
        if visibility < least:
            window = f" plus its batching window ({batching_window}s)" if batching_window else ""
            raise ConfigurationError(
                f"queue {queue_name}: visibility timeout {visibility}s is under {VISIBILITY_FACTOR}x the "
                f"consumer's timeout ({consumer_timeout}s){window}; raise it to at least {least}s or "
                "shorten the jobs' timeouts (or the batching window)"
            )
        if dead_letter_retention <= retention:
            raise ConfigurationError(
                f"queue {queue_name}: the DLQ's retention ({dead_letter_retention}s) must be longer than the "
                f"queue's ({retention}s), or a message could expire in the DLQ before anyone sees it"
            )

        self.queue_name = queue_name
        self.max_receive_count = max_receive_count
        source_arn = Stack.of(self).format_arn(service="sqs", resource=queue_name)
        self.dead_letter_queue: sqs.Queue = secure_queue(
            self,
            "DeadLetterQueue",
            queue_name=dead_letter_queue_name,
            retention=dead_letter_retention,
            removal_policy=removal_policy,
            fifo=fifo,
            encryption_key=encryption_key,
            redrive_allow_policy=sqs.RedriveAllowPolicy(
                redrive_permission=sqs.RedrivePermission.BY_QUEUE,
                source_queues=[sqs.Queue.from_queue_arn(self, "SourceQueueRef", source_arn)],
            ),
        )
        self.queue: sqs.Queue = secure_queue(
            self,
            "Queue",
            queue_name=queue_name,
            retention=retention,
            visibility_timeout=visibility,
            removal_policy=removal_policy,
            fifo=fifo,
            encryption_key=encryption_key,
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=self.dead_letter_queue, max_receive_count=max_receive_count
            ),
        )

        jf, on = jf_command(topology_parameter), f" {lane or 'LANE'}"
        self.dead_letter_alarm = alarm_on_any(
            self,
            "DeadLetterAlarm",
            description=(
                f"{dead_letter_queue_name} holds dead letters: inspect with `{jf} dlq peek{on}`, fix the "
                f"cause, then redrive (`{jf} dlq redrive{on}` or the SQS console)"
            ),
            metric=self.dead_letter_queue.metric_approximate_number_of_messages_visible(
                period=ALARM_PERIOD, statistic="Maximum"
            ),
        )
        self.age_alarm = cloudwatch.Alarm(
            self,
            "AgeOfOldestAlarm",
            alarm_description=(
                f"the oldest message in {queue_name} is older than its target latency ({target_latency}s): "
                "the consumer is behind, throttled or failing"
            ),
            metric=self.queue.metric_approximate_age_of_oldest_message(
                period=ALARM_PERIOD, statistic="Maximum"
            ),
            threshold=target_latency,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        self.dead_letter_inflow_alarm = alarm_on_any(
            self,
            "DeadLetterInflowAlarm",
            description=(
                f"jobs were dead-lettered into {dead_letter_queue_name} in the last minute: a canary "
                "deployment of the consumer rolls back on it (not routed to the topic: the DLQ alarm pages)"
            ),
            metric=self.dead_letter_queue.metric_number_of_messages_sent(
                period=ALARM_PERIOD, statistic="Sum"
            ),
        )
        self.alarms: list[cloudwatch.Alarm] = [self.dead_letter_alarm, self.age_alarm]
        """The alarms to route to the topic (the inflow alarm is a rollback signal only)."""
        self.visibility_timeout = Duration.seconds(visibility)
