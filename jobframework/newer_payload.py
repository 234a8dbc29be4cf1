"""A payload newer than this consumer's job: handed back for a while, then dead-lettered ``version``.

During a deploy the old consumer and the new one run at once (the construct's canary sends a tenth of
the invocations to the new version for five minutes), and a producer deployed with them (a function
of the same stack, or a by-name producer reading the new catalog) may send the new payload version at
once. An old consumer that meets one cannot read it, and had dead-lettered it at once: during the
canary, nine in ten of them, which the DLQ-inflow alarm counts, and which rolls the canary back.

Now it hands the record back, unrun, as a fresh copy (no attempt) that comes back in
:data:`NEWER_RETRY_SECONDS`, for a consumer that reads it; the copy carries ``jf-newer`` (when it was
first handed back, epoch seconds). Past :data:`NEWER_WINDOW_SECONDS` (an hour) of that, no such consumer came
(a rollback, a producer ahead of every deploy): it is dead-lettered ``version``, saying how long it
waited. On a FIFO lane, whose hand-backs stay in place and carry nothing, it is dead-lettered at once,
as before (its group would wait behind it).

A deadline (``expires_in=``, ``expires_after=``) that passes while it waits drops it ``expired``, and a
``jf cancel`` of a tracked one drops it ``cancelled`` (a read of its cancel marker at each hand-back):
neither needs its payload, and either had been dead-lettered ``version`` at the window's end. Its
dead letter, if it comes to that, counts no attempt: it never ran. While it waits, a tracked job's
status reads ``retrying``, its error saying why (one write a hand-back).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from jobframework.attempts import ATTR_NEWER
from jobframework.delivery import Outcome
from jobframework.envelope import record_attribute

if TYPE_CHECKING:
    from jobframework.delivery import Delivery
    from jobframework.envelope import Envelope
    from jobframework.flow.outcome import Drop
    from jobframework.jobs import Job
    from jobframework.state import StateStore
    from jobframework.verdict import Verdict

log = logging.getLogger("jobframework.consumer")

NEWER_WINDOW_SECONDS = 3600.0
"""How long a newer payload is handed back for a consumer that reads it: the construct's canary (10 %
for five minutes) ends well within it, and so do CodeDeploy's longest canary (10 % for 30 minutes)
and a linear 10 % every three minutes. (Linear 10 % every ten minutes takes 100: past the window a
letter is dead-lettered, for a redrive.)"""
NEWER_RETRY_SECONDS = 60
"""Each hand-back's delay: during a canary, one in ten comes to the new version; after it, all do."""
NEWER = "newer payload"
"""The hand-back's reason, as listeners and ``jf dev`` see it."""


def first_handed_back(record: dict[str, Any]) -> float | None:
    """When a newer payload was first handed back (``jf-newer``), or ``None`` (never, unreadable).

    Example:
        >>> first_handed_back({"messageAttributes": {"jf-newer": {"stringValue": "1765000000"}}})
        1765000000.0
        >>> unreadable = {"messageAttributes": {"jf-newer": {"stringValue": "x"}}}
        >>> first_handed_back({}), first_handed_back(unreadable)
        (None, None)
    """
    value = record_attribute(record, ATTR_NEWER)
    try:
        since = float(value) if value else None
    except ValueError:
        return None
    return since if since is not None and since > 0 else None


def newer_payload_verdict(d: Delivery, job: Job[Any], error: str, state: StateStore | None = None) -> Verdict:
    """The verdict of a record whose payload version is newer than ``job``'s: handed back, or
    dead-lettered ``version`` once it has waited past the window, or at once on a FIFO lane; dropped
    when it expired or was cancelled meanwhile (``state``: the consumer's state table, for the cancel
    marker of a tracked job)."""
    from jobframework.classification import Reason
    from jobframework.gates import dropped, refuse

    now = time.time()
    env = d.require_envelope()
    stop = _stopped_meanwhile(env, job, d.attempt, now, state)
    if stop is not None:
        return dropped(d, stop, attempts=d.attempt - 1)
    first = first_handed_back(d.record)
    since = first if first is not None and first <= now else now
    if not str(d.record.get("eventSourceARN", "")).endswith(".fifo"):
        if now - since <= NEWER_WINDOW_SECONDS:
            return _handed_back(d, job, error, since, first is None)
        error = (
            f"{error} (handed back for {(now - since) / 60:.0f} minutes for a consumer that reads it; none "
            "came: redrive it once one is deployed)"
        )
    verdict = refuse(d, Reason.VERSION, error)
    if verdict.status is not None:  # (it never ran: no attempt to count)
        verdict.status[1]["attempts"] = d.attempt - 1
    return verdict


def _stopped_meanwhile(
    env: Envelope, job: Job[Any], attempt: int, now: float, state: StateStore | None
) -> Drop | None:
    """An expiry or a cancel that came while the record waited for a consumer that reads it (neither
    needs its payload); a failed read of the cancel marker is logged and is no cancel."""
    from jobframework.flow.expiry import expiry_gate

    expired = expiry_gate(env, job, None, attempt, now)
    if expired is not None or state is None or not env.track:
        return expired
    try:
        if state.jobs.cancel_marked(env.id):
            from jobframework.flow.cancel import cancelled_drop

            log.info("job %s (%s) was cancelled; acknowledged unrun", env.id, env.type)
            return cancelled_drop(attempt)
    except Exception:
        log.warning("reading the cancel marker of job %s failed", env.id, exc_info=True)
    return None


def _handed_back(d: Delivery, job: Job[Any], error: str, since: float, first: bool) -> Verdict:
    from jobframework.gates import release

    env = d.require_envelope()
    log.log(
        logging.WARNING if first else logging.INFO,  # (the first of a message's hand-backs)
        "job %s (%s): payload version %d is newer than this consumer's %d; back in %ds for a consumer "
        "that reads it (a deploy under way?), not an attempt",
        env.id,
        env.type,
        env.payload_version,
        job.version,
        NEWER_RETRY_SECONDS,
    )
    verdict = release(d, NEWER_RETRY_SECONDS, why=error)
    verdict.attributes = {ATTR_NEWER: f"{since:.0f}"}
    verdict.outcome = d.outcome(Outcome.RELEASED, reason=NEWER, error=error, delay=NEWER_RETRY_SECONDS)
    if env.track:  # (jf status said queued, attempts 0, with no word of why it does not run)
        from jobframework.state import JobState
        from jobframework.status import now_iso

        verdict.status = (
            JobState.RETRYING,
            {
                "attempts": d.attempt - 1,
                "error": f"{NEWER}: {error} (waiting for a consumer that reads it)",
                "next_attempt_at": now_iso(NEWER_RETRY_SECONDS),
            },
        )
    return verdict
