"""How long a consumer function may run: long enough for a batch of its lanes' longest jobs.

A record is released unstarted when the invocation has less time left than its job's timeout (and a
release spends one of its receives), so the function gets time for a batch's worst case, which
depends on how many of its records run at once (:mod:`jobframework.concurrency`):

* an ``io`` lane, or a lane without a profile, runs the whole batch at once, but a lane whose last
  batch was all quick starts on one thread and calls the others in once a record runs long: two
  rounds of its longest job;
* a ``cpu`` lane runs one record at a time, and a FIFO lane may get a batch of one message group,
  which runs in order: a round per record;
* a lane given ``record_concurrency`` (``TopologySettings``) runs that many at once: a round per that
  many records, plus the quick lane's first;
* a batched job's records run in one call: once; the lane's plain jobs come in batches of its size.

The queue's visibility is six times this (AWS's advice), so it is also how long a crashed
invocation's records stay hidden: two minutes and ten seconds of function time (13 minutes of
visibility) for the default 60-second jobs, not the twenty of a batch run one at a time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from jobframework.concurrency import POOL_THREADS
from jobframework.core import FIFO_MAX_BATCH

if TYPE_CHECKING:
    from jobframework.jobs import Job

FRAMEWORK_SECONDS = 10
"""Added to the batch's time for the framework (its settling)."""
MIN_TIMEOUT, MAX_TIMEOUT = 30, 900
"""Lambda's longest timeout, and a floor for the framework's own start."""


def rounds(lane: str, batch_size: int, concurrency: int | None = None) -> int:
    """How many of a lane's longest jobs a batch may run one after the other (see the module docstring).

    Example:
        >>> rounds("high", 10), rounds("high-cpu", 10), rounds("default-fifo", 10), rounds("low", 10, 4)
        (2, 10, 10, 4)
        >>> rounds("high", 1000)  # a batch over the pool's threads runs in turns of them
        17
    """
    plain = lane.removesuffix("-fifo")
    if lane != plain or plain.endswith("-cpu"):
        limit = concurrency if concurrency is not None and lane == plain else 1
    else:
        limit = concurrency if concurrency is not None else batch_size
    limit = max(1, min(limit, batch_size, POOL_THREADS + 1))  # (the pool's threads and the caller)
    if limit == 1:
        return batch_size
    return min(batch_size, -(-batch_size // limit) + 1)


def consumer_timeout(
    lanes: Mapping[str, Iterable[Job[Any]]], batch_size: int, concurrency: Mapping[str, int]
) -> int:
    """The Lambda timeout (seconds) of a function consuming ``lanes`` (their jobs): a batch's worst
    case plus :data:`FRAMEWORK_SECONDS`, within 30..900."""
    needed = 20.0
    for lane, routed in lanes.items():
        jobs = list(routed)
        per_record = max((j.timeout for j in jobs if j.batch is None), default=0.0)
        per_call = max((j.timeout for j in jobs if j.batch is not None), default=0.0)
        # A lane with a batched job takes batches of its size, its plain jobs' records too (a FIFO
        # lane at most ten).
        size = max((j.batch.max_size for j in jobs if j.batch is not None), default=batch_size)
        if lane.endswith("-fifo"):
            size = min(size, FIFO_MAX_BATCH)
        needed = max(needed, per_record * rounds(lane, size, concurrency.get(lane)), per_call)
    return int(min(MAX_TIMEOUT, max(MIN_TIMEOUT, -(-needed // 1) + FRAMEWORK_SECONDS)))
