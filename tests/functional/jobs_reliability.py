"""Jobs that misbehave, for the reliability tests (issue 12): async, BaseException, overruns, odd errors."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from typing import Any

from pydantic import BaseModel

from jobframework import JobContext, PermanentError, RetryPolicy, Throttled, job
from jobframework.jobs import BatchOptions, JobRegistry

registry = JobRegistry()
effects: Counter[str] = Counter()
attempts_seen: list[tuple[str, int]] = []
loops: list[int] = []
started = threading.Event()

TWO = RetryPolicy(max_attempts=2, base_delay=0, max_delay=1, jitter="none")


class Item(BaseModel):
    name: str
    fail: bool = False
    seconds: float = 0.0


class Unprintable(Exception):
    """An exception whose text cannot be had: ``__str__`` raises."""

    def __str__(self) -> str:
        raise RuntimeError("no text")


class UnprintablePermanent(PermanentError):
    def __str__(self) -> str:
        raise ValueError("no text either")


@job("r.async", registry=registry, track=True, priority="high", retry=TWO)
async def run_async(item: Item, ctx: JobContext) -> dict[str, Any]:
    await asyncio.sleep(0.01)
    loops.append(id(asyncio.get_running_loop()))
    attempts_seen.append((item.name, ctx.attempt))
    if item.fail:
        raise ConnectionError(f"{item.name}: async downstream unavailable")
    effects[item.name] += 1
    return {"awaited": item.name}


@job("r.cancelled", registry=registry, track=True, priority="high", retry=TWO, idempotent=False)
async def cancelled(item: Item) -> None:
    effects[item.name] += 1
    raise asyncio.CancelledError("leaked from a cancelled inner task")


@job("r.interrupt", registry=registry, track=True, priority="high", retry=TWO, idempotent=False)
def interrupt(item: Item) -> None:
    effects[item.name] += 1
    raise KeyboardInterrupt


@job("r.genexit", registry=registry, track=True, priority="high", retry=TWO, idempotent=False)
def genexit(item: Item) -> None:
    effects[item.name] += 1
    raise GeneratorExit


@job("r.plain", registry=registry, track=True, priority="high", idempotent=False)
def plain(item: Item, ctx: JobContext) -> None:
    """Not idempotent: a second run would show as a second effect."""
    effects[item.name] += 1
    attempts_seen.append((item.name, ctx.attempt))


@job("r.permanent", registry=registry, track=True, priority="high")
def permanent(item: Item) -> None:
    effects[item.name] += 1
    raise PermanentError(f"{item.name} refused")


@job("r.unprintable", registry=registry, track=True, priority="high", retry=TWO)
def unprintable(item: Item) -> None:
    effects[item.name] += 1
    raise UnprintablePermanent() if item.fail else Unprintable()


@job("r.flaky", registry=registry, track=True, priority="high", retry=TWO, timeout=5)
def flaky(item: Item, ctx: JobContext) -> None:
    attempts_seen.append((item.name, ctx.attempt))
    if item.fail:
        raise ConnectionError(f"{item.name} failed")
    effects[item.name] += 1


@job("r.long", registry=registry, track=True, priority="high", timeout=1)
def long(item: Item) -> None:
    """Overruns its 1 s timeout by ``seconds``."""
    started.set()
    time.sleep(item.seconds)
    effects[item.name] += 1


@job(
    "r.batched",
    registry=registry,
    track=True,
    priority="low",
    batch=BatchOptions(max_size=10, max_wait=0),
    retry=TWO,
)
def batched(items: list[Item]) -> list[Any]:
    outcomes: list[Any] = []
    for item in items:
        effects[item.name] += 1
        if item.name.startswith("unprintable"):
            outcomes.append(Unprintable())
        elif item.name.startswith("refused"):
            outcomes.append(UnprintablePermanent())
        elif item.name.startswith("interrupted"):
            outcomes.append(KeyboardInterrupt())
        elif item.name.startswith("throttled") and effects[item.name] == 1:
            outcomes.append(Throttled("429 from the printer", delay=1))
        else:
            outcomes.append(item.name)
    return outcomes
