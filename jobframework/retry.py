"""Retry policies and the pure backoff function (what a failure becomes: :mod:`jobframework.classification`).

The backoff is exponential (``base_delay * multiplier ** (attempt - 1)``), capped at
``max_delay``, with jitter so that jobs that failed together do not come back
together:

* ``proportional`` (default): +/- ``jitter_ratio`` (30 %) around the exponential value;
* ``full``: uniformly between 0 and the exponential value (AWS's "full jitter");
* ``none``: the exponential value itself.

All durations are seconds.
"""

from __future__ import annotations

import math
import random as _random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import timedelta
from enum import StrEnum
from typing import TYPE_CHECKING

from jobframework.core import SQS_MAX_VISIBILITY_SECONDS
from jobframework.errors import ConfigurationError
from jobframework.job_unknown import refusing_unknown_fields

if TYPE_CHECKING:
    from jobframework.jobs import Priority

MAX_VISIBILITY_SECONDS = SQS_MAX_VISIBILITY_SECONDS
"""SQS's limit on a message's visibility timeout (12 hours): no retry delay can exceed it."""
MAX_RETRY_DELAY_SECONDS = MAX_VISIBILITY_SECONDS - 900
"""The longest delay the consumer can set: SQS counts the 12 hours from the receive, and a record may
have waited up to the batching window (5 minutes) and its batch's run (up to 15 minutes) before."""


def visibility_delay(seconds: float) -> int:
    """A retry delay as the consumer sets it: whole seconds (SQS's visibility), rounded up, at most
    :data:`MAX_RETRY_DELAY_SECONDS`.

    Example:
        >>> visibility_delay(0.5), visibility_delay(2.0), visibility_delay(10**9)
        (1, 2, 42300)
    """
    return min(MAX_RETRY_DELAY_SECONDS, math.ceil(seconds))


RandomSource = Callable[[], float]
"""A source of floats uniform in [0, 1), e.g. ``random.Random(7).random``."""


class Jitter(StrEnum):
    PROPORTIONAL = "proportional"
    FULL = "full"
    NONE = "none"


def compute_backoff(
    attempt: int,
    *,
    base_delay: float,
    max_delay: float,
    multiplier: float = 2.0,
    jitter: Jitter = Jitter.PROPORTIONAL,
    jitter_ratio: float = 0.3,
    rand: RandomSource = _random.random,
) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (1-based).

    Pure: the same inputs and random source give the same delay. Never negative,
    never above ``max_delay`` nor the 12-hour visibility limit.

    Example:
        >>> compute_backoff(3, base_delay=1, max_delay=300, jitter=Jitter.NONE)
        4.0
    """
    if attempt < 1:
        raise ValueError(f"attempt is 1-based, got {attempt}")
    cap = min(max_delay, MAX_VISIBILITY_SECONDS)
    # Exponent clamped so that a large attempt number cannot overflow.
    exponential = min(cap, base_delay * multiplier ** min(attempt - 1, 64))
    if jitter is Jitter.NONE:
        delay = exponential
    elif jitter is Jitter.FULL:
        delay = exponential * rand()
    else:
        delay = exponential * (1.0 + jitter_ratio * (2.0 * rand() - 1.0))
    return max(0.0, min(cap, delay))


def _seconds(value: float | timedelta, name: str) -> float:
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if not math.isfinite(seconds) or seconds < 0:
        raise ConfigurationError(f"RetryPolicy {name} must be a finite number of seconds >= 0, got {value!r}")
    return seconds


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently a job is retried.

    Args:
        max_attempts: total attempts including the first (1 means never retry).
        base_delay: seconds before the first retry (before jitter).
        max_delay: cap on any single delay, in seconds (at most 12 hours).
        multiplier: growth factor between attempts.
        jitter: ``proportional`` (+/- ``jitter_ratio``), ``full`` or ``none``.
        jitter_ratio: the width of proportional jitter, 0..1.
        random: the random source (uniform [0, 1)); inject one for reproducible delays.

    Example:
        >>> policy = RetryPolicy(max_attempts=4, base_delay=2, jitter="none")
        >>> [policy.delay(n) for n in (1, 2, 3)]
        [2.0, 4.0, 8.0]
    """

    max_attempts: int = 3
    base_delay: float = 1.0
    max_delay: float = 300.0
    multiplier: float = 2.0
    jitter: Jitter | str = Jitter.PROPORTIONAL
    jitter_ratio: float = 0.3
    random: RandomSource = field(default=_random.random, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.max_attempts, int) or isinstance(self.max_attempts, bool):
            raise ConfigurationError(f"RetryPolicy max_attempts must be an int, got {self.max_attempts!r}")
        if not 1 <= self.max_attempts <= 1000:
            raise ConfigurationError(
                f"RetryPolicy max_attempts must be between 1 and 1000, got {self.max_attempts}"
            )
        object.__setattr__(self, "base_delay", _seconds(self.base_delay, "base_delay"))
        object.__setattr__(self, "max_delay", _seconds(self.max_delay, "max_delay"))
        if self.max_delay > MAX_VISIBILITY_SECONDS:
            raise ConfigurationError(
                f"RetryPolicy max_delay is {self.max_delay:g}s but SQS cannot hide a message for more than "
                f"{MAX_VISIBILITY_SECONDS}s (12 hours); lower max_delay"
            )
        if self.base_delay > self.max_delay:
            raise ConfigurationError(
                f"RetryPolicy base_delay ({self.base_delay:g}s) is above max_delay ({self.max_delay:g}s)"
            )
        if self.multiplier < 1:
            raise ConfigurationError(f"RetryPolicy multiplier must be >= 1, got {self.multiplier}")
        try:
            object.__setattr__(self, "jitter", Jitter(self.jitter))
        except ValueError:
            choices = ", ".join(j.value for j in Jitter)
            raise ConfigurationError(
                f"RetryPolicy jitter must be one of {choices}, got {self.jitter!r}"
            ) from None
        if not 0 <= self.jitter_ratio <= 1:
            raise ConfigurationError(f"RetryPolicy jitter_ratio must be within 0..1, got {self.jitter_ratio}")

    def delay(self, attempt: int, rand: RandomSource | None = None) -> float:
        """Seconds to wait after failed attempt ``attempt`` (1-based), jitter applied."""
        return compute_backoff(
            attempt,
            base_delay=self.base_delay,
            max_delay=self.max_delay,
            multiplier=self.multiplier,
            jitter=Jitter(self.jitter),
            jitter_ratio=self.jitter_ratio,
            rand=rand or self.random,
        )

    def delay_range(self, attempt: int) -> tuple[float, float]:
        """The smallest and largest delay that jitter can give after attempt ``attempt``."""
        low = self.delay(attempt, rand=lambda: 0.0)
        high = self.delay(attempt, rand=lambda: 1.0 - 1e-12)
        return (min(low, high), max(low, high))

    def schedule(self) -> list[tuple[int, float, float]]:
        """``(attempt, min delay, max delay)`` for each retry this policy allows."""
        return [(n, *self.delay_range(n)) for n in range(1, self.max_attempts)]

    def _attempts_to_span(self, seconds: float) -> int | None:
        """The fewest attempts whose retries span ``seconds`` even with the shortest jitter (full jitter:
        its expected delay), or ``None`` if more than :data:`MAX_SPANNING_ATTEMPTS` would."""
        covered, attempts = 0.0, 1
        while covered < seconds:
            low, high = self.delay_range(attempts)
            # Full jitter can draw 0 every time: count its expected delay (half the exponential).
            covered += (high / 2 if self.jitter is Jitter.FULL else low) or 1e-3
            attempts += 1
            if attempts > MAX_SPANNING_ATTEMPTS:
                return None
        return attempts

    @classmethod
    def spanning(
        cls,
        window: float | timedelta | None = None,
        *,
        minutes: float | None = None,
        base_delay: float = 1.0,
        max_delay: float = 300.0,
        multiplier: float = 2.0,
        jitter: Jitter | str = Jitter.PROPORTIONAL,
        jitter_ratio: float = 0.3,
    ) -> RetryPolicy:
        """A policy whose retries keep going for at least ``window`` (an outage to ride out).

        The attempts are chosen so that even with the shortest jitter the retries
        span the window (with ``full`` jitter, whose shortest delay is 0, the expected delay).

        Example:
            >>> RetryPolicy.spanning(minutes=15).max_attempts
            13
        """
        if (window is None) == (minutes is None):
            raise ConfigurationError("RetryPolicy.spanning needs exactly one of window= or minutes=")
        seconds = _seconds(window if window is not None else timedelta(minutes=minutes or 0), "window")
        if seconds <= 0:
            raise ConfigurationError(
                "RetryPolicy.spanning needs a window longer than 0 (an outage to ride out), got "
                f"{seconds:g} s; for no retry at all use RetryPolicy(max_attempts=1)"
            )
        probe = cls(
            max_attempts=1,
            base_delay=base_delay,
            max_delay=max_delay,
            multiplier=multiplier,
            jitter=Jitter(jitter),
            jitter_ratio=jitter_ratio,
        )
        attempts = probe._attempts_to_span(seconds)
        if attempts is None:
            wider = next(
                (
                    cap
                    for cap in _WIDER_MAX_DELAYS
                    if cap > max_delay and replace(probe, max_delay=cap)._attempts_to_span(seconds)
                ),
                None,
            )
            hint = (
                f"raise max_delay (max_delay={wider:g} spans it)"
                if wider is not None
                else f"no max_delay up to SQS's {MAX_VISIBILITY_SECONDS:,} s does: shorten the window"
            )
            raise ConfigurationError(
                f"RetryPolicy.spanning: {seconds:g}s needs more than {MAX_SPANNING_ATTEMPTS} attempts with "
                f"max_delay={max_delay:g}s; {hint}"
            )
        return cls(
            max_attempts=attempts,
            base_delay=base_delay,
            max_delay=max_delay,
            multiplier=multiplier,
            jitter=Jitter(jitter),
            jitter_ratio=jitter_ratio,
        )


MAX_SPANNING_ATTEMPTS = 1000
_WIDER_MAX_DELAYS = (600.0, 900.0, 1800.0, 3600.0, 7200.0, 14400.0, 28800.0, float(MAX_VISIBILITY_SECONDS))
"""The ``max_delay`` values :meth:`RetryPolicy.spanning` suggests when its own would need too many."""


def default_policy(priority: Priority) -> RetryPolicy:
    """The retry policy of a priority when the job gives none (DESIGN.md's table)."""
    from jobframework.jobs import Priority

    if priority is Priority.CRITICAL:
        return RetryPolicy(max_attempts=5, base_delay=0.5, max_delay=30.0)
    if priority is Priority.HIGH:
        return RetryPolicy(max_attempts=5)
    return RetryPolicy(max_attempts=3)


# RetryPolicy(max_retries=3) says to write max_attempts=4 (it was a bare TypeError).
setattr(RetryPolicy, "__init__", refusing_unknown_fields(RetryPolicy.__init__, "RetryPolicy"))  # noqa: B010

# What a failure becomes lives in jobframework.classification; its names stay importable from here,
# where they were before (``from jobframework.retry import Reason``).
from jobframework.classification import (  # noqa: E402
    Action,
    Decision,
    Reason,
    classify,
    is_transient,
)

__all__ = [
    "MAX_RETRY_DELAY_SECONDS",
    "MAX_VISIBILITY_SECONDS",
    "Action",
    "Decision",
    "Jitter",
    "Reason",
    "RetryPolicy",
    "classify",
    "compute_backoff",
    "default_policy",
    "is_transient",
    "visibility_delay",
]
