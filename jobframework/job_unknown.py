"""``@job`` given an option it does not take: a message that names the option it is close to, or, for
one that teams bring from Celery or RQ, what it is here (``retries`` was a bare ``TypeError: job()
got an unexpected keyword argument``)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Sequence
from typing import ParamSpec, TypeVar

from jobframework.errors import UnknownEnqueueOptionError, UnknownOptionError
from jobframework.errortext import closest

__all__ = [
    "UnknownOptionError",
    "missing_attribute",
    "refuse_unknown_enqueue_options",
    "refusing_unknown_enqueue_options",
    "refusing_unknown_fields",
    "refusing_unknown_options",
]

P = ParamSpec("P")
R = TypeVar("R")


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
        "timeout= (seconds one attempt may take: an async def job is cancelled at it; a sync job is not "
        "stopped, it checks ctx.time_left between steps)"
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
    "throws": (
        "permanent= (exception types, or functions of the exception, never retried: dead-lettered at "
        "once and logged at WARNING, not ERROR)"
    ),
    "retry_backoff_max": "retry=RetryPolicy(max_delay=...) (seconds; 300 by default)",
}
"""Options of other job libraries, and what says the same to ``@job``."""

_OWN_ID = (
    "key= (the job's id is made for you, a UUIDv7: result.id, which client.status reads; a key of your "
    "own, an order id, dedups the enqueue as BullMQ's jobId does and keys the job's run)"
)
AT_ENQUEUE: dict[str, str] = {
    "countdown": "delay= (seconds, or a timedelta)",
    "eta": "delay= (an aware datetime to run at)",
    "queue": 'priority= ("critical", "high", "default" or "low")',
    "expires": "expires_in= (seconds after which an unstarted job is dropped)",
    "args": "the payload, a model or a dict of its fields",
    "kwargs": "the payload, a model or a dict of its fields",
    "task_id": "key= (the job's id is made for you; a key dedups the enqueue and keys its run)",
    "job_id": _OWN_ID,
    "jobId": _OWN_ID,
    "attempts": "@job(retry=RetryPolicy(max_attempts=N)): retries are the job's, not an enqueue's",
    "backoff": "@job(retry=RetryPolicy(base_delay=..., multiplier=...)): retries are the job's",
    "repeat": "@job(schedule=...): a schedule is the job's, deployed with it (`jf schedules` lists them)",
}
"""Options of Celery's ``apply_async`` and BullMQ's ``add``, and what says the same to an enqueue."""


_CHAINED = "a saga (jobframework.saga) for steps that follow one another, or enqueue the next from the job"
AS_METHODS: dict[str, str] = {
    "delay": "my_job.enqueue(payload) (delay=seconds to run it later)",
    "apply_async": "my_job.enqueue(payload, delay=..., key=..., priority=...)",
    "apply": "run_inline(my_job, payload) from jobframework.testing, or call the function itself",
    "s": _CHAINED,
    "si": _CHAINED,
    "signature": "a saga (jobframework.saga), or my_job.request(payload) for enqueue_many",
    "map": "my_job.enqueue_many(payloads)",
    "chunks": "my_job.enqueue_many(payloads), or @job(batch=BatchOptions(...)) to run them in batches",
    "retry": "raise RetryableError(delay=...) in the job, or @job(retry=RetryPolicy(...))",
    "send": "my_job.enqueue(payload)",
    "enqueue_at": "my_job.enqueue(payload, delay=an aware datetime)",
    "enqueue_in": "my_job.enqueue(payload, delay=timedelta(...))",
}
"""Methods of other libraries' tasks (Celery, RQ, Dramatiq), and what says the same of a job."""


def missing_attribute(owner: object, name: str) -> AttributeError:
    """The ``AttributeError`` of a job's attribute ``name`` that it does not have, saying what to write
    when another library's task has it (``my_job.delay(...)`` is ``my_job.enqueue(...)``)."""
    kind = type(owner).__name__
    if name in AS_METHODS:
        return AttributeError(f"a {kind} has no {name}(): write {AS_METHODS[name]}")
    return AttributeError(f"{kind!r} object has no attribute {name!r}")


def refusing_unknown_options(decorator: Callable[P, R]) -> Callable[P, R]:
    """``decorator`` (``@job``), refusing a keyword it does not take with a :class:`ConfigurationError`
    that says what to write instead (the signature, and so type checking, is unchanged).

    Example:
        >>> @refusing_unknown_options
        ... def job(name: str, *, retry: int = 0, rate: str = "") -> str:
        ...     return name
        >>> job("a.b", retries=3)  # type: ignore[call-arg]
        Traceback (most recent call last):
        jobframework.errors.UnknownOptionError: @job takes no option retries=: write \
retry=RetryPolicy(max_attempts=4) (attempts: the first, then 3 retries)
        >>> job("a.b", rat="1/second")  # type: ignore[call-arg]
        Traceback (most recent call last):
        jobframework.errors.UnknownOptionError: @job takes no option rat=: did you mean rate=?
    """
    return _refusing(decorator, "@job", ELSEWHERE)


def refusing_unknown_enqueue_options(enqueue: Callable[P, R]) -> Callable[P, R]:
    """``JobClient.enqueue`` (which ``job.enqueue`` calls), likewise: ``countdown=`` is ``delay=``.

    Example:
        >>> @refusing_unknown_enqueue_options
        ... def enqueue(job: str, payload: dict, *, delay: float = 0) -> str:
        ...     return job
        >>> enqueue("a.b", {}, countdown=30)  # type: ignore[call-arg]
        Traceback (most recent call last):
        jobframework.errors.UnknownEnqueueOptionError: enqueue takes no option countdown=: write delay= \
(seconds, or a timedelta)
    """
    return _refusing(enqueue, "enqueue", AT_ENQUEUE, UnknownEnqueueOptionError)


AT_RETRY_POLICY: dict[str, str] = {
    "max_retries": "max_attempts=N + 1 (attempts: the first, then N retries)",
    "retries": "max_attempts=N + 1 (attempts: the first, then N retries)",
    "attempts": "max_attempts=",
    "retry_backoff": "base_delay= (seconds before the first retry; it doubles by multiplier=)",
    "default_retry_delay": "base_delay=",
    "retry_backoff_max": "max_delay=",
    "backoff": "multiplier= (growth between delays; 2 by default)",
    "retry_jitter": 'jitter="full" | "proportional" | "none"',
}
"""Retry options of other job libraries, and what says the same to ``RetryPolicy``."""


def refusing_unknown_fields(init: Callable[P, R], label: str) -> Callable[P, R]:
    """A class's ``__init__`` (``RetryPolicy``'s), refusing a keyword it does not take with what to
    write instead (``max_retries=`` is ``max_attempts=N + 1``); a ``TypeError`` still."""
    return _refusing(init, label, AT_RETRY_POLICY, keywords_from=0)


def refuse_unknown_enqueue_options(given: Iterable[str], taken: Sequence[str]) -> None:
    """Refuse an option of an enqueue's ``**options`` that is none of ``taken`` (a job's ``request``
    and ``enqueue_many``, the test recorder's ``enqueue``), as :func:`refusing_unknown_enqueue_options`
    does.

    Raises:
        UnknownEnqueueOptionError: ``countdown=`` (write ``delay=``), a typo (did you mean ...?).
    """
    _refuse(given, ["payload", *taken], "enqueue", AT_ENQUEUE, error=UnknownEnqueueOptionError)


def _refusing(
    fn: Callable[P, R],
    label: str,
    elsewhere: dict[str, str],
    error: type[UnknownOptionError] = UnknownOptionError,
    *,
    keywords_from: int = 1,
) -> Callable[P, R]:
    """``fn`` refusing an unknown keyword; ``keywords_from``: the first parameter a refusal lists (1:
    after a job's name or a job)."""
    taken = [n for n in inspect.signature(fn).parameters if n != "self"]

    @functools.wraps(fn)
    def checked(*args: P.args, **kwargs: P.kwargs) -> R:
        if "rate_limit" in kwargs and "rate_limit" not in taken and "rate_limit" in elsewhere:
            raise error(f"{label} takes no option rate_limit=: write {_celery_rate(kwargs['rate_limit'])}")
        for retries in ("max_retries", "retries"):  # (its number filled in, as rate_limit's)
            value = kwargs.get(retries)
            if retries not in taken and retries in elsewhere and type(value) is int and 0 <= value < 1000:
                said = (
                    elsewhere[retries]
                    .replace("N + 1", str(value + 1))
                    .replace("N retries", f"{value} retries")
                )
                raise error(f"{label} takes no option {retries}=: write {said}")
        _refuse(kwargs, taken, label, elsewhere, error=error, keywords_from=keywords_from)
        return fn(*args, **kwargs)

    return checked


def _celery_rate(value: object) -> str:
    """Celery's ``rate_limit`` value as ``rate=`` writes it: ``"10/m"`` is ``rate="10/minute"``.

    Example:
        >>> _celery_rate("10/m"), _celery_rate(5), _celery_rate("x")
        ('rate="10/minute" (across every consumer)', 'rate="5/second" (across every consumer)', \
'rate="10/second" (N/second, N/minute or N/hour, across every consumer)')
    """
    units = {"s": "second", "m": "minute", "h": "hour"}
    text = str(value).strip()
    count, _, unit = text.partition("/")
    if count.strip().isdigit() and (unit.strip() or "s") in units:
        return f'rate="{int(count)}/{units[unit.strip() or "s"]}" (across every consumer)'
    return ELSEWHERE["rate_limit"]


def _refuse(
    given: Iterable[str],
    taken: list[str],
    label: str,
    elsewhere: dict[str, str],
    *,
    error: type[UnknownOptionError],
    keywords_from: int = 1,
) -> None:
    """Raise ``error`` for the first of ``given`` that is none of ``taken``, saying what to write."""
    for option in given:
        if option not in taken:
            raise error(
                f"{label} takes no option {option}=: {_instead(option, taken, elsewhere, keywords_from)}"
            )


def _instead(option: str, taken: list[str], elsewhere: dict[str, str], keywords_from: int = 1) -> str:
    if option in elsewhere:
        return f"write {elsewhere[option]}"
    close = closest(option, taken)
    if close:
        return f"did you mean {close}=?"
    return "it takes " + ", ".join(f"{name}=" for name in taken[keywords_from:])
