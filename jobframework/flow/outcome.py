"""What a flow-control gate decides about a record before its job runs.

A gate returns ``None`` (go on), :class:`HandBack` (send the record back unrun after ``delay``
seconds; it does not use an attempt) or :class:`Drop` (acknowledge it unrun with a final status such
as ``cancelled`` or ``expired``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobframework.state import JobState

if TYPE_CHECKING:
    from jobframework.envelope import Envelope
    from jobframework.jobs import Job


@dataclass(frozen=True, slots=True)
class HandBack:
    """Hand the record back unrun; it is looked at again in ``delay`` seconds (not an attempt)."""

    delay: int
    reason: str
    rate_slot: float | None = None
    """A rate token reserved (or taken) for the record: its copy carries it (``jf-rate-slot``)."""
    back_at: float | None = None
    """When the record should be seen again (epoch seconds) where that matters to the second (its
    rate turn): the settler counts the delay from the hand-back's send, which waits for the batch's
    other records (a delay counted from the gate came back late by as long as they ran)."""
    waits: int | None = None
    """Its hand-backs over a concurrency cap, this one included: its copy carries them
    (``jf-limit-waits``), and each waits longer."""


@dataclass(frozen=True, slots=True)
class Drop:
    """Acknowledge the record unrun; the job's status becomes ``state``.

    ``metric`` is the per-job-type count the consumer emits (``Cancelled``, ``Expired``, ``Debounced``);
    ``status_reason``, what the status says when not ``reason`` (a cancel's, as ``jf cancel`` wrote it).
    """

    state: JobState
    reason: str
    metric: str
    status_reason: str | None = None


@dataclass(frozen=True, slots=True)
class RateInputs:
    """What the limit gates learn of a record besides its job and payload."""

    demand: int = 1
    """How many records of its batch are of its job type and need a token (taken together)."""
    reserved: float | None = None
    """The turn its hand-back copy carries for this attempt (``jf-rate-slot``): no token again."""
    may_wait: float = 0.0
    """Seconds it may wait in the consumer for its turn (the invocation's time to spare)."""
    can_carry: bool = True
    """Its hand-back is a copy that carries a reserved turn (not on a FIFO lane, handed back in place)."""
    waits: int = 0
    """Its hand-backs over a concurrency cap so far (``jf-limit-waits``)."""
    holder: str = ""
    """Its delivery (:func:`~jobframework.gates.lease_holder`), which holds a concurrency lease it
    takes, and frees it (``""``: the job id)."""


NO_RATE_INPUTS = RateInputs()
"""A record alone, with no turn, that may not wait (the default)."""

GateOutcome = HandBack | Drop
Gate = Callable[["Envelope", "Job[Any]", Any, int, float], GateOutcome | None]
"""``gate(envelope, job, payload, attempt, now)``: the loaded payload model; ``now`` is epoch seconds."""
