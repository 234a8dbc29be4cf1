"""One dead letter as read from a DLQ, and a DLQ's depth."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from jobframework import envelope as wire
from jobframework.errors import JobFrameworkError

REASON_ATTRIBUTES = (
    wire.ATTR_REASON,
    wire.ATTR_ERROR,
    wire.ATTR_ATTEMPTS,
    wire.ATTR_SOURCE,
    wire.ATTR_DEAD_AT,
)
"""The attributes the consumer adds to a dead letter (a redrive drops them)."""


UNVERIFIED_REASONS = frozenset({"signature", "unknown-type"})
"""Dead-letter reasons given before a record's signature was checked: its envelope is a claim."""
UNTYPED = "?"
"""The type shown for, and selecting, a letter whose job type cannot be read (a malformed body)."""


class DeadLetterError(JobFrameworkError):
    """A DLQ operation failed; the message says which and why."""


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """One dead letter as read from a DLQ."""

    message_id: str
    receipt_handle: str
    body: str
    job_type: str | None
    job_id: str | None
    key: str | None
    reason: str | None
    error: str | None
    attempts: int | None
    source: str | None
    dead_at: datetime | None
    sent_at: datetime | None
    attributes: dict[str, str]
    system_attributes: dict[str, str]
    payload_ref: dict[str, Any] | None = None
    """The body's ``payload_ref`` (bucket, key, size, sha256) when the payload was offloaded to S3."""
    dead_message_id: str | None = None
    """The SQS message id of the record that died (``jf-message-id``), which the consumer's log names;
    ``message_id`` is the letter's own in the DLQ."""
    tracked: bool = False
    """The job has a status record (its envelope's ``track``): a redrive sets it back to ``queued``."""

    @classmethod
    def of(cls, message: dict[str, Any]) -> DeadLetter:
        attrs = {
            name: str(attr.get("StringValue"))
            for name, attr in (message.get("MessageAttributes") or {}).items()
            if isinstance(attr, dict) and "StringValue" in attr
        }
        body = str(message.get("Body", ""))
        job_id = key = None
        ref: dict[str, Any] | None = None
        tracked = False
        job_type = attrs.get(wire.ATTR_TYPE)
        try:
            data = json.loads(body)
            if isinstance(data, dict):
                job_id = _str_or_none(data.get("id"))
                key = _str_or_none(data.get("key"))
                tracked = data.get("track") is True
                job_type = job_type or _str_or_none(data.get("type"))
                pointer = data.get("payload_ref")
                if isinstance(pointer, dict) and pointer.get("bucket") and pointer.get("key"):
                    ref = pointer
        except (ValueError, RecursionError):
            pass
        system = {k: str(v) for k, v in (message.get("Attributes") or {}).items()}
        attempts = attrs.get(wire.ATTR_ATTEMPTS)
        return cls(
            message_id=str(message.get("MessageId", "")),
            receipt_handle=str(message.get("ReceiptHandle", "")),
            body=body,
            job_type=job_type,
            job_id=job_id,
            key=key,
            reason=attrs.get(wire.ATTR_REASON),
            error=attrs.get(wire.ATTR_ERROR),
            attempts=int(attempts) if attempts and attempts.isdigit() else None,
            source=attrs.get(wire.ATTR_SOURCE),
            dead_at=_parse_time(attrs.get(wire.ATTR_DEAD_AT)),
            sent_at=_epoch_ms(system.get("SentTimestamp")),
            attributes=attrs,
            system_attributes=system,
            payload_ref=ref,
            dead_message_id=attrs.get(wire.ATTR_MESSAGE_ID),
            tracked=tracked,
        )

    @property
    def own_key(self) -> str | None:
        """Its key when that is not its job id (a key naming the customer, ``evt:globex-...``), else
        ``None``: what the key columns of ``jf dlq peek`` and the console show."""
        return self.key if self.key and self.key != self.job_id else None

    @property
    def died_at(self) -> datetime | None:
        """When it was dead-lettered (``jf-dead-at``, else when the DLQ got it)."""
        return self.dead_at or self.sent_at

    def age(self, now: datetime | None = None) -> float | None:
        """Seconds since it was dead-lettered."""
        died = self.died_at
        if died is None:
            return None
        return max(0.0, ((now or datetime.now(UTC)) - died).total_seconds())

    def shown_body(self) -> str:
        """The body as ``jf dlq peek --id`` shows it: its JSON indented, else as it is."""
        try:
            return json.dumps(json.loads(self.body), indent=2, ensure_ascii=False)
        except (ValueError, RecursionError):  # (not JSON, or nested deeper than Python reads)
            return self.body

    @property
    def fifo(self) -> bool:
        """It is a FIFO DLQ's (its group is an ordered job's, with a sequence number)."""
        return "SequenceNumber" in self.system_attributes or (self.source or "").endswith(".fifo")

    @property
    def verified(self) -> bool:
        """Its id and type are the job's, not a claim: it was not refused before its signature was
        checked (``signature``, ``unknown-type``). A redrive sets back the status, and lapses the
        dead run's start claim, of only such a job: a forged letter naming a dead job's id must not
        make it read ``queued`` for good, nor one naming a running job's make it read ``queued``."""
        return self.reason not in UNVERIFIED_REASONS

    @property
    def redrives(self) -> int:
        """Times it was redriven before (``jf-redrives``): it died again after as many redrives."""
        try:
            return max(0, int(self.attributes.get(wire.ATTR_REDRIVES) or 0))
        except ValueError:
            return 0

    @property
    def tenant(self) -> str | None:
        """The job's tenant (``enqueue(tenant=)``): a standard queue's ``MessageGroupId``."""
        group = self.system_attributes.get("MessageGroupId")
        return group if group and not self.fifo else None

    def summary(self) -> dict[str, Any]:
        """What ``jf dlq peek`` shows (JSON-ready)."""
        return {
            "type": self.job_type,
            "id": self.job_id,
            "key": self.key,
            "tenant": self.tenant,
            "reason": self.reason,
            "error": self.error,
            "attempts": self.attempts,
            "redrives": self.redrives,
            "dead_at": self.died_at.isoformat() if self.died_at else None,
            "source": self.source,
            "message_id": self.message_id,
            "dead_message_id": self.dead_message_id,
        }

    def export_record(self) -> dict[str, Any]:
        """One line of ``jf dlq export``: everything needed to inspect or re-send it."""
        return {
            **self.summary(),
            "body": self.body,
            "attributes": self.attributes,
            "system_attributes": self.system_attributes,
        }


@dataclass(frozen=True, slots=True)
class Selection:
    """Which dead letters a redrive or a purge takes (every given condition must hold).

    Example:
        >>> letter = DeadLetter.of({"MessageId": "m-1", "Body": "not json"})
        >>> Selection(job_type=UNTYPED).matches(letter), Selection(ids=frozenset({"m-1"})).matches(letter)
        (True, True)
        >>> Selection(reason="exhausted").matches(letter)
        False
    """

    job_type: str | None = None
    """A job type; ``"?"`` (:data:`UNTYPED`) for letters whose type cannot be read."""
    reason: str | None = None
    """A dead-letter reason (``exhausted``, ``malformed``, ... ; the ``jf-reason`` attribute)."""
    older_than: float | None = None
    """Seconds since the letter was dead-lettered, at least."""
    ids: frozenset[str] | None = None
    """Job ids or SQS message ids: the letter's own in the DLQ, or the id of the record that died (a
    letter matches by any)."""
    matching: str | None = None
    """Text the letter's body (its envelope: payload, key; not a payload offloaded to S3) or its error
    contains, as written (``hook:globex``: one partner's letters)."""
    error_contains: str | None = None
    """Text the letter's error contains (``429``: the throttled ones, not a payload that holds 429)."""

    def __post_init__(self) -> None:
        for name in ("matching", "error_contains"):
            value = getattr(self, name)
            if value is not None and not value.strip():
                raise ValueError(f"{name}= must be text to look for: an empty one would select every letter")

    def matches(self, letter: DeadLetter, now: datetime | None = None) -> bool:
        if self.job_type is not None and (letter.job_type or UNTYPED) != self.job_type:
            return False
        if self.reason is not None and letter.reason != self.reason:
            return False
        if self.older_than is not None and (letter.age(now) or 0.0) < self.older_than:
            return False
        if self.matching is not None and not _contains(letter, self.matching):
            return False
        if self.error_contains is not None and self.error_contains not in (letter.error or ""):
            return False
        return self.ids is None or bool(self.named(letter))

    def named(self, letter: DeadLetter) -> frozenset[str]:
        """The given ids that ``letter`` carries (its message id, its job id, the dead record's id)."""
        if not self.ids:
            return frozenset()
        return self.ids.intersection((letter.message_id, letter.job_id, letter.dead_message_id))


def _contains(letter: DeadLetter, text: str) -> bool:
    """``text`` is in the letter's body as sent (compact JSON) or as ``jf dlq peek --id`` shows it
    (indented: ``"amount": -1``, which an operator copies), in its error, or in its tenant."""
    if text in letter.body or text in (letter.error or "") or text in (letter.tenant or ""):
        return True
    # (the shown form differs from the sent one in spaces only)
    return any(c.isspace() for c in text) and text in letter.shown_body()


@dataclass(frozen=True, slots=True)
class DlqDepth:
    priority: str
    name: str
    url: str
    depth: int
    in_flight: int
    oldest_age_seconds: float | None
    sampled: int


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _epoch_ms(value: str | None) -> datetime | None:
    if not value or not value.isdigit():
        return None
    return datetime.fromtimestamp(int(value) / 1000, UTC)
