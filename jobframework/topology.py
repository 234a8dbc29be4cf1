"""The single source of truth about queues, consumers, tables and schedules.

:class:`Topology` is derived from the job registry plus :class:`TopologySettings`.
The CDK stacks build AWS resources from it, the local runtime provisions the
embedded AWS from it, and its runtime part, :class:`RuntimeConfig` (queue URLs,
table names), reaches the client and the consumer through ``JF_*`` environment
variables or an SSM parameter. Durations are seconds.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Collection
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from jobframework.attempts import fifo_receive_limit, receive_limit
from jobframework.catalog_schema import route_of
from jobframework.config import (
    ENV_DLQ_URL,
    ENV_ENDPOINT_URL,
    ENV_IDEMPOTENCY_TABLE,
    ENV_JOBS,
    ENV_QUEUE_URL,
    ENV_REGION,
    ENV_STATE_TABLE,
    ENV_TOPOLOGY_PARAMETER,
    JobRoute,
    QueueEndpoints,
    RuntimeConfig,
)
from jobframework.errors import ConfigurationError, TopologyWarning
from jobframework.jobs import (
    FIFO_MAX_BATCH,
    FIFO_SUFFIX,
    Job,
    JobRegistry,
    Priority,
    Profile,
    is_fifo_lane,
    lane_priority,
    lane_sort_key,
)
from jobframework.jobs import registry as default_registry
from jobframework.retry_plan import outlasting_retention, retries_span
from jobframework.schedule_names import refuse_shared_schedule_names, schedule_name
from jobframework.sizing import consumer_timeout, overlong_batches, stretched_lanes
from jobframework.topology_settings import (
    CONCURRENCY_WEIGHT,
    DEFAULT_RETENTION,
    MAX_RETENTION,
    MAX_VISIBILITY,
    POLL_WEIGHT,
    TARGET_LATENCY,
    TopologySettings,
)

CRITICAL_CONSUMER = "critical"
SHARED_CONSUMER = "shared"


class QueueSpec(BaseModel):
    """One priority's queue and its dead-letter queue."""

    model_config = ConfigDict(frozen=True)

    priority: Priority
    lane: str
    """The routing name: the priority, or ``<priority>-<profile>``; ``-fifo`` after either for ordered
    jobs."""
    profile: Profile | None = None
    fifo: bool = False
    """A FIFO queue and DLQ (names ending ``.fifo``, content-based deduplication off): the lane of ordered
    jobs. Its event source takes at most 10 records a batch and no batching window."""
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
    pollers: tuple[int, int] | None = None
    """Provisioned pollers (min, max) of the lane's event source mapping; then ``max_concurrency``
    bounds only the local emulator, the mapping gets none."""
    longest_job_timeout: int = 0
    """Seconds of the lane's longest job: over 900 (Lambda's limit) the lane needs ``jf worker``."""
    record_concurrency: int | None = None
    """How many of a batch's records its consumer runs at once (``JF_CONCURRENCY_<LANE>``), when the
    settings bound it; ``None``: the lane's default (the batch; one at a time on a ``cpu`` lane)."""


class ConsumerSpec(BaseModel):
    """One Lambda consumer function and the queues it reads."""

    model_config = ConfigDict(frozen=True)

    name: str
    function_name: str
    priorities: tuple[Priority, ...]
    lanes: tuple[str, ...] = ()
    timeout: int
    memory_mb: int
    reserved_concurrency: int | None
    profile: Profile | None = None


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
    lane: str = ""
    track: bool = False
    """The job is tracked: every firing carries ``track`` and its status is kept."""


def _lane_concurrency(lane: str, consumer: ConsumerSpec, s: TopologySettings) -> int:
    """The event source mapping's maximum concurrency of a lane (at least 2, AWS's minimum)."""
    priority = lane_priority(lane)
    if consumer.name == CRITICAL_CONSUMER:
        return s.critical_reserved_concurrency
    total = {SHARED_CONSUMER: s.shared_max_concurrency, Profile.IO.value: s.io_max_concurrency}.get(
        consumer.name, s.cpu_max_concurrency
    )
    weights = {**CONCURRENCY_WEIGHT, Priority.CRITICAL: 4}
    share = weights[priority] / sum(weights[lane_priority(other)] for other in consumer.lanes)
    return max(2, int(total * share))


def _saga_names(registry: JobRegistry, jobs: set[str]) -> tuple[str, ...]:
    """The sagas declared on the registry whose step and compensation jobs are all among ``jobs``."""
    from jobframework.saga import sagas_of  # sagas are declared on top of the registry's jobs
    from jobframework.saga.steps import Step

    return tuple(
        s.name
        for s in sagas_of(registry)
        if all(
            step.job.name in jobs and (step.compensate is None or step.compensate.name in jobs)
            for step in s.steps
            if isinstance(step, Step)
        )
    )


class Topology(BaseModel):
    """Queues, consumers, tables and schedules of one app and stage."""

    model_config = ConfigDict(frozen=True)

    app: str
    stage: str
    queues: tuple[QueueSpec, ...]
    consumers: tuple[ConsumerSpec, ...]
    jobs: tuple[JobSpec, ...]
    schedules: tuple[ScheduleSpec, ...]
    sagas: tuple[str, ...] = ()
    """Names of the sagas declared on the registry's jobs (each alarmed when one ends ``failed``)."""
    state_table: str
    idempotency_table: str
    topology_parameter: str
    catalog: dict[str, JobRoute] = Field(default_factory=dict)
    """Each job's route and payload schema by name: what a producer that does not import the job
    needs (:mod:`jobframework.catalog`). It goes into the topology parameter with the queues."""

    @classmethod
    def from_registry(
        cls,
        registry: JobRegistry | None = None,
        settings: TopologySettings | None = None,
        *,
        only: Callable[[Job[Any]], bool] | None = None,
        container_lanes: Collection[str] = (),
    ) -> Topology:
        """Derive the topology of the registered jobs (those ``only`` takes, when given: a saga whose
        step jobs it leaves out is left out too); ``container_lanes`` run on container workers, not
        Lambda (their batches are not warned of as too long for a function).

        Every priority has a queue (a lane); a priority whose jobs declare a worker profile gets a
        lane per profile too (``high-cpu``), only where such jobs exist.

        Raises:
            ConfigurationError: a ``max_receive_count`` override is not above the max attempts of a
                job on that queue (the message names the job).
        """
        reg = registry if registry is not None else default_registry
        s = settings or TopologySettings()
        prefix = f"{s.app}-{s.stage}"
        jobs = [j for j in reg if only is None or only(j)]
        lanes: dict[str, list[Job[Any]]] = {p.value: [] for p in Priority}
        for j in jobs:
            lanes.setdefault(j.lane, []).append(j)

        def consumer_of(lane: str) -> str:
            lane = lane.removesuffix(FIFO_SUFFIX)  # a FIFO lane runs on its plain lane's function
            if "-" in lane:
                return lane.split("-", 1)[1]  # the profile's function
            return CRITICAL_CONSUMER if lane == Priority.CRITICAL.value else SHARED_CONSUMER

        on_consumer: dict[str, dict[str, list[Job[Any]]]] = {}
        for lane, routed in lanes.items():
            on_consumer.setdefault(consumer_of(lane), {})[lane] = routed
        shapes = {
            CRITICAL_CONSUMER: (s.memory_mb, s.critical_reserved_concurrency),
            SHARED_CONSUMER: (s.memory_mb, None),
            Profile.IO.value: (s.io_memory_mb, None),
            Profile.CPU.value: (s.cpu_memory_mb, None),
        }
        consumers = tuple(
            ConsumerSpec(
                name=name,
                function_name=f"{prefix}-consumer-{name}",
                priorities=tuple(
                    dict.fromkeys(lane_priority(lane) for lane in lanes if consumer_of(lane) == name)
                ),
                lanes=tuple(lane for lane in lanes if consumer_of(lane) == name),
                timeout=consumer_timeout(on_consumer[name], s.batch_size, s.record_concurrency),
                memory_mb=shapes[name][0],
                reserved_concurrency=shapes[name][1],
                profile=Profile(name) if name in (Profile.IO.value, Profile.CPU.value) else None,
            )
            for name in shapes
            if name in on_consumer
        )
        by_name = {c.name: c for c in consumers}
        for name, its_lanes in on_consumer.items():  # (a warning: the lanes' jobs may be right as they are)
            stretched = stretched_lanes(name, its_lanes, s.batch_size, s.record_concurrency)
            if stretched is not None:
                warnings.warn(stretched, TopologyWarning, stacklevel=2)
            on_lambda = {lane: jobs for lane, jobs in its_lanes.items() if lane not in container_lanes}
            for overlong in overlong_batches(on_lambda, s.batch_size, s.record_concurrency):
                warnings.warn(overlong, TopologyWarning, stacklevel=2)
        queues = []
        for lane, routed in sorted(lanes.items(), key=lambda kv: lane_sort_key(kv[0])):
            priority = lane_priority(lane)
            consumer = by_name[consumer_of(lane)]
            largest = max((j.retry.max_attempts for j in routed), default=1)
            override = s.max_receive_count.get(priority) if "-" not in lane else None
            receive_count = override or receive_limit(largest, s.max_receive_count_margin)
            fifo = is_fifo_lane(lane)
            if fifo:  # hand-backs behind a failing job of the group are receives too
                receive_count = max(receive_count, fifo_receive_limit(largest, s.max_receive_count_margin))
            for j in routed:
                outlasting = outlasting_retention(j.name, j.retry, j.timeout, s.retention)
                if outlasting is not None and retries_span(j.retry, j.timeout) >= MAX_RETENTION:
                    # no queue keeps a message that long
                    raise ConfigurationError(outlasting_retention(j.name, j.retry, j.timeout, MAX_RETENTION))
                if outlasting is not None:  # (jf dev's default settings are not the deployment's)
                    warnings.warn(outlasting, TopologyWarning, stacklevel=2)
                if j.retry.max_attempts >= receive_count:
                    raise ConfigurationError(
                        f"job {j.name} has max_attempts={j.retry.max_attempts} but the {lane} queue's "
                        f"maxReceiveCount is {receive_count}: SQS would dead-letter it before its retries "
                        f"run out; raise max_receive_count[{priority.value!r}] above {j.retry.max_attempts} "
                        "or lower the job's max_attempts"
                    )
            longest = int(-(-max((j.timeout for j in routed), default=0) // 1))
            batch_size, window = s.batch_size, s.batching_window
            batched = [j.batch for j in routed if j.batch is not None]
            if batched:
                batch_size = max(b.max_size for b in batched)
                window = int(-(-max(b.max_wait for b in batched) // 1))
            if fifo:  # a FIFO event source takes at most 10 records and no batching window
                batch_size, window = min(batch_size, FIFO_MAX_BATCH), 0
            if batch_size > 10:
                window = max(window, 1)  # SQS event source mappings need a window above 10 records
            base = f"{prefix}-{lane.removesuffix(FIFO_SUFFIX)}"
            queues.append(
                QueueSpec(
                    priority=priority,
                    lane=lane,
                    profile=consumer.profile,
                    fifo=fifo,
                    name=f"{base}.fifo" if fifo else base,
                    dlq_name=f"{base}-dlq.fifo" if fifo else f"{base}-dlq",
                    # AWS: at least 6x the function timeout plus the batching window (a record waits
                    # in the window while already invisible).
                    visibility_timeout=min(MAX_VISIBILITY, max(6 * consumer.timeout + window, longest + 60)),
                    longest_job_timeout=longest,
                    max_receive_count=receive_count,
                    retention=s.retention,
                    dlq_retention=MAX_RETENTION,
                    target_latency=TARGET_LATENCY[priority],
                    consumer=consumer.name,
                    batch_size=batch_size,
                    batching_window=window,
                    max_concurrency=s.max_concurrency.get(lane) or _lane_concurrency(lane, consumer, s),
                    pollers=s.pollers.get(lane),
                    record_concurrency=s.record_concurrency.get(lane),
                    jobs=tuple(j.name for j in routed),
                )
            )
        lane_names = [q.lane for q in queues]
        for option, named in (
            ("pollers", s.pollers),
            ("max_concurrency", s.max_concurrency),
            ("record_concurrency", s.record_concurrency),
        ):
            unknown = sorted(set(named) - set(lane_names))
            if unknown:
                raise ConfigurationError(
                    f"{option} names lane(s) {', '.join(unknown)} that no job uses; "
                    f"the lanes are: {', '.join(lane_names)}"
                )
        schedules = tuple(
            ScheduleSpec(
                job=j.name,
                name=schedule_name(prefix, j.name),
                expression=j.schedule.expression,
                timezone=j.schedule.timezone,
                payload=j.schedule.payload,
                priority=j.priority,
                lane=j.lane,
                track=j.track,
            )
            for j in jobs
            if j.schedule is not None
        )
        refuse_shared_schedule_names((spec.name, spec.job) for spec in schedules)
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
            sagas=_saga_names(reg, {j.name for j in jobs}),
            state_table=f"{prefix}-state",
            idempotency_table=f"{prefix}-idempotency",
            topology_parameter=f"/{s.app}/{s.stage}/topology",
            catalog={
                j.name: route_of(j, fifo=next(q.fifo for q in queues if q.lane == j.lane)) for j in jobs
            },
        )

    def queue(self, lane: Priority | str) -> QueueSpec:
        """The queue of a lane: a priority (``high``) or ``<priority>-<profile>``."""
        name = str(getattr(lane, "value", lane))
        return next(q for q in self.queues if q.lane == name)

    def consumer(self, name: str) -> ConsumerSpec:
        return next(c for c in self.consumers if c.name == name)


__all__ = [  # the settings and their constants live in jobframework.topology_settings
    "CONCURRENCY_WEIGHT",
    "DEFAULT_RETENTION",
    "ENV_DLQ_URL",
    "ENV_ENDPOINT_URL",
    "ENV_IDEMPOTENCY_TABLE",
    "ENV_JOBS",
    "ENV_QUEUE_URL",
    "ENV_REGION",
    "ENV_STATE_TABLE",
    "ENV_TOPOLOGY_PARAMETER",
    "MAX_RETENTION",
    "MAX_VISIBILITY",
    "POLL_WEIGHT",
    "TARGET_LATENCY",
    "ConsumerSpec",
    "JobRoute",
    "JobSpec",
    "QueueEndpoints",
    "QueueSpec",
    "RuntimeConfig",
    "ScheduleSpec",
    "Topology",
    "TopologySettings",
]
