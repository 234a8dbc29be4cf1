"""Long actions (a redrive) run in a thread; the page polls their progress.

A task knows how many items it is meant to act on (``expected``: a redrive's selected letters, or its
dry run's count) and, while it runs, how many it has read of how many there were to read (a redrive
reads its DLQ: ``read`` of ``to_read``, the DLQ's depth when it started); the bar shows the reading.
When it ends it holds its result (a :class:`~jobframework.ui.pages.dlq_actions.RedriveOutcome`) or the
one-line error that stopped it. Tasks live in this process only (the console is one local process);
the newest :data:`KEEP` are kept.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

KEEP = 50

Progress = Callable[[int], None]


@dataclass
class Task:
    id: str
    title: str
    expected: int | None
    """How many items the task is meant to act on (``None``: not known)."""
    to_read: int | None = None
    """How many items it has to read, as known when it started (``None``: not known)."""
    read: int = 0
    finished: bool = False
    result: Any = None
    error: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def advance(self, n: int) -> None:
        """Count ``n`` more items read."""
        with self.lock:
            self.read += n

    @property
    def percent(self) -> int:
        """Of the reading: 100 once it ended well; below 100 until then (``to_read`` is approximate)."""
        if self.finished and self.error is None:
            return 100
        if not self.to_read:
            return 0
        return min(99, round(100 * self.read / self.to_read))


class Tasks:
    """The console's running and recent tasks."""

    def __init__(self) -> None:
        self._tasks: OrderedDict[str, Task] = OrderedDict()
        self._lock = threading.Lock()

    def start(
        self, title: str, work: Callable[[Progress], Any], *, expected: int | None, to_read: int | None = None
    ) -> Task:
        """Run ``work(progress)`` in a thread; ``progress(n)`` adds ``n`` to the items the task read."""
        task = Task(id=uuid.uuid4().hex, title=title, expected=expected, to_read=to_read)
        with self._lock:
            self._tasks[task.id] = task
            while len(self._tasks) > KEEP:
                self._tasks.popitem(last=False)

        def run() -> None:
            try:
                task.result = work(task.advance)
            except Exception as exc:
                log.warning("task %s (%s) failed", task.id, title, exc_info=True)
                task.error = " ".join(str(exc).split()) or type(exc).__name__
            finally:
                task.finished = True

        threading.Thread(target=run, name=f"jf-ui-{task.id[:8]}", daemon=True).start()
        return task

    def get(self, task_id: str) -> Task | None:
        with self._lock:
            return self._tasks.get(task_id)
