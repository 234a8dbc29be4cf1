"""What a record's stages decided: one :class:`Verdict` per record, applied by the settler.

Every stage of the consumer's pipeline (:mod:`jobframework.pipeline`) either passes the record on or
ends it with a verdict; nothing in a stage talks to SQS about the record's fate. The settler
(:mod:`jobframework.settler`) then applies all the verdicts of a batch at once. The kinds:

* ``SUCCEEDED``: acknowledged (the job ran, or a duplicate of a completed key was skipped);
* ``SKIPPED``: acknowledged without running (a backlogged scheduled run with ``when_backlogged="skip"``);
* ``RETRY``: the job ran and failed, back in ``delay`` seconds: in place (``ChangeMessageVisibilityBatch``,
  reported in ``batchItemFailures``) or, for a record with no receive count, as a fresh copy carrying
  its executions;
* ``RELEASE``: handed back unrun (no time left, the key held by another delivery, a deferred schedule):
  as a fresh copy that is not an attempt (:mod:`jobframework.attempts`), else in place;
* ``DEAD_LETTER``: sent to the source queue's DLQ with ``reason`` and ``error``, then acknowledged;
* ``RETURN``: reported in ``batchItemFailures`` with no visibility change (it comes back when its
  current visibility runs out): what the consumer could not settle itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jobframework.classification import Reason
    from jobframework.delivery import Delivery, RecordOutcome
    from jobframework.state import JobState


class Kind(StrEnum):
    SUCCEEDED = "succeeded"
    SKIPPED = "skipped"
    RETRY = "retry"
    RELEASE = "release"
    DEAD_LETTER = "dead_letter"
    RETURN = "return"


@dataclass(slots=True)
class Verdict:
    """One record's end, as its stages decided it (see the module docstring)."""

    delivery: Delivery
    kind: Kind
    delay: int = 0
    """Seconds before the record is seen again (``RETRY`` and ``RELEASE``)."""
    back_at: float | None = None
    """When the record should be seen again (epoch seconds), if that matters to the second (a rate
    turn): the settler then counts ``delay`` from its request, at most ``delay``."""
    copy: bool = False
    """Hand back a fresh copy instead of changing the visibility in place."""
    executions: int = 0
    """``jf-executions`` of the copy."""
    deferred: int = 0
    """``jf-deferrals`` of the copy."""
    attributes: dict[str, str] | None = None
    """Message attributes the copy carries besides the original's (a reserved rate slot)."""
    reason: Reason | None = None
    error: str | None = None
    status: tuple[JobState, dict[str, Any]] | None = None
    """The job status to note (state, fields) once the verdict is applied."""
    outcome: RecordOutcome | None = None
    """Told to the metrics and the listeners once the verdict is applied."""
    saga: tuple[str, dict[str, Any]] | None = None
    """The saga event (``completed``/``failed``, details) to tell before the verdict is applied."""
    why: str = ""
    """For ``RETURN``: what could not be settled (logged)."""
    events: list[str] = field(default_factory=list)
    """Per-job-type schedule metrics (``Heartbeat``, ``ScheduleSkipped``, ``Overrun``, ...)."""

    @property
    def acknowledged(self) -> bool:
        """The record is not reported in ``batchItemFailures`` (as the verdict stands now)."""
        if self.kind in (Kind.SUCCEEDED, Kind.SKIPPED, Kind.DEAD_LETTER):
            return True
        return self.copy and self.kind in (Kind.RETRY, Kind.RELEASE)


def returned(d: Delivery, why: str) -> Verdict:
    """A record the consumer could not settle: reported failed, no visibility change."""
    return Verdict(d, Kind.RETURN, why=why)


def unverified(verdict: Verdict) -> Verdict:
    """``verdict`` of a record whose signature was not verified (signing on): its envelope's id, type
    and saga are a claim, which must not change the status of the job it names, tell a saga, or reach
    the listeners as that job's (a forged copy of a job's message marked it ``dead`` and paged a
    team's notifier, a trial found). Its dead letter keeps the message as it came."""
    verdict.status = None
    verdict.saga = None
    if verdict.outcome is not None:
        verdict.outcome.job_id = verdict.outcome.job_type = None
    return verdict
