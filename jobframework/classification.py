"""Failure classification: whether a failed attempt is retried (and after how long) or dead-lettered,
and with which reason. The delays come from the job's :class:`~jobframework.retry.RetryPolicy`."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, TypeAlias

from jobframework.core import SQS_MAX_VISIBILITY_SECONDS
from jobframework.errors import ConfigurationError, PermanentError, RetryableError

if TYPE_CHECKING:
    from jobframework.retry import RetryPolicy

log = logging.getLogger("jobframework")

PermanentRule: TypeAlias = type[BaseException] | Callable[[BaseException], bool]
"""One entry of a job's ``permanent=``: an exception type, or a function of the exception that says
whether it is permanent (a 400 or a 404 inside one ``HTTPStatusError``: Sidekiq's ``retry_in`` that
answers ``:kill``)."""


class Action(StrEnum):
    RETRY = "retry"
    DEAD_LETTER = "dead_letter"


class Reason(StrEnum):
    """Why a message was dead-lettered (the ``jf-reason`` attribute)."""

    PERMANENT = "permanent"
    EXHAUSTED = "exhausted"
    MALFORMED = "malformed"
    UNKNOWN_TYPE = "unknown-type"
    INVALID_PAYLOAD = "invalid-payload"
    BUDGET = "budget"
    VERSION = "version"
    SIGNATURE = "signature"
    PAYLOAD_MISSING = "payload-missing"
    UNKNOWN_SAGA = "unknown-saga"
    """The job is a step of a saga this consumer does not define, or whose record is gone: the saga
    cannot be advanced here."""


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do with a failed attempt."""

    action: Action
    reason: Reason | None = None
    delay: float = 0.0
    transient: bool = False


_THROTTLING_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottledException",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "TransactionInProgressException",
        "RequestLimitExceeded",
        "BandwidthLimitExceeded",
        "LimitExceededException",
        "SlowDown",
        "RequestThrottled",
        "EC2ThrottledException",
        "ServiceUnavailable",
        "InternalError",
        "InternalFailure",
    }
)


_TRANSIENT_BY_NAME = frozenset(
    {
        ("requests.exceptions", "ConnectionError"),
        ("requests.exceptions", "Timeout"),
        ("httpx", "NetworkError"),
        ("httpx", "TimeoutException"),
        ("httpx", "RemoteProtocolError"),
        ("aiohttp.client_exceptions", "ClientConnectionError"),
        ("aiohttp.client_exceptions", "ServerTimeoutError"),
        ("urllib3.exceptions", "NewConnectionError"),
        ("urllib3.exceptions", "ProtocolError"),
        ("urllib3.exceptions", "TimeoutError"),
    }
)
"""HTTP clients' connection and timeout errors by module and class (none of them is imported): most
are not the built-in ``ConnectionError``/``TimeoutError`` (requests' subclasses ``OSError``, httpx's
only ``Exception``)."""
_NOT_TRANSIENT_BY_NAME = frozenset(
    {
        ("requests.exceptions", "SSLError"),
        ("requests.exceptions", "ProxyError"),
        ("aiohttp.client_exceptions", "ClientSSLError"),
    }
)
"""Subclasses of those that a configuration causes (a certificate, a proxy), which no wait mends."""
_CHAIN_DEPTH = 5


def is_transient(exc: BaseException) -> bool:
    """True for failures that are expected to pass: timeouts, dropped connections (the built-in ones, an
    HTTP client's, or one of them as the explicit cause, ``raise ... from``, or the ``reason`` of what
    was raised: urllib's ``URLError`` of a refused connection), AWS throttling. An error raised while
    handling a connection error (its implicit context: a bug in a fallback) is not one."""
    seen: BaseException | None = exc
    for _ in range(_CHAIN_DEPTH):
        if seen is None:
            return False
        if _transient_itself(seen):
            return True
        reason = getattr(seen, "reason", None)  # (urllib.error.URLError, urllib3's MaxRetryError)
        if isinstance(reason, BaseException) and _transient_itself(reason):
            return True
        seen = seen.__cause__
    return False


def _transient_itself(exc: BaseException) -> bool:
    names = {(t.__module__, t.__name__) for t in type(exc).__mro__}
    if names & _NOT_TRANSIENT_BY_NAME:
        return False
    if isinstance(exc, TimeoutError | ConnectionError | RetryableError) or names & _TRANSIENT_BY_NAME:
        return True
    try:
        from botocore.exceptions import (
            ClientError,
            ConnectionClosedError,
            ConnectTimeoutError,
            EndpointConnectionError,
            ReadTimeoutError,
        )
    except ImportError:  # pragma: no cover - botocore is in every Lambda runtime
        return False
    if isinstance(
        exc, EndpointConnectionError | ConnectTimeoutError | ReadTimeoutError | ConnectionClosedError
    ):
        return True
    if isinstance(exc, ClientError):
        code = str(exc.response.get("Error", {}).get("Code", ""))
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        return code in _THROTTLING_CODES or status in (429, 500, 502, 503, 504)
    return False


def _closer(
    exc: BaseException, first: tuple[type[BaseException], ...], second: tuple[type[BaseException], ...]
) -> bool:
    """Whether a type of ``first`` is nearer ``exc``'s class than every type of ``second`` (its MRO
    order; a type matched only through an ABC's registration counts as farthest)."""
    mro = type(exc).__mro__

    def distance(types: tuple[type[BaseException], ...]) -> int:
        return min((mro.index(t) for t in types if t in mro), default=len(mro))

    return distance(first) < distance(second)


def _answers(rule: Callable[[BaseException], bool], exc: BaseException) -> bool:
    """What a ``permanent=`` function says of ``exc``; one that raises is logged and says no (the
    failure is then classified as if it were not there: retried, as any failure)."""
    try:
        return bool(rule(exc))
    except Exception:
        log.exception(
            "the permanent= function %s raised on %s; the failure is classified without it",
            getattr(rule, "__qualname__", repr(rule)),
            type(exc).__name__,
        )
        return False


def _entries(value: Any) -> tuple[Any, ...]:
    """An option of one entry or a collection of them (a tuple, list or set), as a tuple."""
    return tuple(value) if isinstance(value, tuple | list | set | frozenset) else (value,)


def exception_types(value: Any, option: str, name: str) -> tuple[type[BaseException], ...]:
    """A job's ``transient=`` (or another option of exception types), checked."""
    types = _entries(value)
    for t in types:
        if not (inspect.isclass(t) and issubclass(t, BaseException)):
            raise ConfigurationError(f"job {name}: {option}= takes exception classes, got {t!r}")
    return types


def permanent_rules(value: Any, name: str) -> tuple[PermanentRule, ...]:
    """A job's ``permanent=``, checked: exception types and functions of one exception, one or a
    tuple (or list) of them."""
    rules = _entries(value)
    for rule in rules:
        if inspect.isclass(rule):
            if not issubclass(rule, BaseException):
                raise ConfigurationError(
                    f"job {name}: permanent= takes exception classes or functions of the exception, "
                    f"got the class {rule.__name__}"
                )
            if issubclass(rule, RetryableError):
                raise ConfigurationError(
                    f"job {name}: permanent= lists {rule.__name__}, a RetryableError, which is always "
                    "retried: raise PermanentError (or an exception of another type) for a failure no "
                    "retry mends"
                )
        elif not callable(rule):
            raise ConfigurationError(
                f"job {name}: permanent= takes exception classes or functions of the exception "
                f"(e.g. lambda e: getattr(e, 'status', 0) == 404), got {rule!r}"
            )
    return rules


def classify(
    exc: BaseException,
    *,
    attempt: int,
    policy: RetryPolicy,
    permanent: tuple[PermanentRule, ...] = (),
    transient: tuple[type[BaseException], ...] = (),
) -> Decision:
    """Decide between a retry (with its delay) and a dead letter (with its reason).

    Order: a :class:`RetryableError` is retried (the job's own call for one:
    ``permanent=(Exception,)``, Celery's ``autoretry_for`` as written here, does not take it), then
    the functions in the job's ``permanent=`` (one that answers true dead-letters the failure,
    whatever ``transient=`` says: it looked at the error itself; one that raises is logged and counts
    as false), then its ``permanent=`` and ``transient=`` types (an error of both takes the more
    specific: with ``permanent=(Exception,), transient=(ConnectionError,)`` a ``ConnectionError`` is
    retried, as an ``except`` clause for it would catch it first), then :class:`PermanentError`
    (dead-lettered now, unless its type is in ``transient=``), then everything else (retried while
    ``attempt < policy.max_attempts``, else ``exhausted``). A pydantic ``ValidationError`` here is
    the job's own (a downstream's reply it parsed), retried as any failure: a payload its model
    refuses never reaches the job (the consumer dead-letters it ``invalid-payload`` before).

    Example:
        >>> from jobframework.retry import RetryPolicy
        >>> classify(PermanentError("card declined"), attempt=1, policy=RetryPolicy()).reason
        <Reason.PERMANENT: 'permanent'>
        >>> classify(ConnectionError("reset"), attempt=1, policy=RetryPolicy(),
        ...          permanent=(Exception,), transient=(ConnectionError,)).action
        <Action.RETRY: 'retry'>
        >>> client_error = lambda e: getattr(e, "status", 0) in (400, 404)
        >>> class HTTPError(Exception):
        ...     def __init__(self, status: int) -> None:
        ...         self.status = status
        >>> [classify(HTTPError(s), attempt=1, policy=RetryPolicy(), permanent=(client_error,)).action
        ...  for s in (404, 503)]
        [<Action.DEAD_LETTER: 'dead_letter'>, <Action.RETRY: 'retry'>]
    """
    if isinstance(exc, RetryableError):  # the job's own call for a retry: no permanent= type takes it
        return _retried(exc, attempt, policy, transient=True)
    types = tuple(rule for rule in permanent if isinstance(rule, type))
    if len(types) < len(permanent) and any(
        _answers(rule, exc) for rule in permanent if not isinstance(rule, type)
    ):
        return Decision(Action.DEAD_LETTER, Reason.PERMANENT)
    declared_transient = bool(transient) and isinstance(exc, transient)
    if types and isinstance(exc, types) and not (declared_transient and _closer(exc, transient, types)):
        return Decision(Action.DEAD_LETTER, Reason.PERMANENT)
    if not declared_transient and isinstance(exc, PermanentError):
        return Decision(Action.DEAD_LETTER, Reason.PERMANENT)
    return _retried(exc, attempt, policy, transient=declared_transient or is_transient(exc))


def _retried(exc: BaseException, attempt: int, policy: RetryPolicy, *, transient: bool) -> Decision:
    """A retry after the policy's delay (a RetryableError's own when it gives one), or ``exhausted``
    on the last attempt."""
    if attempt >= policy.max_attempts:
        return Decision(Action.DEAD_LETTER, Reason.EXHAUSTED, transient=transient)
    if isinstance(exc, RetryableError) and exc.delay is not None:
        delay = min(exc.delay, SQS_MAX_VISIBILITY_SECONDS)
    else:
        delay = policy.delay(attempt)
    return Decision(Action.RETRY, delay=delay, transient=transient)
