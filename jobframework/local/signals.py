"""Waiting for SIGTERM or SIGINT (Ctrl-C) in the main thread: how ``jf dev`` and ``jf worker`` run."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


def until_signal(
    then: Callable[[], T], *, first: Callable[[], object] | None = None, why: str | None = None
) -> T:
    """Call ``first``, wait for SIGTERM or SIGINT (in the main thread), and return ``then()``; the
    signals are caught from before ``first`` until ``then`` has returned (a second Ctrl-C while draining
    does not kill the process), then the previous handlers are put back. ``why``: what the signal
    means here, for the log line (``jf dev --reload``'s workers are stopped by their ``jf dev``)."""
    stop = threading.Event()

    def handle(signum: int, frame: Any) -> None:
        log.info("%s: draining (the batches in flight finish first)", why or signal.Signals(signum).name)
        stop.set()

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        if first is not None:
            first()
        while not stop.wait(0.2):
            pass
        return then()
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
