"""The envelope a schedule sends: one definition for EventBridge Scheduler and the local scheduler.

Each firing is a fresh job whose key includes the scheduled time, so a duplicate
firing of the same slot is a duplicate key, not a second run.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
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
