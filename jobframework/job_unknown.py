"""``@job`` given an option it does not take: a message that names the option it is close to, or, for
one that teams bring from Celery or RQ, what it is here (``retries`` was a bare ``TypeError: job()
got an unexpected keyword argument``)."""

from __future__ import annotations

import difflib
import functools
import inspect
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from jobframework.core import ConfigurationError

P = ParamSpec("P")
R = TypeVar("R")


class UnknownOptionError(ConfigurationError, TypeError):
    """An option ``@job`` does not take (a ``TypeError`` too, as Python's own was)."""


ELSEWHERE: dict[str, str] = {
    "retries": "retry=RetryPolicy(max_attempts=N + 1) (attempts: the first, then N retries)",
    "max_retries": "retry=RetryPolicy(max_attempts=N + 1) (attempts: the first, then N retries)",
    "autoretry_for": (
        "permanent=(Exception,), transient=(ConnectionError, ...) to retry only those (the nearer "
        "type wins); without them every exception but a PermanentError is retried with backoff"
    ),
    "retry_backoff": "retry=RetryPolicy(base_delay=..., max_delay=...) (backoff and jitter are the default)",
    "retry_jitter": 'retry=RetryPolicy(jitter="full" | "proportional" | "none")',
    "default_retry_delay": "retry=RetryPolicy(base_delay=...)",
    "rate_limit": 'rate="10/second" (N/second, N/minute or N/hour, across every consumer)',
    "time_limit": (
        "timeout= (seconds one attempt may take; not enforced: the job checks ctx.time_left between steps)"
    ),
    "soft_time_limit": "timeout=, and ctx.time_left checked between steps (seconds left of it)",
    "queue": 'priority= ("critical", "high", "default" or "low": each is its own queue)',
    "bind": "a JobContext parameter after the payload: def run(payload: Model, ctx: JobContext)",
    "acks_late": (
        "nothing: a message is deleted only after its job ran (at least once), and an idempotent "
        "job (the default) runs once per key"
    ),
    "countdown": "enqueue(payload, delay=...): a delay is an enqueue's option, not the job's",
    "eta": "enqueue(payload, delay=...): a delay is an enqueue's option, not the job's",
    "expires": "expires_after= (seconds after its enqueue that an unstarted job is dropped)",
    "ignore_result": "nothing: a job's result is kept only when it is tracked (track=True)",
    "unique": "key= (a function of the payload) with dedup_window=",
}
"""Options of other job libraries, and what says the same to ``@job``."""


def refusing_unknown_options(decorator: Callable[P, R]) -> Callable[P, R]:
    """``decorator``, refusing a keyword it does not take with a :class:`ConfigurationError` that says
    what to write instead (the signature, and so type checking, is unchanged).

    Example:
        >>> @refusing_unknown_options
        ... def job(name: str, *, retry: int = 0, rate: str = "") -> str:
        ...     return name
        >>> job("a.b", retries=3)  # type: ignore[call-arg]
        Traceback (most recent call last):
        jobframework.job_unknown.UnknownOptionError: @job takes no option retries=: write \
retry=RetryPolicy(max_attempts=N + 1) (attempts: the first, then N retries)
        >>> job("a.b", rat="1/second")  # type: ignore[call-arg]
        Traceback (most recent call last):
        jobframework.job_unknown.UnknownOptionError: @job takes no option rat=: did you mean rate=?
    """
    taken = list(inspect.signature(decorator).parameters)

    @functools.wraps(decorator)
    def checked(*args: P.args, **kwargs: P.kwargs) -> R:
        for option in kwargs:
            if option not in taken:
                raise UnknownOptionError(f"@job takes no option {option}=: {_instead(option, taken)}")
        return decorator(*args, **kwargs)

    return checked


def _instead(option: str, taken: list[str]) -> str:
    if option in ELSEWHERE:
        return f"write {ELSEWHERE[option]}"
    close = difflib.get_close_matches(option, taken, n=1)
    if close:
        return f"did you mean {close[0]}=?"
    return "it takes " + ", ".join(f"{name}=" for name in taken[1:])
