"""What goes with ``jf dev``'s embedded AWS when it stops: the messages still in its queues.

A retry or a hand-back due in a minute, a job enqueued with a delay, a dead letter: all live in the
embedded AWS's memory, and stopping ``jf dev`` loses them. Its last line says how many, so that a
user who stops it with work pending knows (a trial stopped it with a hand-back a minute off and saw
no word of it).
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import Any

log = logging.getLogger(__name__)

_COUNTS = (
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
)


@dataclass(frozen=True, slots=True)
class Leftover:
    """Messages in the queues: not yet run (``delayed`` of them sent with a delay, ``backing_off``
    waiting out a retry's visibility timeout), and dead letters. (A delay over 15 minutes is a
    one-time schedule of the embedded Scheduler, not a message: not counted.)"""

    unrun: int = 0
    delayed: int = 0
    backing_off: int = 0
    dead_letters: int = 0

    def __bool__(self) -> bool:
        return bool(self.unrun or self.dead_letters)

    def as_json(self) -> dict[str, int]:
        return asdict(self)

    def text(self) -> str:
        """What the stop line says of them (empty when the queues are).

        Example:
            >>> print(Leftover(unrun=4, delayed=2, backing_off=1, dead_letters=1).text())
            4 jobs not yet run (2 due later, 1 waiting out a retry's back-off), 1 dead letter
            >>> Leftover(unrun=1).text(), Leftover().text()
            ('1 job not yet run', '')
        """
        parts = []
        if self.unrun:
            parts.append(f"{self.unrun} job{'s' if self.unrun != 1 else ''} not yet run")
            why = [f"{self.delayed} due later"] if self.delayed else []  # (hand-backs, delayed enqueues)
            if self.backing_off:
                why.append(f"{self.backing_off} waiting out a retry's back-off")
            if why:
                parts[-1] += f" ({', '.join(why)})"
        if self.dead_letters:
            parts.append(f"{self.dead_letters} dead letter{'s' if self.dead_letters != 1 else ''}")
        return ", ".join(parts)


def leftover(sqs: Any) -> Leftover:
    """Count the messages in every queue of the embedded AWS (``sqs``: a client of it); a failure is
    logged and counts none (the stop goes on)."""
    unrun = delayed = backing_off = dead = 0
    try:
        for url in sqs.list_queues().get("QueueUrls", []):
            attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=list(_COUNTS))["Attributes"]
            visible, in_flight, later = (int(attributes.get(name, 0)) for name in _COUNTS)
            if url.removesuffix(".fifo").endswith("-dlq"):
                dead += visible + in_flight + later
            else:
                unrun += visible + in_flight + later
                delayed += later
                backing_off += in_flight
    except Exception:
        log.warning("counting the messages left in the embedded AWS failed", exc_info=True)
        return Leftover()
    return Leftover(unrun, delayed, backing_off, dead)
