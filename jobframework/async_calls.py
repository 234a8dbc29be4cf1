"""``await``-able forms of the client's calls, for ``async def`` web handlers (FastAPI, Starlette).

The client's calls block on their AWS requests: called straight from an ``async def`` handler they
stall its event loop (a web API trial measured a 1.3 s stall of every other request while 40 posts
enqueued). Each ``a...`` form here runs the blocking call on a worker thread (``asyncio.to_thread``),
so the loop keeps serving; the calling context goes along (the default client a test set, the trace
being continued). boto3's clients are thread-safe, so one client serves every handler.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from pydantic import BaseModel
    from typing_extensions import Unpack

    from jobframework.jobs import Job
    from jobframework.outgoing import EnqueueOptions, EnqueueRequest, EnqueueResult
    from jobframework.status import JobStatus


_R = TypeVar("_R")


class _Blocking(Protocol):
    def enqueue(
        self, job: Job[Any] | str, payload: BaseModel | dict[str, Any], **options: Unpack[EnqueueOptions]
    ) -> EnqueueResult: ...

    def enqueue_many(
        self, requests: Iterable[EnqueueRequest], *, raise_on_error: bool = False
    ) -> list[EnqueueResult]: ...

    def status(self, job_id: str) -> JobStatus | None: ...

    def wait(self, job_id: str, *, timeout: float = 60.0, every: float = 1.0) -> JobStatus: ...


async def in_thread(fn: Callable[..., _R], *args: Any) -> _R:
    """``fn(*args)`` on a worker thread, with the caller's context."""
    import asyncio  # (not at import: the consumer's cold start imports the client module)

    return await asyncio.to_thread(fn, *args)


class AsyncCalls:
    """What :class:`~jobframework.client.JobClient` adds for ``async def`` code: ``aenqueue``,
    ``aenqueue_many``, ``astatus`` and ``await_job`` (``wait``), ``await``-able and raising as their
    blocking forms do."""

    async def aenqueue(
        self: _Blocking,
        job: Job[Any] | str,
        payload: BaseModel | dict[str, Any],
        **options: Unpack[EnqueueOptions],
    ) -> EnqueueResult:
        """:meth:`JobClient.enqueue` on a worker thread."""
        return await in_thread(lambda: self.enqueue(job, payload, **options))

    async def aenqueue_many(
        self: _Blocking, requests: Iterable[EnqueueRequest], *, raise_on_error: bool = False
    ) -> list[EnqueueResult]:
        """:meth:`JobClient.enqueue_many` on a worker thread (the requests are read here, first)."""
        given = list(requests)
        return await in_thread(lambda: self.enqueue_many(given, raise_on_error=raise_on_error))

    async def astatus(self: _Blocking, job_id: str) -> JobStatus | None:
        """:meth:`JobClient.status` on a worker thread."""
        return await in_thread(self.status, job_id)

    async def await_job(
        self: _Blocking, job_id: str, *, timeout: float = 60.0, every: float = 1.0
    ) -> JobStatus:
        """:meth:`JobClient.wait` on a worker thread: the job's status once it ended."""
        return await in_thread(lambda: self.wait(job_id, timeout=timeout, every=every))
