"""The envelope a schedule sends: one definition for EventBridge Scheduler and the local scheduler.

Each firing is a fresh job whose key includes the scheduled time, so a duplicate
firing of the same slot is a duplicate key, not a second run.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from jobframework.envelope import ENVELOPE_VERSION, Envelope

if TYPE_CHECKING:
    from jobframework.topology import ScheduleSpec

SCHEDULE_KEY_PREFIX = "schedule:"
"""Keys of scheduled runs start with this (``schedule:<job>:<time>``)."""
SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"
"""EventBridge Scheduler's context attribute: the slot's time, ISO 8601 UTC (e.g. 2026-12-02T13:00:00Z)."""
EXECUTION_ID = "<aws.scheduler.execution-id>"
"""EventBridge Scheduler's context attribute: a unique id of one firing."""


def schedule_key(job_name: str, scheduled_time: str) -> str:
    """The idempotency/dedup key of one scheduled slot.

    Example:
        >>> schedule_key("maintenance.cleanup", "2026-12-02T13:00:00Z")
        'schedule:maintenance.cleanup:2026-12-02T13:00:00Z'
    """
    return f"{SCHEDULE_KEY_PREFIX}{job_name}:{scheduled_time}"


def schedule_input(spec: ScheduleSpec) -> str:
    """The SQS message body template EventBridge Scheduler sends for ``spec``.

    The placeholders are filled by Scheduler at each firing; the result is a valid envelope.
    """
    body: dict[str, Any] = {
        "v": ENVELOPE_VERSION,
        "id": EXECUTION_ID,
        "type": spec.job,
        "payload": spec.payload,
        "payload_version": 1,
        "key": schedule_key(spec.job, SCHEDULED_TIME),
        "enqueued_at": SCHEDULED_TIME,
    }
    if spec.track:
        body["track"] = True
    return json.dumps(body, separators=(",", ":"))


def scheduled_envelope(spec: ScheduleSpec, scheduled_time: datetime, execution_id: str) -> Envelope:
    """The envelope of one firing, exactly as Scheduler would fill :func:`schedule_input`."""
    stamp = scheduled_time.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    body = schedule_input(spec).replace(SCHEDULED_TIME, stamp).replace(EXECUTION_ID, execution_id)
    return Envelope.model_validate_json(body)


UNSIGNED_FIRING_WINDOW_SECONDS = 24 * 3600
"""How old an unsigned firing may be: as long as its slot's key dedups it (the idempotency record's
life), so a copy of a firing, or one made up for a slot that ran, runs no second time."""
_FIRING_SKEW_SECONDS = 300
_STAMP = "%Y-%m-%dT%H:%M:%SZ"


def unsigned_firing_key(
    job_name: str, expression: str, timezone: str, key: str, *, idempotent: bool, now: datetime
) -> str:
    """The key an unsigned firing of a recurring schedule runs under, when signing is on; raises
    :class:`~jobframework.errors.SignatureError` when its slot is none the schedule could have fired.

    Scheduler's input is fixed in the stack and cannot be signed, so a firing is taken unsigned; anyone
    who can send to the queue can send one too. What keeps that to "the schedule's own run, perhaps
    early" is its slot's key: the slot must be recent (the last 24 h, the life of the key's record)
    and not ahead, a cron schedule's slot one of its times, a rate schedule's time is taken as the
    slot of its period that holds it (a made-up time shares the key of the period's real firing), and
    the job idempotent (else no key keeps a second run out).

    Example:
        >>> now = datetime(2026, 12, 6, 2, 30, tzinfo=UTC)
        >>> key = schedule_key("payouts.nightly", "2026-12-06T02:00:00Z")
        >>> unsigned_firing_key("payouts.nightly", "cron(0 2 * * ? *)", "UTC", key, idempotent=True, now=now)
        'schedule:payouts.nightly:2026-12-06T02:00:00Z'
        >>> made_up = schedule_key("sync.crm", "2026-12-06T02:07:13Z")
        >>> unsigned_firing_key("sync.crm", "rate(5 minutes)", "UTC", made_up, idempotent=True, now=now)
        'schedule:sync.crm:2026-12-06T02:05:00Z'
    """
    from jobframework.errors import SignatureError
    from jobframework.local.scheduler import ScheduleClock, parse_rate

    stamp = key.removeprefix(schedule_key(job_name, ""))
    try:
        slot = datetime.strptime(stamp, _STAMP).replace(tzinfo=UTC)
    except ValueError:
        raise SignatureError(
            f"unsigned, and its key's time {stamp[:40]!r} is no slot of its schedule"
        ) from None
    age = (now - slot).total_seconds()
    if age < -_FIRING_SKEW_SECONDS or age > UNSIGNED_FIRING_WINDOW_SECONDS:
        raise SignatureError(
            f"unsigned, for the slot {stamp}, which is {'ahead' if age < 0 else 'over 24 h old'}: a "
            "schedule's own firing is unsigned, but only within 24 h of its slot (jf schedules --run "
            "sends a signed run now)"
        )
    if not idempotent:
        raise SignatureError(
            "unsigned, and the job is not idempotent: an unsigned firing is taken only where its slot's "
            "key keeps a second copy from running (make the job idempotent, the default, or run it with "
            "jf schedules --run, which signs)"
        )
    period = parse_rate(expression)
    if period is not None:  # (its first firing's time is not known: the period's slot that holds it)
        seconds = int(period.total_seconds())
        start = datetime.fromtimestamp(int(slot.timestamp()) // seconds * seconds, UTC)
        return schedule_key(job_name, start.strftime(_STAMP))
    if ScheduleClock(expression, timezone).next_after(slot - timedelta(seconds=1)) != slot:
        raise SignatureError(f"unsigned, and {stamp} is not a time of its schedule {expression}")
    return key
