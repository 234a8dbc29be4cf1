"""The bottom layer: priorities, worker profiles, lanes, AWS limits, durations and the base errors.

Every other module may import this one; it imports nothing of the package (tests/unit/test_layering.py
holds it to that), so the names here can be shared without import cycles. The public homes of these
names stay where users know them (``jobframework.jobs.Priority``, ``jobframework.errors
.ConfigurationError``, ...), which re-export them.
"""

from __future__ import annotations

import math
from datetime import timedelta
from enum import StrEnum

# --- errors ----------------------------------------------------------------------------------------


class JobFrameworkError(Exception):
    """Base class of the errors that jobframework raises itself."""


class ConfigurationError(JobFrameworkError, ValueError):
    """A job, policy or client was configured wrongly; the message says how to fix it."""


class TopologyWarning(UserWarning):
    """A topology that works but may not be what was meant (retries that could outlast the queue's
    retention, one job sizing a shared consumer); ``jf dev`` and ``cdk synth`` print it. Once decided,
    a test suite silences it by name: ``filterwarnings = ["ignore::jobframework.TopologyWarning"]``."""


JobFrameworkError.__module__ = ConfigurationError.__module__ = "jobframework.errors"  # their public home
TopologyWarning.__module__ = "jobframework.errors"

# --- AWS limits --------------------------------------------------------------------------------------

SQS_MAX_MESSAGE_BYTES = 1_048_576
"""SQS's limit on a message: body plus attributes (1 MiB)."""
SQS_MAX_DELAY_SECONDS = 900
"""SQS ``DelaySeconds`` limit (15 minutes)."""
SQS_MAX_VISIBILITY_SECONDS = 43_200
"""SQS can hide a message for 12 hours at most."""
SQS_BATCH_ENTRIES = 10
"""Entries per SQS batch request (SendMessageBatch, DeleteMessageBatch, ...) and per ReceiveMessage."""
LAMBDA_MAX_TIMEOUT = 900.0
"""Lambda's limit: jobs with a longer ``timeout`` run only on ``jf worker`` (container lanes)."""
MAX_JOB_TIMEOUT = float(SQS_MAX_VISIBILITY_SECONDS)
"""No attempt may take longer than SQS can hide its message."""
FIFO_MAX_BATCH = SQS_BATCH_ENTRIES
"""The most records a FIFO queue's event source mapping hands over at once (and no batching window)."""

# --- priorities, profiles, lanes ---------------------------------------------------------------------


class Priority(StrEnum):
    """The four queues, from most to least urgent (DESIGN.md's table)."""

    CRITICAL = "critical"
    HIGH = "high"
    DEFAULT = "default"
    LOW = "low"


class Profile(StrEnum):
    """What a job mostly waits for: I/O (many concurrent, modest memory) or CPU (more memory each)."""

    IO = "io"
    CPU = "cpu"


FIFO_SUFFIX = "-fifo"
"""The end of an ordered job's lane name (``default-fifo``): its queue is a FIFO queue."""


METRICS_NAMESPACE = "JobFramework"
"""The consumer's EMF namespace where no deployment names its own (``jf dev``, a bare consumer)."""


def metrics_namespace(app: str, stage: str) -> str:
    """A deployment's EMF namespace, ``JobFramework/<app>-<stage>``: its consumers write there and its
    alarms and dashboard read there, so that two stages or apps in one account never watch each
    other's metrics (the dimensions name job types and priorities, which they share)."""
    return f"{METRICS_NAMESPACE}/{app}-{stage}"


def parse_priority(value: Priority | str) -> Priority:
    """``Priority`` from its name; a clear ``ConfigurationError`` otherwise.

    Example:
        >>> parse_priority("high")
        <Priority.HIGH: 'high'>
    """
    try:
        return Priority(value)
    except ValueError:
        names = ", ".join(p.value for p in Priority)
        raise ConfigurationError(f"unknown priority {value!r}; use one of {names}") from None


def lane_name(priority: Priority, profile: Profile | None, fifo: bool = False) -> str:
    """The queue a job goes to: its priority, ``<priority>-<profile>`` for a worker profile, and
    ``-fifo`` after either for an ordered job (``@job(ordered_by=...)``).

    Example:
        >>> lane_name(Priority.HIGH, None), lane_name(Priority.LOW, Profile.CPU, fifo=True)
        ('high', 'low-cpu-fifo')
    """
    base = priority.value if profile is None else f"{priority.value}-{profile.value}"
    return base + FIFO_SUFFIX if fifo else base


def all_lanes() -> list[str]:
    """Every lane a job can have: each priority alone, with a profile, and ``-fifo`` after either.

    Example:
        >>> all_lanes()[:4]
        ['critical', 'critical-fifo', 'critical-io', 'critical-io-fifo']
    """
    return [lane_name(p, f, o) for p in Priority for f in (None, *Profile) for o in (False, True)]


def is_fifo_lane(lane: str) -> bool:
    """Whether a lane's queue is a FIFO queue (its name ends ``-fifo``)."""
    return str(getattr(lane, "value", lane)).endswith(FIFO_SUFFIX)


def lane_profile(lane: str) -> Profile | None:
    """The worker profile of a lane (``high-cpu-fifo`` -> ``cpu``), ``None`` for a plain one."""
    rest = str(getattr(lane, "value", lane)).removesuffix(FIFO_SUFFIX).partition("-")[2]
    return Profile(rest) if rest else None


def lane_priority(lane: str) -> Priority:
    """The priority of a lane (``high-cpu`` -> ``high``)."""
    return parse_priority(str(getattr(lane, "value", lane)).split("-", 1)[0])


def lane_sort_key(lane: str) -> tuple[int, str]:
    """Lanes from most to least urgent, plain before profiled."""
    return (list(Priority).index(lane_priority(lane)), str(lane))


# --- durations ---------------------------------------------------------------------------------------


def duration_seconds(value: float | timedelta, name: str) -> float:
    """A duration option (seconds or a ``timedelta``) as float seconds.

    Raises:
        ConfigurationError: not a number (a bool or NaN included) nor a timedelta; ``name`` says which.

    Example:
        >>> duration_seconds(timedelta(minutes=2), "timeout")
        120.0
    """
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if not isinstance(seconds, int | float) or isinstance(seconds, bool) or math.isnan(seconds):
        raise ConfigurationError(f"{name} must be seconds (a number) or a timedelta, got {value!r}")
    return float(seconds)
