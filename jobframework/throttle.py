"""A job that raised :class:`~jobframework.errors.Throttled`: handed back, not failed.

The downstream said to slow down (a 429 and its ``Retry-After``), which no attempt of the job can
mend: the record goes back as a fresh copy (as every hand-back, :mod:`jobframework.attempts`) to come
again after the delay, with its attempts as they were and no retry budget spent. Its status reads
``retrying`` with the throttle's message, as a retry's would. A job with ``rate=`` also holds its rate
bucket until then (:meth:`~jobframework.flow.rate_bucket.RateLimit.hold`): its other runs are handed
back by the rate gate, one interval apart from the end of the hold, instead of each being throttled.

The copy carries ``jf-throttled`` (``<count>:<epoch seconds of the first throttle>:<not before>``).
Throttles are handed back for :data:`THROTTLE_WINDOW_SECONDS` after the first; past that a throttle
is a failure like a :class:`~jobframework.errors.RetryableError` (an attempt, within the budget), so
a downstream that never recovers still ends in the DLQ, with the throttle's message. A delay over
SQS's 15 minutes is waited out by :func:`throttle_gate`, which hands the copy back again until then.
On a FIFO lane, whose hand-backs stay in place and carry nothing, a throttle is a retry (an attempt,
its group held behind it).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from jobframework.delivery import Outcome
from jobframework.envelope import ATTR_RATE_SLOT, record_attribute
from jobframework.handback import MAX_DELAY_SECONDS
from jobframework.retry import visibility_delay
from jobframework.state import JobState
from jobframework.status import now_iso

if TYPE_CHECKING:
    from jobframework.consumer import Consumer
    from jobframework.delivery import Delivery
    from jobframework.errors import Throttled
    from jobframework.gates import Admitted
    from jobframework.jobs import Job
    from jobframework.verdict import Verdict

log = logging.getLogger("jobframework.consumer")

ATTR_THROTTLED = "jf-throttled"
THROTTLE_WINDOW_SECONDS = 3600.0
"""How long after its first throttle a job is still handed back for one (then it is a failure)."""
THROTTLED = "throttled"
"""The hand-back's reason, as listeners and ``jf dev`` see it."""


def throttled_so_far(record: dict[str, Any]) -> tuple[int, float | None, float]:
    """The throttles before this delivery, the time of the first (``None``: none, or unreadable) and
    the time before which it must not run (its last ``Retry-After``'s end; 0 when none).

    Example:
        >>> attribute = {"jf-throttled": {"stringValue": "3:1765000000.5:1765003600"}}
        >>> throttled_so_far({"messageAttributes": attribute})
        (3, 1765000000.5, 1765003600.0)
        >>> unreadable = {"messageAttributes": {"jf-throttled": {"stringValue": "x"}}}
        >>> throttled_so_far({}), throttled_so_far(unreadable)
        ((0, None, 0.0), (0, None, 0.0))
    """
    value = record_attribute(record, ATTR_THROTTLED)
    if not value:
        return 0, None, 0.0
    count, _, rest = value.partition(":")
    first, _, until = rest.partition(":")
    try:
        n, since, after = int(count), float(first), float(until or 0)
    except ValueError:
        return 0, None, 0.0
    return (n, since, after) if 0 < n <= 1_000_000 and since > 0 else (0, None, 0.0)


def throttle_gate(admitted: Admitted, consumer: Consumer) -> Verdict | None:
    """A gate: a throttled record back before its ``Retry-After`` ended (one over SQS's 15 minutes of
    delay) is handed back again, unrun, until then."""
    record = admitted.delivery.record
    attributes = record.get("messageAttributes")
    if not attributes or ATTR_THROTTLED not in attributes:  # (every other record: one look)
        return None
    wait = throttled_so_far(record)[2] - time.time()
    if wait <= 1:
        return None
    from jobframework.gates import release

    d = admitted.delivery
    delay = visibility_delay(wait)
    verdict = release(d, min(delay, MAX_DELAY_SECONDS))
    verdict.outcome = d.outcome(Outcome.RELEASED, reason=THROTTLED, error="its Retry-After", delay=delay)
    return verdict


def throttle_back(
    d: Delivery, job: Job[Any], exc: Throttled, *, payload: Any, consumer: Consumer, error: str
) -> Verdict | None:
    """The hand-back of a throttled run, or ``None`` when its throttles have lasted past the window
    (the caller then classifies it as the failure it now is)."""
    if str(d.record.get("eventSourceARN", "")).endswith(".fifo"):
        return None  # a FIFO lane hands back in place, carrying no count: a retry, its group held
    now = time.time()
    count, since, _ = throttled_so_far(d.record)
    since = since if since is not None and since <= now else now
    if now - since > THROTTLE_WINDOW_SECONDS:
        return None
    delay = visibility_delay(max(1.0, exc.delay or 1.0))
    env = d.require_envelope()
    if env.track and consumer.state is not None:  # (its start claim: it reads retrying, not running)
        from jobframework.flow.cancel import claimant_of, undo_start_claim

        undo_start_claim(consumer.state, env, claimant_of(d.record))
    log.info(
        "job %s (%s) throttled (%d so far), back in %ds, not an attempt: %s",
        env.id,
        env.type,
        count + 1,
        delay,
        error,
    )
    if job.flow.rate is not None:
        _hold_rate(consumer, job, payload, now + delay)
    from jobframework.gates import release

    verdict = release(d, min(delay, MAX_DELAY_SECONDS), why=error)  # (longer: the gate waits it out)
    verdict.status = (
        (
            JobState.RETRYING,
            {"attempts": d.attempt - 1, "error": f"{THROTTLED}: {error}", "next_attempt_at": now_iso(delay)},
        )
        if env.track
        else None
    )
    # Its rate turn was spent on this run: the copy takes a turn anew, after the hold (a turn it kept
    # let it call the downstream again at once, whatever the hold).
    verdict.attributes = {ATTR_THROTTLED: f"{count + 1}:{since:.3f}:{now + delay:.0f}", ATTR_RATE_SLOT: ""}
    verdict.outcome = d.outcome(Outcome.RELEASED, reason=THROTTLED, error=error, delay=delay)
    return verdict


def _hold_rate(consumer: Consumer, job: Job[Any], payload: Any, until: float) -> None:
    """Hold the job's rate bucket until ``until`` (a failure is logged: its other runs then call the
    downstream and are throttled each)."""
    from jobframework.flow.gates import flow_gates
    from jobframework.flow.limits import limit_key

    rate = job.flow.rate
    limits = flow_gates(consumer).limits if consumer.state is not None else None
    if rate is None or limits is None or (payload is None and job.flow.rate_key is not None):
        return  # (a batch job's item: no one payload names its rate)
    try:
        limits.rate.hold(limit_key(job, payload, "rate"), until, rate.limit, rate.per)
    except Exception:
        log.warning("holding the rate of %s after a throttle failed", job.name, exc_info=True)
