"""The consumer's lines that an outcome line of ``jf dev`` says again (``job ... dead-lettered``,
``... retry in 2s``): left out of its readable console, keeping where the job raised, which is
printed under the job's outcome line (:mod:`jobframework.local.console`)."""

from __future__ import annotations

import logging
import os
import re
import sysconfig
import threading
import traceback
from pathlib import Path

RESTATES = {
    "jobframework.consumer": re.compile(
        r"dead-lettered|failed for good|retry in|retrying in|released unstarted|skipped|deferred %ds"
        r"|already completed"
        r"|running in another delivery|retry budget|throttled \(%d so far\)"
    ),
    "jobframework.flow.limits": re.compile(r"over its concurrency cap|over its rate"),
    "jobframework.flow.debounce": re.compile(r"debounced: superseded"),
    "jobframework.flow.cancel": re.compile(r"was cancelled; acknowledged unrun"),
    "jobframework.fifo": re.compile(r"held back"),
}
"""The framework's messages that an outcome line says again, by logger (matched against the message
template): a hand-back over a limit, a superseded debounce or a cancel is one line, its outcome's."""


def restates_outcome(record: logging.LogRecord) -> bool:
    restates = RESTATES.get(record.name)
    return restates is not None and bool(restates.search(str(record.msg)))


_FRAMEWORK_DIR = str(Path(__file__).resolve().parent.parent)
_STDLIB_DIR = sysconfig.get_paths()["stdlib"]


def job_frames(record: logging.LogRecord) -> str:
    """Where the job raised: its traceback's frames outside jobframework, the standard library (an
    ``async def`` job's result passes through ``concurrent.futures``) and installed packages."""
    if not record.exc_info or record.exc_info[2] is None:
        return ""
    frames = traceback.extract_tb(record.exc_info[2])
    own = [
        f
        for f in frames
        if not f.filename.startswith((_FRAMEWORK_DIR, _STDLIB_DIR)) and "-packages" not in f.filename
    ] or frames[-1:]
    cwd = os.getcwd()
    return "\n".join(
        f"    at {os.path.relpath(f.filename, cwd) if f.filename.startswith(cwd) else f.filename}:"
        f"{f.lineno} in {f.name}: {(f.line or '').strip()}"
        for f in own
    )


class Pending:
    """Where each job raised, from the consumer's record that its outcome line says again, until that
    line is printed. By job (the consumer's lines name it first: ``job <id> (<type>) ...``), not by
    thread: a batch's jobs run on several threads, and its outcome lines come together at its end."""

    LIMIT = 1000
    """Jobs kept at most (a line that never came would otherwise keep its frames for good)."""

    def __init__(self) -> None:
        self._frames: dict[str, str] = {}
        self._lock = threading.Lock()

    def keep(self, record: logging.LogRecord) -> None:
        args = record.args if isinstance(record.args, tuple) else ()
        frames = job_frames(record) if args else ""
        if not frames:
            return
        with self._lock:
            self._frames[str(args[0])] = frames
            while len(self._frames) > self.LIMIT:
                del self._frames[next(iter(self._frames))]

    def take(self, ident: str) -> str:
        with self._lock:
            return self._frames.pop(ident, "")


pending = Pending()


class NoRestatements(logging.Filter):
    """Drops the consumer's records that an outcome line says again (keeping the job's frames for it)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not restates_outcome(record):
            return True
        pending.keep(record)
        return False
