"""A long poll on the embedded AWS returns when a delayed message comes due, as on SQS.

moto's ``ReceiveMessage`` waits for a send to wake it, and otherwise looks again once a second: a
message sent with ``DelaySeconds`` (a retry's or a hand-back's copy), or one whose visibility ran
out, was received up to a second after it came due. Records handed back to start at their rate
turn then came back late together and started in a clump (a trial measured 10 starts in one second
of a ``5/second`` job under ``jf dev``). :func:`install` makes the wait also end when the queue's next
delayed or in-flight message becomes receivable.

Example:
    >>> install()  # before the server takes requests; calling it again changes nothing
"""

from __future__ import annotations

import threading
import time
from typing import Any

MIN_WAIT_SECONDS = 0.005
"""The shortest wait between looks (a message due now is looked for again after this)."""

_installed = threading.Lock()


def install() -> None:
    """Replace moto's ``Queue.wait_for_messages`` (once per process)."""
    from moto.sqs.models import Queue

    with _installed:
        if getattr(Queue.wait_for_messages, "jf_wakes_when_due", False):
            return

        def wait_for_messages(self: Any, timeout: float) -> None:
            deadline = time.monotonic() + timeout
            with self._messages_lock:
                while not self.messages:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return
                    due = next_due_in(self)
                    self._messages_lock.wait(left if due is None else min(left, max(due, MIN_WAIT_SECONDS)))

        wait_for_messages.jf_wakes_when_due = True  # type: ignore[attr-defined]
        Queue.wait_for_messages = wait_for_messages  # type: ignore[method-assign]


def next_due_in(queue: Any) -> float | None:
    """Seconds until the queue's next delayed or in-flight message becomes receivable (``None``:
    there is none)."""
    now_ms = time.time() * 1000
    due = [
        at
        for m in list(queue._messages)
        if (at := max(float(m.visible_at or 0), float(m.delayed_until or 0))) > now_ms
    ]
    return (min(due) - now_ms) / 1000 if due else None
