"""One receiver at a time takes a message on the embedded AWS's queues, as on SQS.

moto's ``ReceiveMessage`` takes no lock: two receivers polling one queue at once (``jf dev``'s
workers, two ``jf worker`` processes) could each take the same message (a trial's job ran twice, a
concurrency cap's count went one over), and on a FIFO queue, whose groups in flight it notes once
when a long poll begins, messages of one group, so an ordered job's next entry ran while the one
before it was still running. :func:`install` wraps it: a queue's receives take a lock of the queue
(a FIFO queue's look afresh at the groups in flight each time), and wait between looks outside the
lock (moto's own wait returns at once while a blocked group's messages are visible, so its long poll
spun; this one sleeps a moment instead).

Example:
    >>> install()  # before the server takes requests; calling it again changes nothing
"""

from __future__ import annotations

import threading
import time
from typing import Any

POLL_SECONDS = 0.05
"""How long a FIFO long poll sleeps when messages are visible but their groups are in flight."""

_installed = threading.Lock()
_locks: dict[int, threading.Lock] = {}
_locks_lock = threading.Lock()


def install() -> None:
    """Wrap moto's ``SQSBackend.receive_message`` (once per process)."""
    from moto.sqs.models import SQSBackend

    with _installed:
        original = SQSBackend.receive_message
        if getattr(original, "jf_fifo_groups", False):
            return

        def receive_message(  # noqa: PLR0917 (moto's signature)
            self: Any,
            queue_name: str,
            count: int,
            wait_seconds_timeout: int,
            visibility_timeout: int,
            message_attribute_names: list[str] | None = None,
        ) -> list[Any]:
            queue = self.get_queue(queue_name)
            deadline = time.monotonic() + (wait_seconds_timeout or 0)
            while True:
                with _lock_of(queue):  # one receiver at a time (a fresh look at the groups in flight)
                    got: list[Any] = original(
                        self, queue_name, count, 0, visibility_timeout, message_attribute_names
                    )
                left = deadline - time.monotonic()
                if got or left <= 0:
                    return got
                if queue.messages:  # visible, but of groups in flight: moto's wait would not wait
                    time.sleep(min(POLL_SECONDS, left))
                else:
                    queue.wait_for_messages(min(1.0, left))

        receive_message.jf_fifo_groups = True  # type: ignore[attr-defined]
        SQSBackend.receive_message = receive_message  # type: ignore[method-assign]


def _lock_of(queue: Any) -> threading.Lock:
    with _locks_lock:
        lock = _locks.get(id(queue))
        if lock is None:
            lock = _locks[id(queue)] = threading.Lock()
        return lock
