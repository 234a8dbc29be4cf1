"""Calling a job's function: plain or ``async def``, and whatever it raises is that job's outcome.

* ``async def`` jobs (and any call that returns an awaitable) are awaited on one event loop per process,
  run by a daemon thread and reused across invocations (so clients a job caches on the loop stay valid
  from one Lambda invocation to the next). A job's task runs with a copy of the caller's context
  variables, so its log lines carry the job's keys.
* A ``BaseException`` that is not an ``Exception`` (``KeyboardInterrupt``, ``SystemExit``,
  ``GeneratorExit``, an ``asyncio.CancelledError`` leaking out of async code) raised by a job becomes
  :class:`JobAborted`, an ordinary failure of that job: it is classified and retried like any other,
  and its neighbours in the batch are not touched. Signals never reach jobs in ``jf worker`` (its main
  thread handles SIGTERM and SIGINT and drains).
* What cannot be run is refused when ``@job`` is applied (:func:`check_runnable`): generator functions,
  async generator functions, classes and other non-callables.

Example:
    >>> import asyncio
    >>> async def double(n: int) -> int:
    ...     await asyncio.sleep(0)
    ...     return 2 * n
    >>> call(double, 21)
    42
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

from jobframework.errors import ConfigurationError, JobTimedOut, PermanentError
from jobframework.errortext import describe

if TYPE_CHECKING:  # asyncio is imported on the first async job, not by every consumer
    import asyncio


class JobAborted(Exception):
    """A job raised a ``BaseException`` that is not an ``Exception``; ``original`` is what it raised."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(f"the job raised {describe(original)}")
        self.original = original


def check_runnable(fn: Any, name: str) -> None:
    """Refuse, when ``@job`` is applied, what the consumer could not run.

    Raises:
        ConfigurationError: ``fn`` is not callable, is a class, or is a generator or async generator
            function (calling it would only make a generator; nothing would run).
    """
    if inspect.isclass(fn) or not callable(fn):
        raise ConfigurationError(
            f"@job({name!r}) must decorate a function (def or async def), got {type(fn).__name__} {fn!r}"
        )
    if isinstance(fn, functools.partial):
        raise ConfigurationError(
            f"job {name}: decorate a function (def or async def), not functools.partial(...): write one "
            "that calls it (def my_job(payload: MyModel) -> None: return f(payload, y=3))"
        )
    candidates: list[Any] = [fn, inspect.unwrap(fn) if inspect.isfunction(fn) else fn]
    if not inspect.isroutine(fn):
        candidates.append(type(fn).__call__)
    for candidate in candidates:
        if inspect.isgeneratorfunction(candidate) or inspect.isasyncgenfunction(candidate):
            raise ConfigurationError(
                f"job {name}: {getattr(fn, '__qualname__', fn)!r} is a generator function; calling it only "
                "makes a generator and runs nothing: return the result instead of yielding it "
                "(use def or async def)"
            )


def is_async(fn: Any) -> bool:
    """``fn`` is an ``async def`` function (or an object whose ``__call__`` is one): its timeout cancels it.

    Example:
        >>> async def a() -> None: ...
        >>> is_async(a), is_async(len)
        (True, False)
    """
    target = inspect.unwrap(fn) if inspect.isfunction(fn) else fn
    if inspect.isroutine(target):
        return inspect.iscoroutinefunction(target)
    return inspect.iscoroutinefunction(type(target).__call__)


def call(fn: Callable[..., Any], *args: Any, timeout: float | None = None) -> Any:
    """Call ``fn(*args)``; await the result on the process's event loop when it is awaitable (for at
    most ``timeout`` seconds: the job's ``timeout=``).

    Raises:
        JobTimedOut: the awaitable ran past ``timeout`` (it was cancelled).
        JobAborted: the call raised a ``BaseException`` that is not an ``Exception``.
        PermanentError: the call returned a generator (it ran nothing).
        Exception: whatever the call raised.
    """
    try:
        result = fn(*args)
        if result is None:  # most jobs: nothing to await or to check
            return None
        if inspect.isawaitable(result):
            result = _await_on_loop(result, timeout)
    except Exception:
        raise
    except BaseException as exc:
        raise JobAborted(exc) from exc
    if inspect.isgenerator(result) or inspect.isasyncgen(result):
        if inspect.isgenerator(result):
            result.close()
        raise PermanentError(
            f"{getattr(fn, '__qualname__', fn)!r} returned a generator, so nothing ran: return the result"
        )
    return result


_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None


def event_loop() -> asyncio.AbstractEventLoop:
    """The process's event loop for async jobs (started on first use; restarted if its thread died)."""
    global _loop, _thread
    import asyncio

    with _lock:
        if _loop is None or _thread is None or not _thread.is_alive() or _loop.is_closed():
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def run() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()

            thread = threading.Thread(target=run, name="jf-async-jobs", daemon=True)
            thread.start()
            ready.wait()
            _loop, _thread = loop, thread
        return _loop


async def awaited(awaitable: Awaitable[Any], timeout: float | None) -> Any:
    """Await ``awaitable`` for at most ``timeout`` seconds (``JobTimedOut`` past it); a ``BaseException``
    that is not an ``Exception`` becomes :class:`JobAborted` (the job's failure)."""
    # KeyboardInterrupt and SystemExit escaping a task would stop the loop itself: they are the job's.
    import asyncio

    limit = asyncio.timeout(timeout)
    try:
        async with limit:
            return await awaitable
    except TimeoutError as exc:
        if limit.expired():  # (not a TimeoutError of the job's own)
            raise JobTimedOut(timeout or 0) from exc
        raise
    except Exception:
        raise
    except asyncio.CancelledError as exc:
        task = asyncio.current_task()
        if task is not None and task.cancelling():  # the awaiting task itself is cancelled (a test's
            raise  # timeout, a TaskGroup): its cancellation goes on, it is no failure of the job's
        raise JobAborted(exc) from exc
    except BaseException as exc:
        raise JobAborted(exc) from exc


def _await_on_loop(awaitable: Awaitable[Any], timeout: float | None = None) -> Any:
    import asyncio
    import concurrent.futures

    loop = event_loop()
    context = contextvars.copy_context()
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()
    coroutine: Coroutine[Any, Any, Any] = awaited(awaitable, timeout)

    def start() -> None:
        try:
            task = loop.create_task(coroutine, context=context)
        except BaseException as exc:
            future.set_exception(exc)
            return

        def settle(done: asyncio.Task[Any]) -> None:
            if done.cancelled():
                future.set_exception(JobAborted(asyncio.CancelledError("the job's task was cancelled")))
            elif (error := done.exception()) is not None:
                future.set_exception(error)
            else:
                future.set_result(done.result())

        task.add_done_callback(settle)

    loop.call_soon_threadsafe(start)
    return future.result()
