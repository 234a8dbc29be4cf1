"""Two `jf worker` processes beside the test's own emulator, and rounds of jobs until both processes have
run some (the multi-process flow tests: ordered groups and the concurrency cap)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sized
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from jobframework.topology import RuntimeConfig
from tests.functional.conftest_local import cli_env

ROOT = Path(__file__).parents[3]


@contextmanager
def two_workers(config: RuntimeConfig, ledger: Path, lane: str, jobs: str) -> Iterator[list[str]]:
    """Two `jf worker` processes polling ``lane`` with the job module ``jobs``, each writing to
    ``ledger`` (and given the test's ``JF_LIMIT_WAIT``); polling when the block starts, stopped
    (SIGTERM) when it ends. Yields a list that holds each process's last stderr afterwards (for
    assertion messages)."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("JF_", "AWS_"))},
        **cli_env(config),
        "JF_TEST_LEDGER": str(ledger),
        **({"JF_LIMIT_WAIT": os.environ["JF_LIMIT_WAIT"]} if "JF_LIMIT_WAIT" in os.environ else {}),
        "POWERTOOLS_LOG_LEVEL": "ERROR",
        "POWERTOOLS_METRICS_DISABLED": "true",
    }
    command = [sys.executable, "-m", "jobframework.cli", "worker", "--queues", lane]
    command += ["--jobs", jobs, "--workers", "3", "--drain-timeout", "5"]
    workers = [
        subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    errors: list[str] = []
    stderr: list[list[bytes]] = [[] for _ in workers]
    readers: list[threading.Thread] = []
    try:
        for w, kept in zip(workers, stderr, strict=True):  # each polls once it has printed its first line
            assert w.stdout is not None
            first = w.stdout.readline()
            assert json.loads(first)["message"].startswith("jf worker: polling"), first  # a log line
            # Both pipes read to the end (a line per job outcome would fill one left unread).
            readers += [_drain(w.stdout, None), _drain(w.stderr, kept)]
        yield errors
    finally:
        for w in workers:
            w.send_signal(signal.SIGTERM)
        for w in workers:
            try:
                w.wait(timeout=30)
            except subprocess.TimeoutExpired:
                w.kill()
                w.wait()
        for reader in readers:
            reader.join(timeout=5)
        errors += [b"".join(kept).decode(errors="replace")[-2000:] for kept in stderr]


def _drain(pipe: IO[bytes] | None, kept: list[bytes] | None) -> threading.Thread:
    """A thread that reads ``pipe`` to its end, keeping what it read in ``kept`` (if given)."""

    def read() -> None:
        for line in pipe or ():
            if kept is not None:
                kept.append(line)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


def rounds_until_two_ran(
    send_round: Callable[[int], None],
    finished: Callable[[], Sized],
    processes: Callable[[], set[str]],
    *,
    per_round: int,
    rounds: int,
    timeout: float,
) -> int:
    """Rounds of jobs (``send_round(n)`` sends round ``n``; each round is ``per_round`` jobs) until
    more than one process has run some: which consumer receives a message is up to SQS. Each round
    waits (up to ``timeout`` s) until ``finished()`` holds all jobs sent so far. Returns the rounds
    sent."""
    sent = 0
    for n in range(rounds):
        send_round(n)
        sent += 1
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and len(finished()) < sent * per_round:
            time.sleep(0.2)
        if len(processes()) >= 2:
            break
    return sent
