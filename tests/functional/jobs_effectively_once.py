"""Jobs of the effectively-once tests (idempotency, dedup, budget, status, versions, signing, S3)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

from jobframework import JobContext, RetryPolicy, job
from jobframework.jobs import JobRegistry, Schedule

registry = JobRegistry()
effects: Counter[str] = Counter()
"""How many times each job's effect happened, by payload name."""
observed: list[Any] = []
"""What a job saw while running (e.g. its own status), for the status test."""
while_running: list[Callable[[JobContext], Any]] = []
"""Called inside ``eo.effect`` before the effect; a test puts a probe here."""

QUICK = RetryPolicy(max_attempts=3, base_delay=0, max_delay=1, jitter="none")


class Item(BaseModel):
    name: str
    fail_times: int = Field(default=0, ge=0)


@job("eo.effect", registry=registry, track=True, priority="high", retry=QUICK)
def effect(item: Item, ctx: JobContext) -> dict[str, Any]:
    """Fails its first ``fail_times`` attempts (before the effect), then applies the effect once."""
    for probe in while_running:
        observed.append(probe(ctx))
    if ctx.attempt <= item.fail_times:
        raise ConnectionError(f"{item.name}: downstream unavailable")
    effects[item.name] += 1
    return {"applied": item.name}


@job(
    "eo.dedup",
    registry=registry,
    track=True,
    priority="high",
    key=lambda i: f"order:{i.name}",
    dedup_window=60,
)
def dedup(item: Item) -> None:
    effects[item.name] += 1


@job(
    "eo.outage",
    registry=registry,
    track=True,
    retry=RetryPolicy(max_attempts=5, base_delay=0, max_delay=1, jitter="none"),
)
def outage(item: Item) -> None:
    """Every attempt fails: the downstream is down."""
    effects[item.name] += 1
    raise ConnectionError("downstream is down")


hang_next: list[str] = []
"""Names whose next ``eo.killable`` attempt hangs (until its process is killed)."""


@job("eo.killable", registry=registry, track=True, priority="high", timeout=1)
def killable(item: Item) -> None:
    if item.name in hang_next:
        hang_next.remove(item.name)
        print("hanging", flush=True)
        time.sleep(600)
    effects[item.name] += 1


class Person(BaseModel):
    """Version 2 of the payload: ``name`` was split into ``first`` and ``last``."""

    first: str
    last: str


def _split_name(v1: dict[str, Any]) -> dict[str, Any]:
    first, _, last = str(v1["name"]).partition(" ")
    return {"first": first, "last": last}


@job("eo.greet", registry=registry, track=True, priority="high", version=2, upgrade={1: _split_name})
def greet(person: Person) -> None:
    effects[f"{person.first}/{person.last}"] += 1


class Blob(BaseModel):
    name: str
    data: str


@job("eo.blob", registry=registry, track=True, priority="high", retry=QUICK)
def blob(b: Blob) -> int:
    effects[b.name] += 1
    observed.append(len(b.data))
    if b.name.startswith("reject"):
        from jobframework import PermanentError

        raise PermanentError("rejected")
    return len(b.data)


@job(
    "eo.tick",
    registry=registry,
    track=True,
    priority="high",
    schedule=Schedule("rate(1 hour)", payload={"name": "hourly"}),
)
def tick(item: Item) -> None:
    """A recurring job: its schedule sends the same payload every hour."""
    effects[f"tick:{item.name}"] += 1
