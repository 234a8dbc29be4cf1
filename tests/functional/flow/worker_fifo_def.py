"""An ordered job for the multi-process FIFO test, defined into a given registry.

``jf worker --jobs tests.functional.flow.worker_fifo_jobs`` registers it in the default registry of the
worker processes; the test defines it into a registry of its own (and so leaves the default registry
of the test process, which other suites synthesize, without a FIFO lane). Each run appends a line to
the file named by ``JF_TEST_LEDGER`` with ``O_APPEND`` (processes do not interleave lines):
``group seq attempt ok pid started ended`` (epoch seconds).
"""

from __future__ import annotations

import os
import time
from typing import Any

from pydantic import BaseModel

from jobframework import JobContext, RetryPolicy, job
from jobframework.jobs import Job, JobRegistry

NAME = "fw.ordered"


class Entry(BaseModel):
    group: str
    seq: int
    fail_times: int = 0


def _apply(entry: Entry, ctx: JobContext) -> None:
    started = time.time()
    time.sleep(0.05)
    ok = ctx.attempt > entry.fail_times
    line = (
        f"{entry.group} {entry.seq} {ctx.attempt} {int(ok)} {os.getpid()} {started:.6f} {time.time():.6f}\n"
    )
    fd = os.open(os.environ["JF_TEST_LEDGER"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
    if not ok:
        raise ConnectionError(f"group {entry.group} entry {entry.seq}: downstream reset")


def define(registry: JobRegistry | None = None) -> Job[Any]:
    """The ordered job, registered in ``registry`` (the default registry when ``None``)."""
    return job(
        NAME,
        registry=registry,
        ordered_by=lambda e: e.group,
        timeout=20,
        retry=RetryPolicy(max_attempts=5, base_delay=1, max_delay=1, jitter="none"),
    )(_apply)
