"""The heartbeat's thread: quick jobs come and go without waking it; a hold due soon wakes it."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import BaseModel

from jobframework.envelope import Envelope
from jobframework.heartbeat import (
    IDLE_SECONDS,
    OVERRUN_GRACE_SECONDS,
    PROMOTE_AHEAD,
    Heartbeat,
    Hold,
    period_for,
)
from jobframework.holding import Held
from jobframework.jobs import JobRegistry
from jobframework.jobs import job as job_of


@pytest.fixture
def beating() -> Any:
    """A fresh heartbeat whose thread runs and waits, having seen no hold, and the count of its
    wake-ups by a hold."""
    hb = Heartbeat()
    with hb._wake:
        hb._ensure_thread()  # started with no hold (a warm-up hold could be seen, and waited on)
        hb._thread_seen = time.monotonic()
    deadline = time.monotonic() + 5
    while hb._wakes_at == float("-inf") and time.monotonic() < deadline:  # until it waits
        time.sleep(0.01)
    wakes: list[None] = []
    notify = hb._wake.notify

    def counted(n: int = 1) -> None:
        wakes.append(None)
        notify(n)

    hb._wake.notify = counted  # type: ignore[method-assign]
    return hb, wakes


def test_quick_jobs_do_not_wake_the_thread(beating):
    hb, wakes = beating
    for n in range(200):
        hb.leave(
            hb.enter(
                f"job {n}",
                timeout=30,
                key_lapses_in=31,
                remaining=900,
                extend_key=None,
                extend_visibility=None,
            )
        )
    assert wakes == []


def test_a_hold_due_before_the_idle_wake_wakes_the_thread_and_gets_its_beat(beating):
    hb, wakes = beating
    extended: list[float] = []
    held = hb.enter(
        "short",
        timeout=0.5,
        key_lapses_in=0.3,
        remaining=900,
        extend_key=extended.append,
        extend_visibility=None,
    )
    try:
        assert wakes  # due in under IDLE_SECONDS: the sleeping thread is woken for it
        deadline = time.monotonic() + IDLE_SECONDS + 5
        while not extended and time.monotonic() < deadline:
            time.sleep(0.01)
        assert extended and held.beats >= 1
    finally:
        hb.leave(held)


def test_a_child_forked_while_a_job_is_held_beats_its_own_jobs(beating):
    hb, _wakes = beating
    parents = hb.enter(
        "parent's job", timeout=30, key_lapses_in=31, remaining=900, extend_key=None, extend_visibility=None
    )
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a job of its own, due at once, must be beaten
        beaten = threading.Event()
        hb.enter(
            "child's job",
            timeout=0.5,
            key_lapses_in=0.3,
            remaining=900,
            extend_key=lambda _at: beaten.set(),
            extend_visibility=None,
        )
        os.write(write, b"1" if beaten.wait(5) else b"0")
        os._exit(0)
    try:
        os.close(write)
        assert os.read(read, 1) == b"1"
    finally:
        os.waitpid(pid, 0)
        os.close(read)
        hb.leave(parents)


class _Job:
    """A watched job (a HoldSource): its hold is made only when the heartbeat needs it."""

    def __init__(self, hb: Heartbeat, timeout: float, lapses_in: float) -> None:
        self.started = time.monotonic()
        self.timeout, self.lapses_in = timeout, lapses_in
        self.made: list[float] = []
        self.extended: list[int] = []

    def due(self) -> float:
        return self.started + self.lapses_in - period_for(self.timeout)

    def hold(self) -> Hold:
        self.made.append(time.monotonic())
        time.sleep(0)  # (a thread switch here, where one ending job's unwatch would race the thread's hold)
        return Hold(
            "watched",
            self.timeout,
            self.started,
            float("inf"),
            self.started + self.lapses_in,
            None,
            self.extended.append,
        )


def test_a_watched_job_that_ends_before_its_beat_is_never_held(beating):
    hb, wakes = beating
    jobs = [_Job(hb, timeout=60, lapses_in=61) for _ in range(100)]  # first beat due in 31 s
    for job in jobs:
        hb.watch(job, job.due())
        hb.unwatch(job)
    assert all(not job.made for job in jobs) and wakes == []
    assert hb._holds == {} and hb._pending == {}


def test_a_watched_job_is_held_before_its_first_beat_and_gets_it(beating):
    hb, _wakes = beating
    job = _Job(hb, timeout=6, lapses_in=PROMOTE_AHEAD + 3.5)  # due in PROMOTE_AHEAD + 0.5 s
    hb.watch(job, job.due())
    try:
        assert not job.made and id(job) in hb._pending  # not held yet
        deadline = time.monotonic() + PROMOTE_AHEAD + IDLE_SECONDS + 5
        while not job.extended and time.monotonic() < deadline:
            time.sleep(0.02)
        assert job.made and job.made[0] <= job.due(), "the thread made the hold after its beat was due"
        assert job.extended, "the held job got no beat"
    finally:
        hb.unwatch(job)
    assert hb._holds == {} and hb._pending == {}


def test_no_hold_outlives_its_job_when_the_thread_holds_it_as_it_ends(beating):
    """A job that ends while the thread promotes it: whichever comes first, nothing stays held (a
    hold left behind would keep extending a finished message's visibility)."""
    hb, _wakes = beating
    stop = threading.Event()

    def promote() -> None:
        while not stop.is_set():
            hb._promote(time.monotonic() + 3600)  # every watched job is due: hold it

    promoter = threading.Thread(target=promote)
    held = 0
    promoter.start()
    try:
        deadline = time.monotonic() + 10
        while held < 50 and time.monotonic() < deadline:  # until the thread held 50 as they ended
            job = _Job(hb, timeout=60, lapses_in=61)
            hb.watch(job, job.due())
            time.sleep(0)  # (let the promoter in)
            hb.unwatch(job)
            held += bool(job.made)
    finally:
        stop.set()
        promoter.join()
    assert held >= 50, "the race was not exercised: too few jobs were held by the thread"
    assert hb._holds == {} and hb._pending == {}


class _Ping(BaseModel):
    n: int


_reg = JobRegistry()


@job_of("hb.async", registry=_reg, timeout=1)
async def _waits(p: _Ping) -> None:
    await asyncio.sleep(0)


@job_of("hb.plain", registry=_reg, timeout=1)
def _blocks(p: _Ping) -> None: ...


def test_an_overrun_is_warned_of_past_the_timeouts_grace_only(caplog):
    """A trial's jf dev said "past its timeout of 2s; its key and message stay held while it runs" of an
    async job it was cancelling at its timeout; one whose code blocks the loop past it is warned of."""

    def hold_of(j: Any, ran: float) -> Hold:
        d = SimpleNamespace(require_envelope=lambda: Envelope.new(j.name, {"n": 1}))
        consumer = SimpleNamespace(idempotency=None, change_visibility=lambda *_: None)
        held = Held(consumer, d, j, SimpleNamespace(hard_end=1e12))  # type: ignore[arg-type]
        held.started = time.monotonic() - ran
        return held.hold()

    with caplog.at_level("WARNING", logger="jobframework.heartbeat"):
        hold_of(_waits, 1.5).beat(time.monotonic())  # (being cancelled at its 1 s timeout)
        hold_of(_blocks, 1.5).beat(time.monotonic())
        assert not caplog.records
        hold_of(_waits, 1 + OVERRUN_GRACE_SECONDS + 1).beat(time.monotonic())  # (it blocks its loop)
    assert [r.getMessage() for r in caplog.records if "past its timeout" in r.getMessage()]
