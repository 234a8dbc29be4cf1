"""The single source of truth about queues, consumers, tables and schedules.

:class:`Topology` is derived from the job registry plus :class:`TopologySettings`.
The CDK stacks build AWS resources from it, the local runtime provisions the
embedded AWS from it, and its runtime part, :class:`RuntimeConfig` (queue URLs,
table names), reaches the client and the consumer through ``JF_*`` environment
variables or an SSM parameter. Durations are seconds.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from jobframework.config import (
    ENV_DLQ_URL,
    ENV_ENDPOINT_URL,
    ENV_IDEMPOTENCY_TABLE,
    ENV_JOBS,
    ENV_QUEUE_URL,
    ENV_REGION,
    ENV_STATE_TABLE,
    ENV_TOPOLOGY_PARAMETER,
    QueueEndpoints,
    RuntimeConfig,
)
from jobframework.errors import ConfigurationError
from jobframework.jobs import Job, JobRegistry, Priority
from jobframework.jobs import registry as default_registry

MAX_VISIBILITY = 43_200
DEFAULT_RETENTION = 4 * 24 * 3600
MAX_RETENTION = 14 * 24 * 3600

TARGET_LATENCY: dict[Priority, int] = {
    Priority.CRITICAL: 10,
    Priority.HIGH: 60,
    Priority.DEFAULT: 15 * 60,
    Priority.LOW: 60 * 60,
}
"""Age of the oldest message above which a queue alarms (DESIGN.md's table)."""

CONCURRENCY_WEIGHT: dict[Priority, int] = {Priority.HIGH: 3, Priority.DEFAULT: 2, Priority.LOW: 1}
"""How the shared consumer's maximum concurrency is split between its queues."""

POLL_WEIGHT: dict[Priority, int] = {
    Priority.CRITICAL: 6,
    Priority.HIGH: 3,
    Priority.DEFAULT: 2,
    Priority.LOW: 1,
}
"""Weighted fairness of the local poller (critical first, low still progresses)."""

CRITICAL_CONSUMER = "critical"
SHARED_CONSUMER = "shared"


class TopologySettings(BaseModel):
    """What a deployment chooses; everything else is derived from the jobs."""

    model_config = ConfigDict(frozen=True)

    app: str = Field(default="jf", pattern=r"^[a-z][a-z0-9-]{0,20}$")
    stage: str = Field(default="dev", pattern=r"^[a-z][a-z0-9-]{0,15}$")
    batch_size: int = Field(default=10, ge=1, le=10_000)
    batching_window: int = Field(default=0, ge=0, le=300)
    shared_max_concurrency: int = Field(default=12, ge=6, le=1000)
    """Split 3:2:1 over high, default and low (each event source mapping needs at least 2)."""
    critical_reserved_concurrency: int = Field(default=5, ge=1, le=1000)
    memory_mb: int = Field(default=512, ge=128, le=10_240)
    max_receive_count_margin: int = Field(default=2, ge=1, le=100)
    max_receive_count: dict[Priority, int] = Field(default_factory=dict)
    """Override the derived maxReceiveCount of a queue (must stay above its jobs' max attempts)."""
    retention: int = Field(default=DEFAULT_RETENTION, ge=60, le=MAX_RETENTION - 1)


class QueueSpec(BaseModel):
    """One priority's queue and its dead-letter queue."""

    model_config = ConfigDict(frozen=True)

    priority: Priority
    name: str
    dlq_name: str
    visibility_timeout: int
    max_receive_count: int
    retention: int
    dlq_retention: int
    target_latency: int
    consumer: str
    batch_size: int
    batching_window: int
    max_concurrency: int
    jobs: tuple[str, ...]


class ConsumerSpec(BaseModel):
    """One Lambda consumer function and the queues it reads."""

    model_config = ConfigDict(frozen=True)

    name: str
    function_name: str
    priorities: tuple[Priority, ...]
    timeout: int
    memory_mb: int
    reserved_concurrency: int | None


class JobSpec(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    priority: Priority
    max_attempts: int
    timeout: float


class ScheduleSpec(BaseModel):
    model_config = ConfigDict(frozen=True)

    job: str
    name: str
    expression: str
    timezone: str
    payload: dict[str, Any]
    priority: Priority


def _consumer_timeout(jobs: Iterable[Job[Any]]) -> int:
    """Lambda timeout: the longest job's timeout plus 10 s for the framework, at least 30 s."""
    longest = max((j.timeout for j in jobs), default=20.0)
    return int(min(900, max(30, -(-longest // 1) + 10)))


class Topology(BaseModel):
    """Queues, consumers, tables and schedules of one app and stage."""

    model_config = ConfigDict(frozen=True)

    app: str
    stage: str
    queues: tuple[QueueSpec, ...]
    consumers: tuple[ConsumerSpec, ...]
    jobs: tuple[JobSpec, ...]
    schedules: tuple[ScheduleSpec, ...]
    state_table: str
    idempotency_table: str
    topology_parameter: str

    @classmethod
    def from_registry(
        cls, registry: JobRegistry | None = None, settings: TopologySettings | None = None
    ) -> Topology:
        """Derive the topology of the registered jobs.

        Raises:
            ConfigurationError: a ``max_receive_count`` override is not above the max attempts of a
                job on that queue (the message names the job).
        """
        reg = registry if registry is not None else default_registry
        s = settings or TopologySettings()
        prefix = f"{s.app}-{s.stage}"
        jobs = list(reg)
        by_priority: dict[Priority, list[Job[Any]]] = {p: [] for p in Priority}
        for j in jobs:
            by_priority[j.priority].append(j)

        critical_timeout = _consumer_timeout(by_priority[Priority.CRITICAL])
        shared_timeout = _consumer_timeout(
            by_priority[Priority.HIGH] + by_priority[Priority.DEFAULT] + by_priority[Priority.LOW]
        )
        consumers = (
            ConsumerSpec(
                name=CRITICAL_CONSUMER,
                function_name=f"{prefix}-consumer-critical",
                priorities=(Priority.CRITICAL,),
                timeout=critical_timeout,
                memory_mb=s.memory_mb,
                reserved_concurrency=s.critical_reserved_concurrency,
            ),
            ConsumerSpec(
                name=SHARED_CONSUMER,
                function_name=f"{prefix}-consumer-shared",
                priorities=(Priority.HIGH, Priority.DEFAULT, Priority.LOW),
                timeout=shared_timeout,
                memory_mb=s.memory_mb,
                reserved_concurrency=None,
            ),
        )
        total_weight = sum(CONCURRENCY_WEIGHT.values())
        queues = []
        for p in Priority:
            routed = by_priority[p]
            consumer = consumers[0] if p is Priority.CRITICAL else consumers[1]
            largest = max((j.retry.max_attempts for j in routed), default=1)
            receive_count = s.max_receive_count.get(p, max(largest + s.max_receive_count_margin, 5))
            for j in routed:
                if j.retry.max_attempts >= receive_count:
                    raise ConfigurationError(
                        f"job {j.name} has max_attempts={j.retry.max_attempts} but the {p.value} queue's "
                        f"maxReceiveCount is {receive_count}: SQS would dead-letter it before its retries "
                        f"run out; raise max_receive_count[{p.value!r}] above {j.retry.max_attempts} or "
                        "lower the job's max_attempts"
                    )
            if p is Priority.CRITICAL:
                concurrency = s.critical_reserved_concurrency
            else:
                concurrency = max(2, s.shared_max_concurrency * CONCURRENCY_WEIGHT[p] // total_weight)
            queues.append(
                QueueSpec(
                    priority=p,
                    name=f"{prefix}-{p.value}",
                    dlq_name=f"{prefix}-{p.value}-dlq",
                    visibility_timeout=min(MAX_VISIBILITY, 6 * consumer.timeout),
                    max_receive_count=receive_count,
                    retention=s.retention,
                    dlq_retention=MAX_RETENTION,
                    target_latency=TARGET_LATENCY[p],
                    consumer=consumer.name,
                    batch_size=s.batch_size,
                    batching_window=s.batching_window,
                    max_concurrency=concurrency,
                    jobs=tuple(j.name for j in routed),
                )
            )
        schedules = tuple(
            ScheduleSpec(
                job=j.name,
                name=f"{prefix}-{j.name.replace('.', '-')}"[:64],
                expression=j.schedule.expression,
                timezone=j.schedule.timezone,
                payload=j.schedule.payload,
                priority=j.priority,
            )
            for j in jobs
            if j.schedule is not None
        )
        return cls(
            app=s.app,
            stage=s.stage,
            queues=tuple(queues),
            consumers=consumers,
            jobs=tuple(
                JobSpec(
                    name=j.name, priority=j.priority, max_attempts=j.retry.max_attempts, timeout=j.timeout
                )
                for j in jobs
            ),
            schedules=schedules,
            state_table=f"{prefix}-state",
            idempotency_table=f"{prefix}-idempotency",
            topology_parameter=f"/{s.app}/{s.stage}/topology",
        )

    def queue(self, priority: Priority | str) -> QueueSpec:
        return next(q for q in self.queues if q.priority == Priority(priority))

    def consumer(self, name: str) -> ConsumerSpec:
        return next(c for c in self.consumers if c.name == name)


__all__ = [
    "ENV_DLQ_URL",
    "ENV_ENDPOINT_URL",
    "ENV_IDEMPOTENCY_TABLE",
    "ENV_JOBS",
    "ENV_QUEUE_URL",
    "ENV_REGION",
    "ENV_STATE_TABLE",
    "ENV_TOPOLOGY_PARAMETER",
    "ConsumerSpec",
    "JobSpec",
    "QueueEndpoints",
    "QueueSpec",
    "RuntimeConfig",
    "ScheduleSpec",
    "Topology",
    "TopologySettings",
]
