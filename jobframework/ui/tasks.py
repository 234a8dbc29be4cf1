"""Long actions (a redrive) run in a thread; the page polls their progress.

A task reports how many it has done of how many it expects; when it ends it holds its result (a
:class:`~jobframework.dlq.RedriveResult`) or the one-line error that stopped it. Tasks live in this
process only (the console is one local process); the newest :data:`KEEP` are kept.
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
    total: int | None
    done: int = 0
    finished: bool = False
    result: Any = None
    error: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def advance(self, n: int) -> None:
        with self.lock:
            self.done += n

    @property
    def percent(self) -> int:
        if self.finished and self.error is None:
            return 100
        if not self.total:
            return 0
        return min(100, round(100 * self.done / self.total))


class Tasks:
    """The console's running and recent tasks."""

    def __init__(self) -> None:
        self._tasks: OrderedDict[str, Task] = OrderedDict()
        self._lock = threading.Lock()

    def start(self, title: str, total: int | None, work: Callable[[Progress], Any]) -> Task:
        """Run ``work(progress)`` in a thread; ``progress(n)`` adds ``n`` to the task's count."""
        task = Task(id=uuid.uuid4().hex, title=title, total=total)
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
