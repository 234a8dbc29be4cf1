"""What the emulator polls: a queue and how (:class:`QueuePoller`), the pollers of a topology's lanes,
how many worker processes they need, the weighted choice between queues, and batch counts."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from jobframework.jobs import Priority
from jobframework.topology import POLL_WEIGHT, RuntimeConfig, Topology


@dataclass(frozen=True, slots=True)
class QueuePoller:
    """How one queue is polled: the event source mapping's settings, from the topology."""

    priority: Priority
    url: str
    arn: str
    batch_size: int
    batching_window: float
    max_concurrency: int
    weight: int
    function_name: str
    timeout: float
    lane: str = ""
    """The queue's lane (``high``, ``high-cpu``); the priority's name when empty."""

    @property
    def name(self) -> str:
        return self.lane or self.priority.value


@dataclass(slots=True)
class BatchStats:
    """Counters of the emulator (for the demo, the worker's log and tests)."""

    batches: int = 0
    records: int = 0
    deleted: int = 0
    failed: int = 0
    invocation_errors: int = 0
    by_priority: dict[str, int] = field(default_factory=dict)


class WeightedPicker:
    """Smooth weighted round robin over the queues that are eligible now.

    With weights 6:3:2:1 and every queue busy, twelve picks give critical 6, high 3,
    default 2 and low 1, interleaved (never six criticals and then the rest).

    Example:
        >>> picker = WeightedPicker({"a": 2, "b": 1})
        >>> [picker.pick(["a", "b"]) for _ in range(3)]
        ['a', 'b', 'a']
    """

    def __init__(self, weights: Mapping[str, int]) -> None:
        self.weights = dict(weights)
        self._current = dict.fromkeys(self.weights, 0)

    def pick(self, eligible: Iterable[str]) -> str | None:
        names = [n for n in eligible if self.weights.get(n, 0) > 0]
        if not names:
            return None
        total = sum(self.weights[n] for n in names)
        for n in names:
            self._current[n] += self.weights[n]
        best = max(names, key=lambda n: self._current[n])
        self._current[best] -= total
        return best


def pollers_for(
    config: RuntimeConfig,
    topology: Topology,
    priorities: Iterable[Priority | str] | None = None,
    *,
    weights: Mapping[Priority, int] | None = None,
    region: str | None = None,
    exact: bool = False,
) -> list[QueuePoller]:
    """The pollers of the topology's queues that ``config`` has URLs for: all, or those named in
    ``priorities`` (a priority names its plain lane and its profile and FIFO lanes, e.g. ``high``,
    ``high-cpu`` and ``high-fifo``; a lane such as ``high-cpu`` names itself; with ``exact`` every
    name is a lane, so ``high`` is the plain lane only)."""
    names = {str(getattr(p, "value", p)) for p in priorities} if priorities is not None else None
    result = []
    for spec in topology.queues:
        wanted = names is None or spec.lane in names or (not exact and spec.priority.value in names)
        if not wanted or spec.lane not in config.queues:
            continue
        url = config.endpoints(spec.lane).url
        consumer = topology.consumer(spec.consumer)
        result.append(
            QueuePoller(
                priority=spec.priority,
                url=url,
                arn=queue_arn_from_url(url, region or config.region or "us-east-1"),
                batch_size=spec.batch_size,
                batching_window=float(spec.batching_window),
                max_concurrency=spec.max_concurrency,
                weight=(weights or POLL_WEIGHT).get(spec.priority, 1),
                function_name=consumer.function_name,
                # Lambda stops at the function's timeout; a worker gives the lane's longest job its time.
                timeout=float(max(consumer.timeout, spec.longest_job_timeout + 10)),
                lane=spec.lane,
            )
        )
    return result


def worker_processes(pollers: Iterable[QueuePoller], topology: Topology, requested: int | None = None) -> int:
    """How many processes ``jf worker`` runs: as asked, else one per core when it polls a ``cpu`` lane
    (Python threads share one core), else one (``io`` lanes get many threads instead)."""
    if requested is not None:
        if requested < 1:
            raise ValueError("processes must be at least 1")
        return requested
    cpu = any(topology.queue(p.name).profile == "cpu" for p in pollers)
    return max(1, os.cpu_count() or 1) if cpu else 1


def queue_arn_from_url(url: str, region: str) -> str:
    """``https://sqs.us-east-1.amazonaws.com/123456789012/jf-dev-high`` -> the queue's ARN.

    Example:
        >>> queue_arn_from_url("http://127.0.0.1:5000/123456789012/jf-dev-high", "us-east-1")
        'arn:aws:sqs:us-east-1:123456789012:jf-dev-high'
    """
    from jobframework.delays import queue_arn

    return queue_arn(url, region)
