"""A retry policy's schedule as SQS applies it: what ``jf retry-plan`` prints and the console shows.

After each failed attempt, the shortest and longest delay its jitter allows, rounded up to whole
seconds as the consumer sets a message's visibility (:func:`jobframework.retry.visibility_delay`),
and the cumulative time since the first attempt. A job that raises ``RetryableError(delay=N)`` sets
that retry's delay itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobframework.retry import RetryPolicy, visibility_delay

OWN_DELAY_NOTE = "a RetryableError(delay=N) the job raises sets that retry's delay instead"


@dataclass(frozen=True, slots=True)
class PlanRow:
    attempt: int
    """The attempt that failed; the next one is ``attempt + 1``."""
    delay_min: int
    delay_max: int
    cumulative_min: int
    cumulative_max: int


def retry_plan(policy: RetryPolicy) -> list[PlanRow]:
    """The schedule of ``policy`` in whole seconds (empty: one attempt, no retry).

    Example:
        >>> [(r.attempt, r.delay_min, r.delay_max) for r in retry_plan(RetryPolicy(max_attempts=3))][:1]
        [(1, 1, 2)]
    """
    rows = []
    low_total = high_total = 0
    for attempt, exact_low, exact_high in policy.schedule():
        low, high = visibility_delay(exact_low), visibility_delay(exact_high)
        low_total += low
        high_total += high
        rows.append(PlanRow(attempt, low, high, low_total, high_total))
    return rows
