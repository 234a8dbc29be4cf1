"""Attempts count executions of a job, never receives of its message.

SQS's ``ApproximateReceiveCount`` also counts the receives that handed a record back unrun: a release
for lack of time, a wait on another delivery's in-progress record, a deferral of a backlogged
schedule. So a hand-back never changes visibility in place: it sends a fresh copy of the message
(same body, same attributes) carrying the executions so far in ``jf-executions`` (and the deferrals so
far in ``jf-deferrals``), and the original is acknowledged. A copy starts again at receive count 1,
so for any record

    attempt = jf-executions (earlier copies) + ApproximateReceiveCount (this copy)

which counts the executions (and receives whose invocation crashed, which did run). A record with no
usable ``ApproximateReceiveCount`` (a hand-made event) counts as its copy's first receive, and its
retries travel as fresh copies too, so it is still exhausted after ``max_attempts`` runs. A redrive
(``jf dlq redrive`` or StartMessageMoveTask) sends the dead letter without ``jf-executions``: attempts
start again, as documented.

Because one copy is received at most ``max_attempts`` times before the framework settles it, the
queue's ``maxReceiveCount`` (:func:`receive_limit`) only has to leave room for crashes; it can never
move a job to the DLQ before the framework's own attempts are used up.
"""

from __future__ import annotations

from typing import Any

from jobframework.envelope import ATTR_REDRIVES

ATTR_EXECUTIONS = "jf-executions"
"""Message attribute: executions of the job in earlier copies of this message (a hand-back's copy)."""
ATTR_DEFERRALS = "jf-deferrals"
"""Message attribute: times a scheduled run was deferred because its queue was backlogged."""
ATTR_SHORT_RELEASES = "jf-short-releases"
"""Message attribute: times a record was released because its whole invocation was shorter than its
job's timeout (:func:`jobframework.gates.time_left_gate`)."""
ATTR_LIMIT_WAITS = "jf-limit-waits"
"""Message attribute: times a record was handed back over its job's concurrency cap
(:func:`jobframework.flow.limits.concurrency_delay`)."""
ATTR_NEWER = "jf-newer"
"""Message attribute: when a payload newer than its consumer's job was first handed back (epoch
seconds; :mod:`jobframework.newer_payload`)."""
MIN_RECEIVE_LIMIT = 5
CRASH_MARGIN = 2
"""Receives allowed above a job's max attempts for invocations that crash (timeouts, kills)."""


def receive_limit(max_attempts: int, margin: int = CRASH_MARGIN) -> int:
    """The queue's ``maxReceiveCount`` for jobs of at most ``max_attempts``: above them by ``margin``.

    Example:
        >>> receive_limit(3), receive_limit(10)
        (5, 12)
    """
    return max(max_attempts + margin, MIN_RECEIVE_LIMIT)


FIFO_HANDBACK_ROOM = 9
"""Hand-backs a FIFO record may see per attempt of a job ahead of it: up to nine records of its group
precede it in a batch of ten, each failing up to its own max attempts."""
MAX_RECEIVE_LIMIT = 1000
"""SQS's highest ``maxReceiveCount``."""


def fifo_receive_limit(max_attempts: int, margin: int = CRASH_MARGIN) -> int:
    """A FIFO queue's ``maxReceiveCount``: room for the hand-backs behind failing jobs of a group.

    On a FIFO queue a record handed back unrun (behind a failing job of its group, over a limit) keeps
    its place in the group, so it stays in place and its receive count grows
    (:mod:`jobframework.fifo`). The framework does not count those as attempts, but SQS's redrive
    policy counts receives: it must not move such a record to the DLQ first.

    Example:
        >>> fifo_receive_limit(3), fifo_receive_limit(5)
        (35, 57)
    """
    # Per attempt: a hand-back behind each job ahead of it in its batch, and a release of its own.
    limit = receive_limit(max_attempts, margin) + (FIFO_HANDBACK_ROOM + 1) * max_attempts
    return min(MAX_RECEIVE_LIMIT, limit)


def receive_count(record: dict[str, Any]) -> int | None:
    """This copy's ``ApproximateReceiveCount``, or ``None`` when the record has no usable one."""
    attributes = record.get("attributes")  # records are JSON objects: dict checks (not ABCs) per record
    count = attributes.get("ApproximateReceiveCount") if isinstance(attributes, dict) else None
    if isinstance(count, str):
        try:
            value = int(count)
        except ValueError:
            return None
    else:
        value = count if isinstance(count, int) and not isinstance(count, bool) else 0
    return value if value >= 1 else None


def _carried(record: dict[str, Any], name: str) -> int | None:
    attributes = record.get("messageAttributes")
    if isinstance(attributes, dict) and name not in attributes:  # most records: nothing carried
        return None
    attr = attributes.get(name) if isinstance(attributes, dict) else None
    value = attr.get("stringValue") if isinstance(attr, dict) else None
    try:
        number = int(value) if isinstance(value, str) else -1
    except ValueError:
        return None
    return number if 0 <= number <= 100_000 else None


def executions_before(record: dict[str, Any]) -> int:
    """Executions in earlier copies of this message (``jf-executions``; 0 when absent)."""
    return _carried(record, ATTR_EXECUTIONS) or 0


def deferrals(record: dict[str, Any]) -> int:
    """Deferrals of this scheduled run so far (``jf-deferrals``; 0 when absent)."""
    return _carried(record, ATTR_DEFERRALS) or 0


def short_releases(record: dict[str, Any]) -> int:
    """Releases of this message for an invocation shorter than its job (``jf-short-releases``)."""
    return _carried(record, ATTR_SHORT_RELEASES) or 0


def limit_waits(record: dict[str, Any]) -> int:
    """Hand-backs of this message over its job's concurrency cap (``jf-limit-waits``; 0 when none)."""
    return _carried(record, ATTR_LIMIT_WAITS) or 0


def redrives(record: dict[str, Any]) -> int:
    """Times this job's dead letter was redriven (``jf-redrives``; 0 when never)."""
    return _carried(record, ATTR_REDRIVES) or 0


def attempt_of(record: dict[str, Any]) -> int:
    """The execution this delivery would be, 1-based (see the module docstring)."""
    return executions_before(record) + (receive_count(record) or 1)


def is_first_attempt(record: dict[str, Any]) -> bool:
    """The job's first execution, and not a handed-back copy (for the retry budget's count)."""
    return attempt_of(record) == 1 and _carried(record, ATTR_EXECUTIONS) is None
