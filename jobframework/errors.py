"""Exceptions a job raises to steer its retries, and the framework's own errors.

A job raises :class:`RetryableError` to ask for another attempt (optionally after
an explicit delay, e.g. from a ``Retry-After`` header) and :class:`PermanentError`
to give up at once; the consumer dead-letters a permanent failure with the reason
``permanent``. Every other exception is retried within the job's retry policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from jobframework.core import ConfigurationError, JobFrameworkError, TopologyWarning

__all__ = [
    "ConfigurationError",
    "DuplicateJobError",
    "EndpointNotSupportedError",
    "EnqueueError",
    "EnqueueManyError",
    "JobCancelled",
    "JobFrameworkError",
    "JobTimedOut",
    "MalformedMessageError",
    "PayloadMissingError",
    "PayloadStoreError",
    "PayloadTooLargeError",
    "PayloadValidationError",
    "PayloadVersionError",
    "PermanentError",
    "RetryableError",
    "SignatureError",
    "Throttled",
    "TopologyParameterNotFound",
    "TopologyWarning",
    "UnknownEnqueueOptionError",
    "UnknownJobError",
    "UnknownOptionError",
]


class RetryableError(Exception):
    """A failure worth another attempt.

    Args:
        message: what went wrong.
        delay: seconds (or a ``timedelta``) to wait before the next attempt; ``None``
            lets the job's :class:`~jobframework.retry.RetryPolicy` choose. Capped by
            the SQS visibility limit of 12 hours.

    Example:
        >>> err = RetryableError("rate limited", delay=30)
        >>> err.delay
        30.0
        >>> RetryableError("busy", delay="30")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        TypeError: RetryableError('busy') delay must be ... got '30'
    """

    def __init__(self, message: str = "", *, delay: float | timedelta | None = None) -> None:
        super().__init__(message)
        if isinstance(delay, timedelta):
            delay = delay.total_seconds()
        if delay is not None and (
            isinstance(delay, bool) or not isinstance(delay, int | float) or not 0 <= delay < float("inf")
        ):
            # (raised where the job raises its RetryableError: its message goes along, not lost)
            number = isinstance(delay, int | float) and not isinstance(delay, bool)
            raise (ValueError if number else TypeError)(
                f"{type(self).__name__}({message!r}) delay must be a finite number of seconds >= 0 or a "
                f"timedelta, got {delay!r}"
            )
        self.delay: float | None = None if delay is None else float(delay)


class Throttled(RetryableError):
    """The downstream asked to slow down (an HTTP 429 and its ``Retry-After``): the job is handed back
    to run again after ``delay`` seconds, and the try counts as no attempt and spends no retry budget,
    as BullMQ's ``RateLimitError`` and Sidekiq's ``OverLimit``. A job with ``rate=`` also holds its
    rate (its ``limit_group``'s, its ``rate_key``'s) until then, so that its other runs wait too,
    instead of each calling the downstream to be told the same.

    A job is handed back for throttles for an hour at most after its first; past that a throttle is
    a failure like a :class:`RetryableError` (an attempt, within the budget). ``run_inline`` lets it
    propagate, as any exception.

    Args:
        message: what the downstream said.
        delay: seconds (or a ``timedelta``) to wait; default 1.

    Example:
        >>> Throttled("429 from the CRM", delay=2.5).delay
        2.5
    """

    def __init__(self, message: str = "", *, delay: float | timedelta = 1.0) -> None:
        super().__init__(message, delay=delay)

    @classmethod
    def after(cls, retry_after: str | None, message: str = "", *, default: float = 1.0) -> Throttled:
        """A throttle for an HTTP ``Retry-After`` header: seconds (``"3"``) or an HTTP date (``"Wed, 21
        Oct 2026 07:28:00 GMT"``); ``default`` seconds when it is missing, unreadable or past.

        Example:
            >>> Throttled.after("3", "429 from the CRM").delay, Throttled.after(None).delay
            (3.0, 1.0)
            >>> Throttled.after("Wed, 21 Oct 2015 07:28:00 GMT").delay  # (past)
            1.0
        """
        return cls(message, delay=_retry_after_seconds(retry_after, default))


def _retry_after_seconds(value: str | None, default: float) -> float:
    if not value or not value.strip():
        return default
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        from datetime import UTC, datetime
        from email.utils import parsedate_to_datetime

        try:
            seconds = (parsedate_to_datetime(text) - datetime.now(UTC)).total_seconds()
        except (TypeError, ValueError):
            return default
    return seconds if 0 < seconds < float("inf") else default


class PermanentError(Exception):
    """A failure that no retry can fix: the job is dead-lettered at once (reason ``permanent``)."""


class JobCancelled(Exception):
    """Raised by a running job to stop after a cancel (``ctx.stop_if_cancelled()`` raises it when
    ``ctx.cancelled``): the record is acknowledged, no attempt follows, and the job's status becomes
    ``cancelled`` with reason ``cancelled while running``."""


class EnqueueOptionError(ConfigurationError):
    """A bad value of an enqueue's option (``delay``, ``expires_in``, ``debounce``, ``dedup_window``) or a
    combination that cannot run: the caller's argument (``jf enqueue`` exits 2 for it)."""


class UnknownOptionError(ConfigurationError, TypeError):
    """An option ``@job`` or an enqueue does not take (a ``TypeError`` too, as Python's own was); the
    message says what to write instead (``countdown=`` is ``delay=``)."""


class UnknownEnqueueOptionError(UnknownOptionError, EnqueueOptionError):
    """An option an enqueue does not take: an :class:`EnqueueOptionError` too, which a 202 handler
    answers 400."""


class SettingError(ConfigurationError):
    """A ``JF_*`` variable's value is not one its setting takes (the message names the variable)."""


class TopologyParameterNotFound(ConfigurationError):
    """No SSM parameter of the topology's name: a name to fix (its app and stage), not a grant to add."""


class DuplicateJobError(ConfigurationError):
    """Two jobs were registered under the same name."""


class UnknownJobError(JobFrameworkError, LookupError):
    """No job is registered under the given name."""


class PayloadValidationError(JobFrameworkError, ValueError):
    """A payload does not match its job's model; nothing was sent.

    ``fields`` says what is wrong field by field, fit to hand back to an HTTP caller as it is:
    ``[{"field": "report_id", "message": "Input should be a valid string"}]`` (``field`` is the
    dotted path, ``items.0.sku``; ``""`` for the payload as a whole). ``str(exc)`` is for the
    producer's developers: it names the job and its model, and says how to send an older version.

    Example:
        >>> error = PayloadValidationError("payload for t.x: n: Field required", [("n", "Field required")])
        >>> error.fields
        [{'field': 'n', 'message': 'Field required'}]
    """

    def __init__(self, message: str, fields: Sequence[tuple[str, str]] | None = None) -> None:
        super().__init__(message)
        self.fields: list[dict[str, str]] = [
            {"field": field, "message": text}
            for field, text in (fields if fields is not None else [("", message)])
        ]


class PayloadTooLargeError(JobFrameworkError, ValueError):
    """A message would exceed the SQS size limit; nothing was sent."""


class MalformedMessageError(JobFrameworkError, ValueError):
    """A queue message is not a valid jobframework envelope."""


class EnqueueError(JobFrameworkError):
    """SQS refused or failed to take a message after the client's retries."""


class StatusUnavailableError(JobFrameworkError):
    """A job's status could not be read now (the state table unreachable, throttled or refusing):
    answer a caller 503 and let it ask again; nothing about the job is known from this."""


class EnqueueManyError(EnqueueError):
    """``enqueue_many(..., raise_on_error=True)``: some entries were not sent (the others were).

    Attributes:
        results: every entry's ``EnqueueResult``, in order (``.ok`` false and ``.error`` set on those
            not sent, whose dedup keys were released: resend those).
    """

    def __init__(self, message: str, results: list[Any]) -> None:
        super().__init__(message)
        self.results = results


class EndpointNotSupportedError(JobFrameworkError):
    """The AWS endpoint does not implement an operation (e.g. the embedded AWS and native redrive)."""


class PayloadVersionError(JobFrameworkError, ValueError):
    """A payload's schema version cannot be brought to the job's (dead-lettered with reason ``version``)."""


class SignatureError(JobFrameworkError, ValueError):
    """A message is unsigned, tampered with, or signed under an unknown key id (reason ``signature``)."""


class PayloadStoreError(JobFrameworkError):
    """An offloaded payload could not be stored or fetched (S3)."""


class PayloadMissingError(JobFrameworkError):
    """An offloaded payload is gone from S3 (expired or deleted): the job can never run from this message."""


class JobTimedOut(TimeoutError):
    """An ``async def`` job ran past its ``timeout=``: its task was cancelled (a transient failure,
    retried as a timeout is). A plain ``def`` job cannot be stopped; it overruns, logged and counted."""

    def __init__(self, timeout: float) -> None:
        super().__init__(
            f"the job ran past its timeout={timeout:g} s and was stopped (an async job's task is cancelled "
            "at its timeout; give it a longer timeout=, or check ctx.time_left between steps)"
        )
        self.timeout = timeout
