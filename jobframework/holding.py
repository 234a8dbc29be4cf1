"""What a running job holds: its key's in-progress record and its message, kept by the heartbeat."""

from __future__ import annotations

import time
from functools import partial
from typing import TYPE_CHECKING, Any

from jobframework.gates import RELEASE_MARGIN_SECONDS
from jobframework.heartbeat import Hold, heartbeat
from jobframework.heartbeat import period_for as heartbeat_period
from jobframework.idempotency import KeyHold

if TYPE_CHECKING:
    from jobframework.consumer import Consumer
    from jobframework.delivery import Batch, Delivery
    from jobframework.jobs import Job

__all__ = ["Held"]


class Held:
    """The ``with`` block that holds a running job's key and message (a class, not a generator: it
    runs for every record). The heartbeat watches it and makes its :class:`~jobframework.heartbeat.Hold`
    only when a beat would be due (:meth:`hold`): a job that ends before, as most do, never has one."""

    __slots__ = ("batch", "consumer", "delivery", "job", "key", "lapses_at", "started")

    def __init__(self, consumer: Consumer, d: Delivery, job: Job[Any], batch: Batch) -> None:
        self.consumer, self.delivery, self.job, self.batch = consumer, d, job, batch
        c = consumer
        self.key = KeyHold(c.idempotency) if c.idempotency is not None and job.idempotent else None
        self.started = self.lapses_at = 0.0

    def _key_lapses_in(self) -> float:
        """Seconds from the start until the in-progress record first lapses: the job's timeout and a
        margin, or the invocation's end (the hard end is fixed a batch)."""
        return max(0.0, min(self.job.timeout + RELEASE_MARGIN_SECONDS, self.batch.hard_end - self.started))

    def __enter__(self) -> KeyHold | None:
        self.started = time.monotonic()
        self.lapses_at = self.started + self._key_lapses_in()
        heartbeat.watch(self, self.lapses_at - heartbeat_period(self.job.timeout))
        return self.key

    def hold(self) -> Hold:
        d, job, key = self.delivery, self.job, self.key
        env = d.require_envelope()
        return Hold(
            f"{env.id} ({env.type})",
            job.timeout,
            self.started,
            self.batch.hard_end,
            self.lapses_at,
            key.extend if key is not None else None,
            partial(self.consumer.change_visibility, d),
        )

    def __exit__(self, *exc: object) -> None:
        heartbeat.unwatch(self)
