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
    limit = at_once(lane, batch_size, concurrency)
    if limit == 1:
        return batch_size
    return min(batch_size, -(-batch_size // limit) + 1)


def at_once(lane: str, batch_size: int, concurrency: int | None = None) -> int:
    """How many of a batch's records a lane's consumer runs at once.

    Example:
        >>> at_once("high", 10), at_once("high-cpu", 10), at_once("default-fifo", 10), at_once("low", 10, 4)
        (10, 1, 1, 4)
    """
    plain = lane.removesuffix("-fifo")
    if lane != plain or plain.endswith("-cpu"):
        limit = concurrency if concurrency is not None and lane == plain else 1
    else:
        limit = concurrency if concurrency is not None else batch_size
    return max(1, min(limit, batch_size, POOL_THREADS + 1))  # (the pool's threads and the caller)


def lane_batch(lane: str, batch_size: int) -> int:
    """The records a batch of ``lane`` holds at most: a FIFO lane's event source takes ten.

    Example:
        >>> lane_batch("high", 50), lane_batch("default-fifo", 50)
        (50, 10)
    """
    return min(batch_size, FIFO_MAX_BATCH) if lane.endswith("-fifo") else batch_size


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
        size = lane_batch(lane, size)
        needed = max(needed, per_record * rounds(lane, size, concurrency.get(lane)), per_call)
    return int(min(MAX_TIMEOUT, max(MIN_TIMEOUT, -(-needed // 1) + FRAMEWORK_SECONDS)))


def stretched_lanes(
    function: str, lanes: Mapping[str, Iterable[Job[Any]]], batch_size: int, concurrency: Mapping[str, int]
) -> str | None:
    """A warning when a job of one lane sizes a function that other lanes share to over five minutes and
    at least twice what they need: a crashed invocation hides their records too for six times that
    (the queues' visibility). ``None`` when no lane is stretched so.

    Example:
        >>> from pydantic import BaseModel
        >>> from jobframework.jobs import JobRegistry, job
        >>> class P(BaseModel):
        ...     n: int
        >>> reg = JobRegistry()
        >>> @job("w.nightly", registry=reg, timeout=600)
        ... def nightly(p: P) -> None: ...
        >>> @job("w.email", registry=reg, priority="high")
        ... def email(p: P) -> None: ...
        >>> print(stretched_lanes("shared", {"high": [email], "default": [nightly]}, 10, {}))
        the default lane (w.nightly, timeout=600) sizes the shared consumer at 900 s, so the high queue it \
also reads hides a crashed batch's records for 90 minutes (13 minutes for its own jobs, which need 130 s of \
function time): give w.nightly a function of its own (profile="io", or "cpu" for one at a time) or a \
shorter timeout
    """
    by_lane = {lane: list(jobs) for lane, jobs in lanes.items()}
    timeout = consumer_timeout(by_lane, batch_size, concurrency)
    if len(by_lane) < 2 or timeout < 300:
        return None
    own = {lane: consumer_timeout({lane: jobs}, batch_size, concurrency) for lane, jobs in by_lane.items()}
    sizing = max(own, key=lambda lane: own[lane])
    stretched = [lane for lane in by_lane if lane != sizing and 2 * own[lane] <= timeout]
    if not stretched or not by_lane[sizing]:
        return None
    longest = max(by_lane[sizing], key=lambda j: j.timeout)
    many, need = len(stretched) > 1, max(own[lane] for lane in stretched)
    names = ", ".join(stretched[:-1]) + " and " + stretched[-1] if many else stretched[0]
    queues = f"{names} queue{'s' if many else ''} it also reads hide{'' if many else 's'}"
    in_order = ", a batch of which runs one record after another" if sizing.endswith("-fifo") else ""
    return (
        f"the {sizing} lane ({longest.name}, timeout={longest.timeout:g}{in_order}) sizes the {function} "
        f"consumer at {timeout} s, so the {queues} a crashed batch's records for {6 * timeout // 60} minutes "
        f"({6 * need // 60} minutes for {'their' if many else 'its'} own jobs, which need {need} s of "
        "function time): "
        f'give {longest.name} a function of its own (profile="io", or "cpu" for one at a time) or a '
        "shorter timeout"
    )


def overlong_batches(
    lanes: Mapping[str, Iterable[Job[Any]]], batch_size: int, concurrency: Mapping[str, int]
) -> list[str]:
    """A warning for each lane whose batch runs in turns (a ``cpu`` lane's records one at a time, a FIFO
    lane's group in order, a ``record_concurrency``) and, its longest job run to its timeout in every
    turn, needs more than a Lambda function may run: an invocation runs the records it has time for
    and hands the rest back unstarted (no attempt spent, but each a receive and a wait). A lane with a
    batched job (its plain jobs' batches are sized by it) and a job longer than Lambda allows (the
    construct refuses it outside a container lane) are left out.

    Example:
        >>> from pydantic import BaseModel
        >>> from jobframework.jobs import JobRegistry, job
        >>> class P(BaseModel):
        ...     n: int
        >>> reg = JobRegistry()
        >>> @job("w.render", registry=reg, profile="cpu", timeout=300)
        ... def render(p: P) -> None: ...
        >>> print(overlong_batches({"default-cpu": [render]}, 10, {})[0])
        the default-cpu lane (w.render, timeout=300) runs a batch of 10 records one at a time: up to \
3,000 s, where a Lambda function has 890 s (900 less the framework's 10), so an invocation runs 2 of \
them at worst and hands the rest back unstarted: give w.render a shorter timeout, or make batch_size 2 \
(TopologySettings: every lane's batches), or give the lane record_concurrency={'default-cpu': 5} \
(records at once: they share the function's vCPUs), or container_lanes=['default-cpu']
    """
    found = []
    usable = MAX_TIMEOUT - FRAMEWORK_SECONDS
    for lane, routed in lanes.items():
        jobs = list(routed)
        if not jobs or any(j.batch is not None for j in jobs):
            continue
        longest = max(jobs, key=lambda j: j.timeout)
        fifo = lane.endswith("-fifo")
        size = lane_batch(lane, batch_size)
        together = at_once(lane, size, concurrency.get(lane))
        turns = -(-size // together)  # (one after another: a quick lane's first round is not counted)
        if turns == 1 or longest.timeout * turns <= usable or longest.timeout > usable:
            continue
        fit = int(usable // longest.timeout)  # (turns of the longest job an invocation has time for)
        runs = fit * together
        way = "one at a time" if together == 1 else f"{together} at a time"
        fixes = [f"give {longest.name} a shorter timeout"]
        fixes.append(f"make batch_size {runs} (TopologySettings: every lane's batches)")
        needed = -(-size // fit)  # (records at once for the whole batch in those turns)
        if not fifo and needed <= POOL_THREADS + 1:  # (a FIFO lane's group runs in order whatever it says)
            on_cpu = " (records at once: they share the function's vCPUs)" if lane.endswith("-cpu") else ""
            fixes.append(f"give the lane record_concurrency={{{lane!r}: {needed}}}{on_cpu}")
        fixes.append(f"container_lanes=[{lane!r}]")
        found.append(
            f"the {lane} lane ({longest.name}, timeout={longest.timeout:g}) runs a batch of {size} records "
            f"{way}: up to {longest.timeout * turns:,.0f} s, where a Lambda function has {usable} s "
            f"({MAX_TIMEOUT} less the framework's {FRAMEWORK_SECONDS}), so an invocation runs {runs} of them "
            f"at worst and hands the rest back unstarted: {', or '.join(fixes)}"
        )
    return found
