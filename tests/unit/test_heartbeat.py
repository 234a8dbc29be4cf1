"""The heartbeat's thread: quick jobs come and go without waking it; a hold due soon wakes it."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import pytest

from jobframework.heartbeat import IDLE_SECONDS, Heartbeat


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
