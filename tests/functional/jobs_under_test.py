"""Jobs the functional tests run, in a registry of their own."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

from pydantic import BaseModel, Field

from jobframework import JobContext, PermanentError, RetryableError, RetryPolicy, job
from jobframework.jobs import JobRegistry

registry = JobRegistry()
calls: Counter[str] = Counter()
seen: list[dict[str, Any]] = []


class Work(BaseModel):
    name: str
    fail_times: int = Field(default=0, ge=0)
    delay: float | None = None


@job("t.ok", registry=registry, track=True, priority="high")
def ok(work: Work, ctx: JobContext) -> None:
    calls[work.name] += 1
    seen.append({"name": work.name, "traceparent": ctx.traceparent, "trace_id": ctx.trace_id, "ctx": ctx})


@job("t.lean", registry=registry, priority="high", idempotent=False)
def lean(work: Work) -> None:
    """Untracked and not idempotent: its success path writes nothing to DynamoDB."""
    calls[work.name] += 1


@job(
    "t.flaky",
    registry=registry,
    track=True,
    retry=RetryPolicy(max_attempts=4, base_delay=2, max_delay=10, jitter="none"),
)
def flaky(work: Work, ctx: JobContext) -> None:
    calls[work.name] += 1
    if ctx.attempt <= work.fail_times:
        if work.delay is not None:
            raise RetryableError("rate limited", delay=work.delay)
        raise ConnectionError("downstream reset the connection")


class Rejected(Exception):
    """A downstream's 400 (a client error no retry mends), declared permanent= by the job."""


class UpstreamStatus(Exception):
    """An HTTP client's one error for every status (httpx's HTTPStatusError): 4xx are permanent."""

    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


def client_error(exc: BaseException) -> bool:
    return isinstance(exc, UpstreamStatus) and 400 <= exc.status < 500


@job("t.declined", registry=registry, track=True, priority="high", permanent=(Rejected, client_error))
def declined(work: Work) -> None:
    calls[work.name] += 1
    if work.name.startswith("declared"):
        raise Rejected(f"{work.name}: 400 Bad Request")
    if work.name.startswith("status-"):
        raise UpstreamStatus(int(work.name.removeprefix("status-")))
    raise PermanentError(f"{work.name} declined")


@job(
    "t.broken",
    registry=registry,
    track=True,
    retry=RetryPolicy(max_attempts=2, base_delay=0, max_delay=1, jitter="none"),
)
def broken(work: Work) -> None:
    calls[work.name] += 1
    raise RuntimeError(f"{work.name} always fails")


@job("t.keyed", registry=registry, track=True, priority="high", key=lambda w: f"work:{w.name}")
def keyed(work: Work) -> None:
    calls[work.name] += 1


@job("t.slow", registry=registry, track=True, timeout=30)
def slow(work: Work) -> None:
    calls[work.name] += 1


child_client: list[Any] = []


@job("t.parent", registry=registry, track=True)
def parent(work: Work, ctx: JobContext) -> None:
    """Enqueues a child job from inside a job (the trace must continue)."""
    seen.append({"name": work.name, "traceparent": ctx.traceparent})
    child_client[0].enqueue("t.ok", Work(name=f"{work.name}-child"))


@job("t.exits", registry=registry, track=True, priority="high")
def exits(work: Work) -> None:
    """A job whose library calls sys.exit: a failure of this job, not of the batch."""
    calls[work.name] += 1
    raise SystemExit(2)


@job(
    "t.result",
    registry=registry,
    track=True,
    priority="high",
    retry=RetryPolicy(max_attempts=3, base_delay=1, max_delay=1, jitter="none"),
)
def result(work: Work, ctx: JobContext) -> dict[str, Any]:
    """Tracked and idempotent, keyed by its id: its status is read from its idempotency record."""
    calls[work.name] += 1
    if work.name.startswith("refused"):  # dead-lettered at once, fail_times runs
        if calls[work.name] <= work.fail_times:
            raise PermanentError("the downstream refused it")
    elif ctx.attempt <= work.fail_times:
        raise ConnectionError("downstream reset the connection")
    return {"name": work.name, "attempt": ctx.attempt}


class Nap(BaseModel):
    name: str
    seconds: float


@job("t.nap", registry=registry, track=True, priority="high")
def nap(work: Nap) -> str:
    """Tracked and idempotent: takes its time (a run another delivery of it finds in progress)."""
    calls[work.name] += 1
    time.sleep(work.seconds)
    return work.name


released = threading.Event()
"""Set by a test to let :func:`second_waits`'s waiting run end."""


@job("t.second_waits", registry=registry, track=True, priority="high", idempotent=False)
def second_waits(work: Work) -> None:
    """Tracked, not idempotent: the first of a batch's runs ends at once, a later one waits for
    :data:`released` (a slow neighbour, whichever record the batch runs first)."""
    calls[work.name] += 1
    if sum(calls.values()) > 1:
        assert released.wait(30), "the test never released the waiting run"
