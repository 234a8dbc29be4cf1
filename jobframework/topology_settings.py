"""What a deployment chooses (:class:`TopologySettings`) and the constants the topology derives with:
retention, target latencies, the shared consumer's concurrency weights, the local poller's weights,
and AWS's ranges for an event source mapping's concurrency and provisioned pollers. Durations are
seconds."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, model_validator

from jobframework.attempts import CRASH_MARGIN
from jobframework.core import SQS_MAX_VISIBILITY_SECONDS, Priority

MAX_VISIBILITY = SQS_MAX_VISIBILITY_SECONDS
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

MIN_MAX_CONCURRENCY, MAX_MAX_CONCURRENCY = 2, 1000
"""An SQS event source mapping's MaximumConcurrency range."""
MAX_MIN_POLLERS, MAX_POLLERS = 200, 2000
"""ProvisionedPollerConfig's ranges: MinimumPollers 1 to 200, MaximumPollers up to 2,000."""


class TopologySettings(BaseModel):
    """What a deployment chooses; everything else is derived from the jobs."""

    model_config = ConfigDict(frozen=True, extra="forbid")  # (a misspelled setting was ignored)

    app: str = Field(default="jf", pattern=r"^[a-z][a-z0-9-]{0,20}$")
    stage: str = Field(default="dev", pattern=r"^[a-z][a-z0-9-]{0,15}$")
    batch_size: int = Field(default=10, ge=1, le=10_000)
    batching_window: int = Field(default=0, ge=0, le=300)
    shared_max_concurrency: int = Field(default=12, ge=6, le=1000)
    """Split 3:2:1 over high, default and low (each event source mapping needs at least 2)."""
    critical_reserved_concurrency: int = Field(default=5, ge=1, le=1000)
    memory_mb: int = Field(default=512, ge=128, le=10_240)
    max_receive_count_margin: int = Field(default=CRASH_MARGIN, ge=1, le=100)
    max_receive_count: dict[Priority, int] = Field(default_factory=dict)
    """Override the derived maxReceiveCount of a queue (must stay above its jobs' max attempts)."""
    retention: int = Field(default=DEFAULT_RETENTION, ge=60, le=MAX_RETENTION - 1)
    io_memory_mb: int = Field(default=256, ge=128, le=10_240)
    """Memory of the ``io`` profile's function: modest, many concurrent executions."""
    io_max_concurrency: int = Field(default=50, ge=2, le=1000)
    cpu_memory_mb: int = Field(default=3538, ge=128, le=10_240)
    """Memory of the ``cpu`` profile's function (3,538 MB buys two full vCPUs)."""
    cpu_max_concurrency: int = Field(default=6, ge=2, le=1000)
    max_concurrency: dict[str, int] = Field(default_factory=dict)
    """Override a lane's derived event source maximum concurrency (``{"high": 8}``; 2 to 1,000)."""
    record_concurrency: dict[str, int] = Field(default_factory=dict)
    """How many of a batch's records a lane's consumer runs at once (``{"high": 4}``, ``{"low-cpu":
    2}``): set as the functions' ``JF_CONCURRENCY_<LANE>``, and the consumer's timeout is sized for it
    (:mod:`jobframework.sizing`). Default: the whole batch, one at a time on a ``cpu`` lane."""
    pollers: dict[str, tuple[int, int]] = Field(default_factory=dict)
    """Provisioned pollers of a lane's event source mapping, ``{"high": (min, max)}``: min 1 to 200,
    max min to 2,000. Such a lane's mapping has no maximum concurrency (AWS refuses both at once)."""

    @model_validator(mode="after")
    def _check_lane_options(self) -> TopologySettings:
        for lane, value in self.max_concurrency.items():
            if not MIN_MAX_CONCURRENCY <= value <= MAX_MAX_CONCURRENCY:
                raise ValueError(
                    f"max_concurrency[{lane!r}]={value}: an SQS event source's maximum concurrency is "
                    f"{MIN_MAX_CONCURRENCY} to {MAX_MAX_CONCURRENCY}"
                )
        for lane, value in self.record_concurrency.items():
            if value < 1:
                raise ValueError(
                    f"record_concurrency[{lane!r}]={value}: give how many of a batch's records run at "
                    "once, 1 or more (1: one at a time)"
                )
        for lane, (low, high) in self.pollers.items():
            if not 1 <= low <= MAX_MIN_POLLERS or not low <= high <= MAX_POLLERS:
                raise ValueError(
                    f"pollers[{lane!r}]=({low}, {high}): give (min, max) with min 1 to {MAX_MIN_POLLERS} "
                    f"and max from min to {MAX_POLLERS}"
                )
            if lane in self.max_concurrency:
                raise ValueError(
                    f"lane {lane!r} has both pollers={self.pollers[lane]} and "
                    f"max_concurrency={self.max_concurrency[lane]}: AWS refuses an SQS event source "
                    "mapping with ProvisionedPollerConfig and MaximumConcurrency together; bound a "
                    "provisioned lane with its maximum pollers (or the function's reserved concurrency) "
                    "and drop its max_concurrency, or drop its pollers"
                )
        return self


_PARAMETER = re.compile(r"^/(?P<app>[a-z][a-z0-9-]{0,20})/(?P<stage>[a-z][a-z0-9-]{0,15})/topology$")


def app_of_parameter(name: str | None) -> str | None:
    """The app whose topology parameter ``name`` is (:attr:`Topology.topology_parameter`,
    ``/<app>/<stage>/topology``); ``None`` for a name of another shape.

    Example:
        >>> app_of_parameter("/billing/prod/topology"), app_of_parameter("/custom/name")
        ('billing', None)
    """
    match = _PARAMETER.match(name or "")
    return match["app"] if match else None


def settings_of_parameter(name: str | None, stage: str) -> TopologySettings:
    """The app and stage a topology parameter names (``stage`` for a name of another shape), as the
    settings that derive the same resource names (schedules: ``<app>-<stage>-<job>``).

    Example:
        >>> s = settings_of_parameter("/payments/dev/topology", "prod"); s.app, s.stage
        ('payments', 'dev')
    """
    match = _PARAMETER.match(name or "")
    if match is None:
        return TopologySettings(stage=stage)
    return TopologySettings(app=match["app"], stage=match["stage"])
