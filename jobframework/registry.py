"""The registry: jobs by name (``@job`` registers into :data:`jobframework.jobs.registry` by default)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from jobframework.errors import ConfigurationError, DuplicateJobError, UnknownJobError

if TYPE_CHECKING:
    from jobframework.jobs import Job


class JobRegistry:
    """Jobs by name. The consumer runs only registered jobs."""

    registrations = 0
    """Jobs registered in any registry of this process (a module that registers none is warned of)."""

    def __init__(self) -> None:
        self._jobs: dict[str, Job[Any]] = {}

    def register(self, job_: Job[Any]) -> None:
        existing = self._jobs.get(job_.name)
        if existing is not None and existing.fn is not job_.fn:
            raise DuplicateJobError(
                f"a job named {job_.name!r} is already registered by "
                f"{existing.fn.__module__}.{existing.fn.__qualname__}; job names must be unique"
            )
        if job_.flow.limit_group is not None:
            self._check_group(job_)
        self._jobs[job_.name] = job_
        JobRegistry.registrations += 1

    def _check_group(self, job_: Job[Any]) -> None:
        """Refuse a job whose limits differ from those of its ``limit_group``'s other jobs (one bucket
        cannot have two rates; a key function on one job only would count apart, in buckets of its own)."""
        flow = job_.flow

        def shape(j: Job[Any]) -> tuple[object, ...]:
            rate = (j.flow.rate.limit, j.flow.rate.per) if j.flow.rate is not None else None
            keys = (j.flow.rate_key is not None, j.flow.concurrency_key is not None)
            return rate, j.flow.concurrency, keys

        for other in self._jobs.values():
            if other.name != job_.name and other.flow.limit_group == flow.limit_group:
                if shape(other) != shape(job_):
                    raise ConfigurationError(
                        f"job {job_.name}: limit_group={flow.limit_group!r} is shared with {other.name}, "
                        f"whose limits differ: {job_.name} has {_limits_text(job_)}, {other.name} has "
                        f"{_limits_text(other)}; give every job of a group the same rate= (in the same "
                        "unit), concurrency= and key functions"
                    )
                return

    def get(self, name: str) -> Job[Any]:
        try:
            return self._jobs[name]
        except KeyError:
            raise UnknownJobError(f"no job named {name!r} is registered") from None

    def find(self, name: str) -> Job[Any] | None:
        return self._jobs.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._jobs

    def __iter__(self) -> Iterator[Job[Any]]:
        return iter(sorted(self._jobs.values(), key=lambda j: j.name))

    def __len__(self) -> int:
        return len(self._jobs)

    def clear(self) -> None:
        self._jobs.clear()


def _limits_text(job_: Job[Any]) -> str:
    """``rate='2/second', concurrency=none, rate_key set`` (a rate as written, in its unit)."""
    flow = job_.flow
    units = {1.0: "second", 60.0: "minute", 3600.0: "hour"}
    rate = "none" if flow.rate is None else f"'{flow.rate.limit:g}/{units.get(flow.rate.per, flow.rate.per)}'"
    keys = [
        name for name, fn in (("rate_key", flow.rate_key), ("concurrency_key", flow.concurrency_key)) if fn
    ]
    return f"rate={rate}, concurrency={flow.concurrency or 'none'}" + "".join(f", {k} set" for k in keys)
