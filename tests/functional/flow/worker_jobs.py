"""A capped job for the multi-process test: `jf worker --jobs tests.functional.flow.worker_jobs`.

Each run appends its start and end (epoch seconds) to the file named by ``JF_TEST_LEDGER``, with
``O_APPEND`` so that processes do not interleave lines: the ledger the test reads the concurrency from.
"""

from __future__ import annotations

import os
import time

from pydantic import BaseModel

from jobframework import job

CAP = 2


class Step(BaseModel):
    n: int


@job("fw.capped", concurrency=CAP, timeout=20)
def capped_step(step: Step) -> None:
    started = time.time()
    time.sleep(0.4)
    _note(step, started)


@job("fw.quick", timeout=20)
def quick_step(step: Step) -> None:
    """No limit: notes its run in the ledger (the worker-output test)."""
    _note(step, time.time())


def _note(step: Step, started: float) -> None:
    """Append ``n pid started ended`` to the ledger in one ``O_APPEND`` write."""
    line = f"{step.n} {os.getpid()} {started:.6f} {time.time():.6f}\n"
    fd = os.open(os.environ["JF_TEST_LEDGER"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
