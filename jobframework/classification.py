"""Failure classification: whether a failed attempt is retried (and after how long) or dead-lettered,
and with which reason. The delays come from the job's :class:`~jobframework.retry.RetryPolicy`."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from jobframework.core import SQS_MAX_VISIBILITY_SECONDS
from jobframework.errors import PermanentError, RetryableError

if TYPE_CHECKING:
    from jobframework.retry import RetryPolicy


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


def is_transient(exc: BaseException) -> bool:
    """True for failures that are expected to pass: timeouts, dropped connections, AWS throttling."""
    if isinstance(exc, TimeoutError | ConnectionError | RetryableError):
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


def classify(
    exc: BaseException,
    *,
    attempt: int,
    policy: RetryPolicy,
    permanent: tuple[type[BaseException], ...] = (),
    transient: tuple[type[BaseException], ...] = (),
) -> Decision:
    """Decide between a retry (with its delay) and a dead letter (with its reason).

    Order: the job's ``permanent=`` and ``transient=`` types (an error of both takes the more
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
    """
    declared_transient = bool(transient) and isinstance(exc, transient)
    if (
        permanent
        and isinstance(exc, permanent)
        and not (declared_transient and _closer(exc, transient, permanent))
    ):
        return Decision(Action.DEAD_LETTER, Reason.PERMANENT)
    if not declared_transient and isinstance(exc, PermanentError):
        return Decision(Action.DEAD_LETTER, Reason.PERMANENT)
    if attempt >= policy.max_attempts:
        return Decision(
            Action.DEAD_LETTER, Reason.EXHAUSTED, transient=declared_transient or is_transient(exc)
        )
    if isinstance(exc, RetryableError) and exc.delay is not None:
        delay = min(exc.delay, SQS_MAX_VISIBILITY_SECONDS)
    else:
        delay = policy.delay(attempt)
    return Decision(Action.RETRY, delay=delay, transient=declared_transient or is_transient(exc))
