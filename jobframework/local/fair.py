"""Tenant fairness in the emulator: a queue's message groups served round-robin.

SQS fair queues (2025) take ``MessageGroupId`` on a standard queue as the tenant and keep one
tenant's flood from holding up another's messages. The emulator does the same within a look-ahead:
it keeps up to ``lookahead`` received messages of a queue, grouped by ``MessageGroupId`` (messages
without one form one group), and fills each batch by taking one message of each group in turn,
starting after the group the previous batch ended with. Within a group the order is kept.

Unlike SQS, which sees the whole queue, the emulator sees only its look-ahead: a tenant whose first
message is deeper than that waits for the flood ahead of it to shrink to the look-ahead. Held messages
are in flight (received); the look-ahead is small enough that they are served within seconds, well
inside the queue's visibility timeout, and the emulator returns any still held when it stops.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from typing import Any

DEFAULT_LOOKAHEAD = 100


def group_of(message: dict[str, Any]) -> str:
    return str((message.get("Attributes") or {}).get("MessageGroupId", ""))


class FairBuffer:
    """Received messages of one queue by group, taken round-robin.

    Example:
        >>> buf = FairBuffer(10)
        >>> buf.add([{"Body": b, "Attributes": {"MessageGroupId": b[0]}} for b in ["a1", "a2", "a3", "b1"]])
        >>> [m["Body"] for m in buf.take(3)]
        ['a1', 'b1', 'a2']
    """

    def __init__(self, lookahead: int = DEFAULT_LOOKAHEAD) -> None:
        self.lookahead = lookahead
        self._groups: OrderedDict[str, deque[dict[str, Any]]] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def room(self) -> int:
        """How many more messages the look-ahead takes."""
        with self._lock:
            return max(0, self.lookahead - self._size)

    def add(self, messages: list[dict[str, Any]]) -> None:
        with self._lock:
            for m in messages:
                self._groups.setdefault(group_of(m), deque()).append(m)
                self._size += 1

    def take(self, n: int) -> list[dict[str, Any]]:
        """Up to ``n`` messages, one of each group in turn."""
        taken: list[dict[str, Any]] = []
        with self._lock:
            while len(taken) < n and self._groups:
                group, queue = next(iter(self._groups.items()))
                taken.append(queue.popleft())
                self._size -= 1
                if queue:
                    self._groups.move_to_end(group)  # its next message waits for the other groups
                else:
                    del self._groups[group]
        return taken

    def drain(self) -> list[dict[str, Any]]:
        """Every held message (the emulator returns them to the queue when it stops)."""
        with self._lock:
            held = [m for q in self._groups.values() for m in q]
            self._groups.clear()
            self._size = 0
        return held
