"""Records of a batch run concurrently, bounded per lane, on one thread pool reused across invocations.

How many of a batch's records run at once (:func:`lane_limit`):

* an ``io`` lane, or a lane without a profile: up to the batch size, or the lane's ``concurrency``
  (``consumer(concurrency=...)``, or the ``JF_CONCURRENCY`` / ``JF_CONCURRENCY_<LANE>`` environment:
  ``JF_CONCURRENCY_HIGH_CPU=2``);
* a ``cpu`` lane: one at a time, unless its ``concurrency`` says otherwise.

Sync jobs run on the process's pool threads (:func:`run_all`); ``async def`` jobs are awaited on the
one event loop of :mod:`jobframework.running`, so many of them wait together. The calling thread takes
records too, and helpers join only while records are left (each helper that starts asks for the next),
so a batch of quick jobs costs about one thread hand-off, and a batch of jobs that wait runs them all
within a moment of each other. A lane whose last batch was all quick jobs (none over 2 ms) starts
its next batch on the calling thread alone, and calls the helpers in once a record runs long (so
there, the first long record of a batch delays the others by its own time, once; the batch after it
starts with helpers).
Per-record isolation is unchanged: each record's stages run on one thread, in a copy of the
caller's context variables (its log keys and trace context are its own).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from jobframework.core import all_lanes
from jobframework.errortext import closest

T = TypeVar("T")
R = TypeVar("R")

POOL_THREADS = 64
"""Threads of the process's pool (shared by every batch the process runs at once)."""
ENV_CONCURRENCY = "JF_CONCURRENCY"

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def pool() -> ThreadPoolExecutor:
    """The process's pool for the records of batches (made on first use, reused after)."""
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(max_workers=POOL_THREADS, thread_name_prefix="jf-records")
    return _pool


def lane_limit(lane: str | None, batch_size: int, concurrency: Mapping[str, int] | int | None) -> int:
    """How many records of a batch from ``lane`` run at once (see the module docstring).

    Example:
        >>> lane_limit("high", 10, None), lane_limit("high-cpu", 10, None), lane_limit("high", 10, 4)
        (10, 1, 4)
    """
    name = lane or ""
    limit: int | None = None
    if isinstance(concurrency, int):
        limit = concurrency
    elif concurrency is not None:
        limit = concurrency.get(name)
    if limit is None:
        limit = _env_limit(name)
    if limit is None:
        limit = 1 if name.removesuffix("-fifo").endswith("-cpu") else batch_size
    return max(1, min(limit, batch_size))


def checked_concurrency(
    concurrency: Mapping[str, int] | int | None,
) -> Mapping[str, int] | int | None:
    """``consumer(concurrency=...)`` as given, once checked: a whole number of records at least 1, or
    a mapping of lane names (``high``, ``high-cpu``, ``default-fifo``) to such numbers; and the
    environment's ``JF_CONCURRENCY`` variables (:func:`check_concurrency_environment`).

    Raises:
        ConfigurationError: anything else, saying what to pass (a misspelt lane, with the lane it is
            close to).

    Example:
        >>> checked_concurrency({"high-cpu": 2})
        {'high-cpu': 2}
        >>> checked_concurrency({"hihg": 4})
        Traceback (most recent call last):
        jobframework.errors.ConfigurationError: concurrency= names no lane 'hihg' (did you mean 'high'?): \
lanes are a priority (critical, high, default, low), -io or -cpu after it for a worker profile, -fifo \
last for ordered jobs
    """
    from jobframework.errors import ConfigurationError

    def count(value: object, where: str) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigurationError(
                f"{where} must be a whole number of records at least 1 (1: one at a time), got {value!r}"
            )

    check_concurrency_environment()
    if concurrency is None:
        return None
    if not isinstance(concurrency, Mapping):
        if not isinstance(concurrency, int) or isinstance(concurrency, bool):
            raise ConfigurationError(
                "concurrency= takes a whole number of records (every lane) or a mapping of lane to "
                f"number, e.g. {{'high': 4, 'high-cpu': 2}}; got {concurrency!r}"
            )
        count(concurrency, "concurrency=")
        return concurrency
    lanes = all_lanes()
    for lane, value in concurrency.items():
        if lane not in lanes:
            close = closest(str(lane), lanes)
            raise ConfigurationError(
                f"concurrency= names no lane {lane!r}"
                + (f" (did you mean {close!r}?)" if close else "")
                + f": {_LANES_ARE}"
            )
        count(value, f"concurrency[{lane!r}]")
    return concurrency


_LANES_ARE = (
    "lanes are a priority (critical, high, default, low), -io or -cpu after it for a worker profile, "
    "-fifo last for ordered jobs"
)


def check_concurrency_environment(environ: Mapping[str, str] | None = None) -> None:
    """Check ``JF_CONCURRENCY`` and its lane forms when the consumer is made (``jf dev`` starts, a
    Lambda's module loads), not at the first batch, which a bad value would fail whole, every time.

    Raises:
        ConfigurationError: a value that is not a whole number at least 1, or a lane form naming no
            lane (``JF_CONCURRENCY_HIHG``: did you mean ``JF_CONCURRENCY_HIGH``?).

    Example:
        >>> check_concurrency_environment({"JF_CONCURRENCY_HIHG": "4"})
        Traceback (most recent call last):
        jobframework.errors.ConfigurationError: JF_CONCURRENCY_HIHG names no lane (did you mean \
JF_CONCURRENCY_HIGH?): lanes are a priority (critical, high, default, low), -io or -cpu after it for a \
worker profile, -fifo last for ordered jobs
    """
    from jobframework.errors import ConfigurationError

    env = os.environ if environ is None else environ
    limit_wait(env)
    variables = {lane_variable(lane): lane for lane in all_lanes()}
    for name, raw in env.items():
        if not name.startswith(ENV_CONCURRENCY) or not raw:
            continue
        if name != ENV_CONCURRENCY and name not in variables:
            if not name.startswith(f"{ENV_CONCURRENCY}_"):
                continue  # (another variable that starts alike)
            close = closest(name, list(variables))
            raise ConfigurationError(
                f"{name} names no lane" + (f" (did you mean {close}?)" if close else "") + f": {_LANES_ARE}"
            )
        _env_count(name, raw)


ENV_LIMIT_WAIT = "JF_LIMIT_WAIT"


def limit_wait(environ: Mapping[str, str] | None = None) -> float | None:
    """``JF_LIMIT_WAIT``: the seconds a record over its job's ``concurrency=`` cap waits for a lease,
    in line for one that a run of its process holds or looking again while other processes hold them
    all (0: handed back at once); ``None`` when unset (it waits in line up to its job's timeout, the
    longest a run holding the lease can last, and looks again for 5 s: :mod:`jobframework.flow.limits`).
    Sidekiq's concurrent limiter waits five seconds for its lock, but there a job that gives up leaves
    at once; here its hand-back leaves when its batch settles, after the runs it waited for.

    Raises:
        ConfigurationError: not a number of seconds from 0 to 900.

    Example:
        >>> limit_wait({}), limit_wait({"JF_LIMIT_WAIT": "2.5"}), limit_wait({"JF_LIMIT_WAIT": "0"})
        (None, 2.5, 0.0)
    """
    raw = (os.environ if environ is None else environ).get(ENV_LIMIT_WAIT, "").strip()
    if not raw:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= 900:  # (also NaN)
        from jobframework.errors import ConfigurationError

        raise ConfigurationError(
            f"{ENV_LIMIT_WAIT} must be the seconds a record over its concurrency cap waits for a lease, "
            f"0 (hand it back at once) to 900 (unset: up to its job's timeout), got {raw!r}"
        )
    return seconds


def lane_variable(lane: str) -> str:
    """The environment variable bounding ``lane``'s records at once.

    Example:
        >>> lane_variable("high-cpu")
        'JF_CONCURRENCY_HIGH_CPU'
    """
    return f"{ENV_CONCURRENCY}_{lane.upper().replace('-', '_')}"


_env_limits: dict[str, int | None] = {}


def _env_limit(lane: str) -> int | None:
    if lane not in _env_limits:
        name = lane_variable(lane) if lane and os.environ.get(lane_variable(lane)) else ENV_CONCURRENCY
        raw = os.environ.get(name)
        _env_limits[lane] = _env_count(name, raw) if raw else None
    return _env_limits[lane]


def _env_count(name: str, raw: str) -> int:
    """The variable ``name``'s value ``raw`` as a number of records (at least 1).

    Raises:
        ConfigurationError: not a whole number at least 1, naming the variable.
    """
    try:
        limit = int(raw)
    except ValueError:
        limit = 0
    if limit < 1:
        from jobframework.errors import ConfigurationError

        raise ConfigurationError(f"{name} must be a whole number of records at least 1, got {raw!r}")
    return limit


QUICK_SECONDS = 0.002
"""A record that runs longer than this makes its lane "waiting": its batches start with helpers."""
_waiting: dict[str, bool] = {}
"""Per lane: did its last batch have a record that ran longer than :data:`QUICK_SECONDS`?"""


def run_all(
    items: Sequence[T], fn: Callable[[T], R], limit: int, *, lane: str | None = None
) -> list[R | None]:
    """``[fn(item) for item in items]``, at most ``limit`` at a time, the calling thread among them.

    A lane whose records are quick (none of its last batch ran over :data:`QUICK_SECONDS`) starts on
    the calling thread alone and calls in helpers as soon as one record runs long; a lane whose
    records wait (or one not seen yet) starts with helpers. So quick jobs cost no thread hand-off, and
    jobs that wait run together. ``fn`` should not raise (the pipeline turns every error into a
    verdict); if it does on a helper, that item's result is ``None`` and the others still run.
    """
    n = len(items)
    if limit <= 1 or n <= 1:
        return [fn(item) for item in items]
    key = lane or ""
    results: list[R | None] = [None] * n
    start = 0
    if not _waiting.get(key, True):  # a quick lane: the calling thread alone, no lock, until one waits
        clock = time.perf_counter
        while start < n:
            began = clock()
            results[start] = fn(items[start])
            start += 1
            if clock() - began > QUICK_SECONDS:
                break
        else:
            return results
    state = {"next": start, "helpers": 0, "finished": start, "slow": int(start > 0)}
    done = threading.Condition()
    parent = contextvars.copy_context()

    def take() -> int | None:
        with done:
            i = state["next"]
            if i >= n:
                return None
            state["next"] = i + 1
            return i

    def run(i: int) -> None:
        started = time.perf_counter()
        try:
            results[i] = fn(items[i])
        finally:
            with done:
                state["finished"] += 1
                if time.perf_counter() - started > QUICK_SECONDS:
                    state["slow"] += 1
                if state["finished"] == n:
                    done.notify_all()

    def spawn() -> None:
        with done:
            if state["helpers"] >= limit - 1 or state["next"] >= n:
                return
            state["helpers"] += 1
        try:
            pool().submit(parent.copy().run, helper)
        except RuntimeError:  # the pool is shut down (the interpreter is exiting): the caller goes on
            with done:
                state["helpers"] -= 1

    def helper() -> None:
        spawn()  # the next helper, while records are left
        while (i := take()) is not None:
            with contextlib.suppress(Exception):  # already counted; the item's result stays None
                run(i)

    if start or _waiting.get(key, True):
        spawn()
    while (i := take()) is not None:
        run(i)
        if state["slow"] and not state["helpers"]:
            spawn()  # a record ran long: the rest may wait too
    with done:
        while state["finished"] < n:
            done.wait()
    _waiting[key] = state["slow"] > 0
    return results
