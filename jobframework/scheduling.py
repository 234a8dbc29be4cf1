"""The envelope a schedule sends: one definition for EventBridge Scheduler and the local scheduler.

Each firing is a fresh job whose key includes the scheduled time, so a duplicate
firing of the same slot is a duplicate key, not a second run.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime, tzinfo
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


KEY_RECORD_SECONDS = 24 * 3600
"""How long a slot's key keeps a second run out: the idempotency record's life (from its run)."""
_SKEW_SECONDS = 300
"""How far ahead of its slot an unsigned firing may come (clocks differ)."""
LONGEST_UNSIGNED_RATE_SECONDS = 12 * 3600
"""The longest ``rate(...)`` whose unsigned firings are taken: a longer one is given as a cron."""
_STAMP = "%Y-%m-%dT%H:%M:%SZ"


def unsigned_firing_key(
    job_name: str, expression: str, timezone: str, key: str, *, idempotent: bool, now: datetime
) -> str:
    """The key an unsigned firing of a recurring schedule runs under, when signing is on; raises
    :class:`~jobframework.errors.SignatureError` for one that could run a slot a second time.

    Scheduler's input is fixed in the stack and cannot be signed, so a firing is taken unsigned, and
    anyone who can send to the queue can send one too. What keeps that to "the schedule's own run,
    perhaps early" is the slot's key, whose record keeps a second run out for 24 hours:

    - the time is written as Scheduler writes it (``2026-12-06T02:00:00Z``: one text a slot);
    - a cron schedule's time is one of its times in its zone (a time the fall-back repeats has the
      key of its first), and the firing comes within 24 hours of it (less the clock skew it may come
      early by, so that no record lapses in between);
    - a rate schedule's time is taken as the slot of its period that holds it (a made-up time shares
      the key of that period's real firing), the period is at most 12 hours, and the firing comes
      within 24 hours less the period;
    - the job is idempotent with a table to keep its keys in (``idempotent``).

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
    from jobframework.schedule_expr import cron_matches, rate_seconds

    stamp = key.removeprefix(schedule_key(job_name, ""))
    try:
        slot = datetime.strptime(stamp, _STAMP).replace(tzinfo=UTC)
    except ValueError:
        slot = None
    if slot is None or slot.strftime(_STAMP) != stamp:
        raise SignatureError(f"unsigned, and its key's time {stamp[:40]!r} is no slot of its schedule")
    if not idempotent:
        raise SignatureError(
            "unsigned, and the job has no key record to keep a second copy from running (it is not "
            "idempotent, or the consumer has no idempotency table): make it idempotent, the default, or "
            "run it with jf schedules --run, which signs"
        )
    period = rate_seconds(expression)
    if period is not None:
        if period > LONGEST_UNSIGNED_RATE_SECONDS:
            raise SignatureError(
                f"unsigned, of {expression}: with signing on, a schedule over 12 hours is a cron "
                "expression (its slots can be checked; a rate's cannot), e.g. cron(0 2 * * ? *)"
            )
        window = KEY_RECORD_SECONDS - period - 2 * _SKEW_SECONDS
        start = datetime.fromtimestamp(int(slot.timestamp()) // period * period, UTC)
    else:
        local = slot.astimezone(_zone(timezone))
        if not cron_matches(expression, local.replace(tzinfo=None)):
            raise SignatureError(f"unsigned, and {stamp} is not a time of its schedule {expression}")
        window = KEY_RECORD_SECONDS - 2 * _SKEW_SECONDS
        start = local.replace(fold=0).astimezone(UTC)
    age = (now - slot).total_seconds()
    if age < -_SKEW_SECONDS or age > window:
        raise SignatureError(
            f"unsigned, for the slot {stamp}, which is {'ahead' if age < 0 else 'too old'}: a schedule's "
            f"own firing is unsigned, taken within {window // 3600} h {window % 3600 // 60} min of its slot "
            "(jf schedules --run sends a signed run now)"
        )
    return schedule_key(job_name, start.strftime(_STAMP))


def _zone(name: str) -> tzinfo:
    """The schedule's time zone; a :class:`SignatureError` when this machine has no data for it."""
    if name == "UTC":
        return UTC
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(name)
    except ZoneInfoNotFoundError:
        from jobframework.errors import SignatureError

        raise SignatureError(
            f"unsigned, of a schedule in {name}, for which this function has no time zone data: add "
            "tzdata to the project's dependencies"
        ) from None


def check_signed_schedules(schedules: Iterable[ScheduleSpec]) -> None:
    """Refuse, before anything is deployed, a schedule whose unsigned firings a signing consumer would
    refuse: a ``rate(...)`` over 12 hours (:func:`unsigned_firing_key`).

    Raises:
        ConfigurationError: naming the job and the cron to write instead.
    """
    from jobframework.errors import ConfigurationError
    from jobframework.schedule_expr import rate_seconds

    for spec in schedules:
        seconds = rate_seconds(spec.expression)
        if seconds is not None and seconds > LONGEST_UNSIGNED_RATE_SECONDS:
            raise ConfigurationError(
                f"job {spec.job}: its schedule {spec.expression} runs unsigned, and with signing on a "
                "schedule over 12 hours is a cron expression, whose slots the consumer can check (e.g. "
                "Schedule('cron(0 2 * * ? *)') for every day at 02:00 UTC)"
            )


_FIRING_IDS = uuid.UUID("8f0d6c52-5b1e-4c51-9d53-2f2a3c7e9b10")
"""The namespace of :func:`firing_id`'s UUIDv5s."""


def firing_id(key: str) -> str:
    """The job id an unsigned firing of the slot ``key`` runs under: one a slot, whatever id the
    message claimed (anyone sending could claim another job's, whose status it would write).

    Example:
        >>> firing_id("schedule:a.b:2026-12-06T02:00:00Z") == firing_id("schedule:a.b:2026-12-06T02:00:00Z")
        True
    """
    return str(uuid.uuid5(_FIRING_IDS, key))


def slot_time(job_name: str, key: str) -> datetime:
    """The slot's time of a canonical schedule key (what :func:`unsigned_firing_key` gives)."""
    return datetime.strptime(key.removeprefix(schedule_key(job_name, "")), _STAMP).replace(tzinfo=UTC)
