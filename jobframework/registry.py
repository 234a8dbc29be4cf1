"""The registry: jobs by name (``@job`` registers into :data:`jobframework.jobs.registry` by default)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from jobframework.errors import DuplicateJobError, UnknownJobError

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
        self._jobs[job_.name] = job_
        JobRegistry.registrations += 1

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
