"""The chaos run's workload: which jobs fail how, and the job itself.

Pure and importable by the test; :mod:`tests.e2e.chaos_jobs` registers the job into the
default registry inside the ``jf worker`` subprocess only.

The job's effect is what a user is told to write when the effect must happen once: a
conditional write keyed by the job key. Here the ledger is a directory and the write is
``link(2)`` of a file holding the writer's pid to ``<ledger>/<n>``, which fails atomically
when the name exists (DynamoDB's ``attribute_not_exists`` would do the same, at one more
request per job to the embedded AWS, which is the run's bottleneck). The
framework runs a job at least once and never again once its idempotency record says
COMPLETED; a worker killed between the effect and that record runs it again after the
in-progress record expires, and the conditional write then detects the replay.

A quarter of the jobs are ``async def`` (:data:`ASYNC_JOB_NAME`, same body, awaited on the worker's
event loop), and a third of the transient failures are not ``Exception``s: ``KeyboardInterrupt`` from
sync jobs, ``asyncio.CancelledError`` from async ones (each is that job's failure, retried).

Every step is also appended to an events file (one ``write`` with ``O_APPEND`` per line,
so a SIGKILL leaves whole lines): ``<event> <n> <attempt> <pid>`` with event one of
``run``, ``transient``, ``permanent``, ``effect``, ``replay``, ``pause``.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from jobframework import JobContext, PermanentError, RetryPolicy, job
from jobframework.jobs import Job, JobRegistry

JOB_NAME = "chaos.apply"
ASYNC_JOB_NAME = "chaos.apply_async"
ENV_LEDGER = "JF_CHAOS_LEDGER"
"""The ledger directory: one file per applied job, named by its number, holding the pid."""
ENV_EVENTS = "JF_CHAOS_EVENTS"
ENV_PAUSE = "JF_CHAOS_PAUSE"
"""Comma-separated job numbers that wait (to be SIGKILLed) right after their effect."""
PAUSE_SECONDS = 60.0
MAX_ATTEMPTS = 6
"""Transient failures take at most two attempts; the rest absorbs redeliveries after kills."""


def key_of(n: int) -> str:
    return f"chaos:{n}"


def _mix(n: int) -> int:
    """A deterministic scramble of the job number (Knuth's multiplicative hash)."""
    return (n * 2654435761) % 2**32


def is_permanent(n: int) -> bool:
    """1 % of the jobs fail for good."""
    return _mix(n) % 100 == 0


def transient_failures(n: int) -> int:
    """How many first attempts of job ``n`` fail transiently: 0 for 80 %, else 1 or 2."""
    if is_permanent(n) or (_mix(n) >> 8) % 5 != 0:
        return 0
    return 1 + (_mix(n) >> 16) % 2


def is_duplicated(n: int) -> bool:
    """5 % of the jobs are sent twice (same id, same key)."""
    return (_mix(n) >> 20) % 20 == 0


def is_async(n: int) -> bool:
    """A quarter of the jobs are async def."""
    return (_mix(n) >> 24) % 4 == 0


def job_name(n: int) -> str:
    return ASYNC_JOB_NAME if is_async(n) else JOB_NAME


def _transient_error(n: int, attempt: int) -> BaseException:
    """A third of the transient failures raise a BaseException (not an Exception)."""
    if n % 3 == 0:
        return asyncio.CancelledError(f"job {n}: leaked cancellation") if is_async(n) else KeyboardInterrupt()
    return ConnectionError(f"job {n}: downstream unavailable on attempt {attempt}")


class Work(BaseModel):
    n: int


def _apply_once(n: int, attempt: int) -> bool:
    """Write job ``n``'s ledger entry unless it exists; ``False`` when it did (a replay)."""
    ledger = Path(os.environ[ENV_LEDGER])
    draft = ledger / f".draft-{os.getpid()}-{threading.get_ident()}"
    draft.write_text(f"{os.getpid()} {attempt}\n")
    try:
        os.link(draft, ledger / str(n))
    except FileExistsError:
        return False
    finally:
        draft.unlink()
    return True


def _event(kind: str, n: int, attempt: int) -> None:
    line = f"{kind} {n} {attempt} {os.getpid()}\n".encode()
    fd = os.open(os.environ[ENV_EVENTS], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def _paused() -> set[int]:
    return {int(x) for x in os.environ.get(ENV_PAUSE, "").split(",") if x.strip()}


def apply(work: Work, ctx: JobContext) -> dict[str, Any]:
    """Apply job ``n``'s effect once: a conditional write of its number into the ledger."""
    n, attempt = work.n, ctx.attempt
    _event("run", n, attempt)
    if is_permanent(n):
        _event("permanent", n, attempt)
        raise PermanentError(f"job {n} can never succeed")
    if attempt <= transient_failures(n):
        _event("transient", n, attempt)
        raise _transient_error(n, attempt)
    if not _apply_once(n, attempt):
        _event("replay", n, attempt)  # applied before, by a delivery that never recorded completion
        return {"replayed": n}
    _event("effect", n, attempt)
    if n in _paused():
        _event("pause", n, attempt)  # the test SIGKILLs the worker now: after the effect, before COMPLETED
        time.sleep(PAUSE_SECONDS)
    return {"applied": n}


async def apply_async(work: Work, ctx: JobContext) -> dict[str, Any]:
    """:func:`apply` as an async job (never paused: a sleep would hold the process's event loop)."""
    await asyncio.sleep(0)
    return apply(work, ctx)


def register(registry: JobRegistry | None = None) -> Job[Any]:
    """Declare the chaos jobs in ``registry`` (the default registry when ``None``)."""
    for name, fn in ((ASYNC_JOB_NAME, apply_async), (JOB_NAME, apply)):
        declared = job(
            name,
            priority="default",
            retry=RetryPolicy(max_attempts=MAX_ATTEMPTS, base_delay=0.5, max_delay=2.0),
            key=lambda w: key_of(w.n),
            timeout=10,
            registry=registry,
        )(fn)
    return declared
