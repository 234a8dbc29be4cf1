"""A job's flow-control options (``@job(expires_after=..., tenant=..., concurrency=..., rate=...,
ordered_by=...)``).

Plain values checked when the decorator is applied, with messages that say what to change; this
module imports nothing of the package but its errors.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from jobframework.errors import ConfigurationError, EnqueueOptionError

if TYPE_CHECKING:
    from jobframework.envelope import Envelope
    from jobframework.jobs import Job

MAX_EXPIRY_SECONDS = 14 * 24 * 3600
"""SQS keeps a message 14 days at most: a longer expiry could never apply."""
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*/\s*(second|sec|s|minute|min|m|hour|h)\s*$")
_PER = {"second": 1, "sec": 1, "s": 1, "minute": 60, "min": 60, "m": 60, "hour": 3600, "h": 3600}
_GROUP = re.compile(r"[A-Za-z0-9._-]{1,64}")


def expiry_seconds(value: float | timedelta | None, option: str = "expires_in") -> float | None:
    """An expiry as seconds (``None`` stays ``None``).

    Raises:
        EnqueueOptionError: not a number or timedelta, not positive, or over 14 days.

    Example:
        >>> expiry_seconds(timedelta(minutes=5)), expiry_seconds(None)
        (300.0, None)
    """
    if value is None:
        return None
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or math.isnan(seconds):
        raise EnqueueOptionError(f"{option} must be seconds (a number) or a timedelta, got {value!r}")
    if not 0 < seconds <= MAX_EXPIRY_SECONDS:
        raise EnqueueOptionError(
            f"{option} must be more than 0 and at most 14 days ({MAX_EXPIRY_SECONDS:,} s, SQS's longest "
            f"retention), got {seconds:,.0f} s"
        )
    return float(seconds)


def _expires_after(name: str, value: float | timedelta | None) -> float | None:
    """A job's ``expires_after`` (a decorator option: a ``ConfigurationError``, not an enqueue's)."""
    try:
        return expiry_seconds(value, f"job {name}: expires_after")
    except EnqueueOptionError as exc:
        raise ConfigurationError(str(exc)) from None


def _rate(name: str, rate: str | None) -> Rate | None:
    try:
        return Rate.parse(rate) if rate is not None else None
    except ConfigurationError as exc:
        raise ConfigurationError(f"job {name}: {exc}") from None


@dataclass(frozen=True, slots=True)
class Rate:
    """``limit`` acquisitions per ``per`` seconds (a token bucket of ``limit`` tokens).

    Example:
        >>> Rate.parse("100/minute")
        Rate(limit=100.0, per=60.0)
    """

    limit: float
    per: float

    @classmethod
    def parse(cls, text: str) -> Rate:
        m = _RATE.match(text) if isinstance(text, str) else None
        if m is None:
            raise ConfigurationError(
                f"rate {text!r} is not a rate; write it as N/second, N/minute or N/hour (or N/sec, N/s, "
                "N/min, N/m, N/h), e.g. '100/minute'"
            )
        if float(m.group(1)) <= 0:
            raise ConfigurationError(
                f"rate {text!r} would let no job run: N in N/{m.group(2)} must be above 0 (to stop a "
                "job type for a while, pause its queue: jf queue pause)"
            )
        return cls(float(m.group(1)), float(_PER[m.group(2)]))

    @property
    def per_second(self) -> float:
        return self.limit / self.per


@dataclass(frozen=True, slots=True)
class FlowOptions:
    """What :mod:`jobframework.flow` reads of a job."""

    expires_after: float | None = None
    tenant: Callable[[Any], str] | None = None
    concurrency: int | None = None
    concurrency_key: Callable[[Any], str] | None = None
    rate: Rate | None = None
    rate_key: Callable[[Any], str] | None = None
    ordered_by: Callable[[Any], str] | None = None
    """The message group of an ordered job (a FIFO lane): jobs of one group run in enqueue order."""
    limit_group: str | None = None
    """The name of the limits several job types share (one downstream's): their ``rate`` and
    ``concurrency`` count together, not per job type."""


def flow_options(
    name: str,
    *,
    expires_after: float | timedelta | None = None,
    tenant: Callable[[Any], str] | None = None,
    concurrency: int | None = None,
    concurrency_key: Callable[[Any], str] | None = None,
    rate: str | None = None,
    rate_key: Callable[[Any], str] | None = None,
    ordered_by: Callable[[Any], str] | None = None,
    limit_group: str | None = None,
) -> FlowOptions:
    """The checked options of job ``name``.

    Raises:
        ConfigurationError: a bad value, or a key function without its limit; the message says which.
    """
    for option, fn in (
        ("tenant", tenant),
        ("concurrency_key", concurrency_key),
        ("rate_key", rate_key),
        ("ordered_by", ordered_by),
    ):
        if fn is not None and not callable(fn):
            raise ConfigurationError(
                f"job {name}: {option}= must be a function of the payload returning a str"
            )
    if concurrency is not None and (
        isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1
    ):
        raise ConfigurationError(f"job {name}: concurrency must be an int >= 1, got {concurrency!r}")
    if concurrency_key is not None and concurrency is None:
        raise ConfigurationError(f"job {name}: concurrency_key= needs concurrency=N (the cap per key)")
    if rate_key is not None and rate is None:
        raise ConfigurationError(f"job {name}: rate_key= needs rate='N/minute' (the rate per key)")
    if limit_group is not None:
        _check_limit_group(name, limit_group, rate is not None or concurrency is not None)
    if ordered_by is not None and tenant is not None:
        raise ConfigurationError(
            f"job {name}: ordered_by= and tenant= both set the message group (MessageGroupId); an ordered "
            "job's group is its ordered_by value: drop tenant="
        )
    return FlowOptions(
        expires_after=_expires_after(name, expires_after),
        tenant=tenant,
        concurrency=concurrency,
        concurrency_key=concurrency_key,
        rate=_rate(name, rate),
        rate_key=rate_key,
        ordered_by=ordered_by,
        limit_group=limit_group,
    )


def _check_limit_group(name: str, group: object, limited: bool) -> None:
    if not isinstance(group, str) or not _GROUP.fullmatch(group):
        raise ConfigurationError(
            f"job {name}: limit_group= names the limits several job types share (letters, digits, '.', "
            f"'-', '_', at most 64), e.g. limit_group='crm'; got {group!r}"
        )
    if not limited:
        raise ConfigurationError(
            f"job {name}: limit_group={group!r} names the limit the job counts in, but it has none: give it "
            "rate= or concurrency= (the same as the group's other jobs)"
        )


def nothing_to_check(env: Envelope, job: Job[Any]) -> bool:
    """No flow gate (:mod:`jobframework.flow.gates`) would act on this job: the consumer's path for most
    records, which then never imports the gates (no lookup, no call).

    Keep it in step with the gates: expiry reads ``env.deadline``, debounce ``env.debounce``, the
    limits ``job.flow.rate`` and ``.concurrency``, the cancel check ``env.track``."""
    flow = job.flow
    return (
        env.deadline is None
        and env.debounce is None
        and not env.track
        and flow.rate is None
        and flow.concurrency is None
    )


def limit_key_of(job: Job[Any], payload: Any, kind: str) -> str | None:
    """What the job's ``concurrency_key=`` or ``rate_key=`` (``kind``) gives for ``payload`` (``None``:
    the job has none).

    Raises:
        ValueError: the function raised, or gave no non-empty str (a payload no limit can hold: the
            consumer dead-letters it with reason ``invalid-payload``, the client refuses it).
    """
    fn = job.flow.concurrency_key if kind == "concurrency" else job.flow.rate_key
    if fn is None:
        return None
    try:
        key = fn(payload)
    except Exception as exc:
        raise ValueError(
            f"job {job.name}: its {kind}_key= function raised {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(key, str) or not key:
        raise ValueError(f"job {job.name}: {kind}_key= must return a non-empty str, got {key!r}")
    return key


def check_limit_keys(job: Job[Any], payload: Any) -> None:
    """Raise :class:`ValueError` (see :func:`limit_key_of`) when a limit's key function fails."""
    for kind in ("concurrency", "rate"):
        limit_key_of(job, payload, kind)
