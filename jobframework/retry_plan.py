"""A retry policy's schedule as SQS applies it: what ``jf retry-plan`` prints and the console shows.

After each failed attempt, the shortest and longest delay its jitter allows, rounded up to whole
seconds as the consumer sets a message's visibility (:func:`jobframework.retry.visibility_delay`),
and the cumulative time since the first attempt. A job that raises ``RetryableError(delay=N)`` sets
that retry's delay itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobframework.retry import RetryPolicy, visibility_delay
from jobframework.topology_settings import MAX_RETENTION

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


def retries_span(policy: RetryPolicy, timeout: float) -> float:
    """The longest a job's attempts and backoffs can take, in seconds: each attempt's ``timeout`` and
    the longest backoff before each retry.

    Example:
        >>> retries_span(RetryPolicy(max_attempts=3, base_delay=10, jitter="none"), 60)
        210.0
    """
    rows = retry_plan(policy)
    return float((rows[-1].cumulative_max if rows else 0) + policy.max_attempts * timeout)


def outlasting_retention(name: str, policy: RetryPolicy, timeout: float, retention: int) -> str | None:
    """Why ``policy``'s retries may outlast a queue that keeps a message ``retention`` seconds, or
    ``None``. SQS deletes a message that old whatever its visibility, unseen: a job still retrying
    then is lost with no dead letter (a retry changes the message's visibility; it is never sent anew).
    Each attempt counts its ``timeout``, with the longest backoff before each retry.

    Example:
        >>> outlasting_retention("t.x", RetryPolicy(max_attempts=3), 60, 345600) is None
        True
        >>> print(outlasting_retention("t.x", RetryPolicy(max_attempts=200, max_delay=43200), 10, 345600))
        job t.x: its retries may take 90.6 days (200 attempts, backoff up to 43200 s), longer than its \
queue keeps a message (4.0 days): SQS would delete it unseen, with no dead letter; lower max_attempts or \
max_delay, or keep messages longer (TopologySettings(retention=...), up to 1209599 s: 14 days less the \
second by which the DLQ keeps its letters longer)
    """
    span = retries_span(policy, timeout)
    if span < retention:
        return None
    return (
        f"job {name}: its retries may take {span / 86400:.1f} days ({policy.max_attempts} attempts, backoff "
        f"up to {policy.max_delay:g} s), longer than its queue keeps a message ({retention / 86400:.1f} "
        "days): SQS would delete it unseen, with no dead letter; lower max_attempts or max_delay"
        + (
            ", or keep messages longer (TopologySettings(retention=...), up to 1209599 s: 14 days less the "
            "second by which the DLQ keeps its letters longer)"
            if retention < MAX_RETENTION
            else ""
        )
    )
