"""The dashboard's rows per job type and per consumer: enqueue-to-completion latency, processing time,
first-attempt failure and dead-letter rates (the consumer's EMF metrics, see
:class:`jobframework.telemetry.BatchMetrics`), and worker utilization (Lambda's concurrency)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_lambda as lambda_

from jobframework.cdk.defaults import METRICS_SERVICE, UTILIZATION_BAND
from jobframework.errors import ConfigurationError
from jobframework.topology import ConsumerSpec, JobSpec, QueueSpec

PERIOD = Duration.minutes(1)
WIDTH = 8
"""Three widgets a row (a dashboard row is 24 wide)."""
MS_AXIS = cloudwatch.YAxisProps(min=0, label="ms", show_units=False)
PERCENT_AXIS = cloudwatch.YAxisProps(min=0, label="%", show_units=False)
GREY = "#7f7f7f"
RED = "#d62728"


def job_metric(namespace: str, job: JobSpec, metric_name: str, statistic: str) -> cloudwatch.Metric:
    """One of the consumer's per-job metrics, with the dimensions it writes (``JobType``, ``Priority``
    and the ``service`` that Powertools adds)."""
    return cloudwatch.Metric(
        namespace=namespace,
        metric_name=metric_name,
        dimensions_map={"JobType": job.name, "Priority": job.priority.value, "service": METRICS_SERVICE},
        statistic=statistic,
        period=PERIOD,
        label=job.name,
    )


def latency_widgets(namespace: str, jobs: Sequence[JobSpec]) -> list[cloudwatch.IWidget]:
    """Enqueue to completion p50 and p95 (``EndToEndLatency``) and processing time p95, a line a job."""

    def graph(title: str, metric_name: str, statistic: str) -> cloudwatch.GraphWidget:
        return cloudwatch.GraphWidget(
            title=title,
            left=[job_metric(namespace, job, metric_name, statistic) for job in jobs],
            left_y_axis=MS_AXIS,
            width=WIDTH,
        )

    return [
        graph("Enqueue to completion p50 (ms)", "EndToEndLatency", "p50"),
        graph("Enqueue to completion p95 (ms)", "EndToEndLatency", "p95"),
        graph("Processing time p95 (ms)", "ProcessingTime", "p95"),
    ]


def first_attempt_failure_rate(namespace: str, job: JobSpec, index: int) -> cloudwatch.MathExpression:
    """Percent of the job's first executions that failed: ``FirstAttemptFailures / FirstAttempts``."""
    return cloudwatch.MathExpression(
        expression=f"100 * FILL(f{index}, 0) / n{index}",
        using_metrics={
            f"n{index}": job_metric(namespace, job, "FirstAttempts", "Sum"),
            f"f{index}": job_metric(namespace, job, "FirstAttemptFailures", "Sum"),
        },
        label=job.name,
        period=PERIOD,
    )


def dead_letter_rate(namespace: str, job: JobSpec, index: int) -> cloudwatch.MathExpression:
    """Percent of the job's finished jobs that were dead-lettered: ``DeadLettered / (Succeeded +
    DeadLettered)`` (a minute with neither has no point)."""
    return cloudwatch.MathExpression(
        expression=f"100 * FILL(d{index}, 0) / (FILL(s{index}, 0) + FILL(d{index}, 0))",
        using_metrics={
            f"s{index}": job_metric(namespace, job, "Succeeded", "Sum"),
            f"d{index}": job_metric(namespace, job, "DeadLettered", "Sum"),
        },
        label=job.name,
        period=PERIOD,
    )


def rate_widgets(namespace: str, jobs: Sequence[JobSpec]) -> list[cloudwatch.IWidget]:
    """First-attempt failure rate and dead-letter rate, in percent, a line a job."""
    return [
        cloudwatch.GraphWidget(
            title="First-attempt failure rate (%)",
            left=[first_attempt_failure_rate(namespace, job, i) for i, job in enumerate(jobs)],
            left_y_axis=PERCENT_AXIS,
            width=WIDTH,
        ),
        cloudwatch.GraphWidget(
            title="Dead-letter rate (%)",
            left=[dead_letter_rate(namespace, job, i) for i, job in enumerate(jobs)],
            left_y_axis=PERCENT_AXIS,
            width=WIDTH,
        ),
    ]


def allowed_concurrency(
    consumer: ConsumerSpec, queues: Sequence[QueueSpec], skip_lanes: Sequence[str] = ()
) -> int:
    """The concurrent executions a consumer function may reach: the sum of its event source mappings'
    maximum concurrency (the lanes it consumes, not ``skip_lanes``), capped by its reserved
    concurrency when it has one.

    Raises:
        ConfigurationError: the consumer reads no lane (no function is built for it).

    Example:
        >>> from jobframework.topology import Topology
        >>> from jobframework.jobs import JobRegistry
        >>> topology = Topology.from_registry(JobRegistry())
        >>> allowed_concurrency(topology.consumer("shared"), topology.queues)
        12
        >>> allowed_concurrency(topology.consumer("shared"), topology.queues, skip_lanes=("low",))
        10
    """
    lanes = [lane for lane in (consumer.lanes or consumer.priorities) if lane not in skip_lanes]
    mapped = sum(q.max_concurrency for q in queues if q.lane in lanes)
    if not mapped:
        raise ConfigurationError(
            f"consumer {consumer.name} reads no lane here (all of {', '.join(map(str, lanes or ['-']))} "
            "are skipped): it has no function to watch; drop it from `functions`"
        )
    if consumer.reserved_concurrency is not None:
        return min(consumer.reserved_concurrency, mapped)
    return mapped


def utilization(function: lambda_.IFunction, label: str, allowed: int, index: int) -> cloudwatch.IMetric:
    """Percent of the allowed concurrency in use: ``100 * ConcurrentExecutions (max) / allowed``."""
    return cloudwatch.MathExpression(
        expression=f"100 * c{index} / {allowed}",
        using_metrics={
            f"c{index}": function.metric("ConcurrentExecutions", period=PERIOD, statistic="Maximum")
        },
        label=f"{label} (of {allowed})",
        period=PERIOD,
    )


def utilization_widget(
    functions: Mapping[str, lambda_.IFunction], allowed: Mapping[str, int]
) -> cloudwatch.GraphWidget:
    """Worker utilization per consumer function, with the band it is sized for
    (:data:`~jobframework.cdk.defaults.UTILIZATION_BAND`) marked: shaded grey below (oversized),
    red above (messages wait for a free execution)."""
    low, high = UTILIZATION_BAND
    return cloudwatch.GraphWidget(
        title=f"Worker utilization (% of allowed concurrency; sized for {low}-{high} %)",
        left=[utilization(functions[name], name, allowed[name], i) for i, name in enumerate(allowed)],
        left_y_axis=cloudwatch.YAxisProps(min=0, max=100, label="%", show_units=False),
        left_annotations=[
            cloudwatch.HorizontalAnnotation(
                value=low, label=f"{low} %: below, oversized", color=GREY, fill=cloudwatch.Shading.BELOW
            ),
            cloudwatch.HorizontalAnnotation(
                value=high,
                label=f"{high} %: above, add concurrency",
                color=RED,
                fill=cloudwatch.Shading.ABOVE,
            ),
        ],
        width=WIDTH,
    )


def depth_growth_widget(growth: Mapping[str, cloudwatch.IMetric], threshold: float) -> cloudwatch.GraphWidget:
    """Each queue's backlog growth a minute (what its depth-growth alarm watches), with the threshold."""
    return cloudwatch.GraphWidget(
        title="Backlog growth (messages a minute)",
        left=list(growth.values()),
        left_annotations=[
            cloudwatch.HorizontalAnnotation(value=threshold, label="depth-growth alarm", color=RED)
        ],
        width=WIDTH,
    )
