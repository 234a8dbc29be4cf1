"""What ``@job`` is given, checked: the option types (:class:`Schedule`, :class:`BatchOptions`,
:class:`WhenBacklogged`) and the decorator's options as :class:`JobOptions` (the function's signature:
:mod:`jobframework.job_signature`).

Every check raises :class:`~jobframework.core.ConfigurationError` naming what to change.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from datetime import timedelta
from enum import StrEnum
from typing import Any

from jobframework.budget_keys import RetryBudgetOption, checked_retry_budget
from jobframework.classification import PermanentRule, exception_types, permanent_rules
from jobframework.core import (
    LAMBDA_MAX_TIMEOUT,
    MAX_JOB_TIMEOUT,
    ConfigurationError,
    Priority,
    Profile,
    duration_seconds,
    parse_priority,
)
from jobframework.flow.options import FlowOptions, flow_options
from jobframework.retry import RetryPolicy, default_policy

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_\-]*(\.[A-Za-z0-9_\-]+)*$")


@dataclass(frozen=True, slots=True)
class Schedule:
    """When a scheduled job runs: an EventBridge Scheduler expression and the payload it sends.

    Args:
        expression: ``rate(5 minutes)`` or ``cron(0 3 * * ? *)`` (EventBridge syntax).
        timezone: IANA time zone for cron expressions (default UTC).
        payload: the payload each run receives (validated against the job's model).
    """

    expression: str
    timezone: str = "UTC"
    payload: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from jobframework.schedule_expr import check_schedule

        object.__setattr__(self, "expression", check_schedule(self.expression, self.timezone, self.payload))


@dataclass(frozen=True, slots=True)
class BatchOptions:
    """Run many payloads of one type in one call (e.g. one SMTP connection for 500 emails).

    Args:
        max_size: at most this many records per call (the event source mapping's batch size, up to
            10,000; over 10 needs a batching window of at least 1 s, which is then applied).
        max_wait: seconds to gather a batch before the call (the batching window, up to 300).
    """

    max_size: int = 100
    max_wait: float = 1.0

    def __post_init__(self) -> None:
        if (
            isinstance(self.max_size, bool)
            or not isinstance(self.max_size, int)
            or not 1 <= self.max_size <= 10_000
        ):
            raise ConfigurationError(
                f"BatchOptions max_size must be an int within 1..10000, got {self.max_size!r}"
            )
        if not 0 <= self.max_wait <= 300:
            raise ConfigurationError(
                f"BatchOptions max_wait must be within 0..300 seconds, got {self.max_wait!r}"
            )


class WhenBacklogged(StrEnum):
    """What a scheduled run does when its queue is backlogged."""

    RUN = "run"
    SKIP = "skip"
    DEFER = "defer"


@dataclass(frozen=True, slots=True)
class JobOptions:
    """The options of one job, checked: the keyword arguments of :class:`~jobframework.jobs.Job`."""

    priority: Priority
    retry: RetryPolicy
    permanent: tuple[PermanentRule, ...]
    transient: tuple[type[BaseException], ...]
    key: Callable[[Any], str] | None
    timeout: float
    schedule: Schedule | None
    version: int
    upgrade: dict[int, Callable[[dict[str, Any]], dict[str, Any]]]
    idempotent: bool
    dedup_window: float | None
    batch: BatchOptions | None
    profile: Profile | None
    when_backlogged: WhenBacklogged
    backlog_depth: int
    backlog_age: float | None
    flow: FlowOptions
    track: bool
    retry_budget: RetryBudgetOption

    def as_kwargs(self) -> dict[str, Any]:
        """The options as :class:`~jobframework.jobs.Job`'s keyword arguments."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def checked_options(
    name: str,
    *,
    priority: Priority | str,
    retry: RetryPolicy | None,
    permanent: PermanentRule | tuple[PermanentRule, ...],
    transient: type[BaseException] | tuple[type[BaseException], ...],
    key: Callable[[Any], str] | None,
    timeout: float | timedelta,
    schedule: Schedule | str | None,
    version: int,
    upgrade: Mapping[int, Callable[[dict[str, Any]], dict[str, Any]]] | None,
    idempotent: bool | None,
    dedup_window: float | timedelta | None,
    track: bool | None,
    batch: BatchOptions | None,
    profile: Profile | str | None,
    when_backlogged: WhenBacklogged | str,
    backlog_depth: int,
    backlog_age: float | timedelta | None,
    expires_after: float | timedelta | None,
    tenant: Callable[[Any], str] | None,
    concurrency: int | None,
    concurrency_key: Callable[[Any], str] | None,
    rate: str | None,
    rate_key: Callable[[Any], str] | None,
    ordered_by: Callable[[Any], str] | None,
    retry_budget: RetryBudgetOption | None = None,
    limit_group: str | None = None,
) -> JobOptions:
    """``@job``'s options checked (see :func:`jobframework.jobs.job` for what each means)."""
    if callable(name):
        raise ConfigurationError(
            f'@job needs the job\'s name: write @job("area.verb") above {getattr(name, "__name__", name)}, '
            'e.g. @job("reports.generate")'
        )
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigurationError(
            f"job name {name!r} is not valid: use letters, digits, '-', '_' and dots, e.g. 'reports.generate'"
        )
    try:
        prio = parse_priority(priority)
    except ConfigurationError as exc:
        raise ConfigurationError(f"job {name}: {exc}") from None
    if retry is not None and not isinstance(retry, RetryPolicy):
        raise ConfigurationError(f"job {name}: retry= must be a RetryPolicy, got {_with_hint(retry)}")
    policy = retry or default_policy(prio)
    permanent_types = permanent_rules(permanent, name)
    transient_types = exception_types(transient, "transient", name)
    both = {t for t in permanent_types if isinstance(t, type)} & set(transient_types)
    if both:
        raise ConfigurationError(
            f"job {name}: {', '.join(t.__name__ for t in both)} is both permanent= and transient=; choose one"
        )
    if key is not None and not callable(key):
        raise ConfigurationError(f"job {name}: key= must be a function of the payload returning a str")
    seconds = duration_seconds(timeout, f"job {name}: timeout")
    if not 0 < seconds <= MAX_JOB_TIMEOUT:
        raise ConfigurationError(
            f"job {name}: timeout must be more than 0 and at most {MAX_JOB_TIMEOUT:,.0f} seconds (12 hours: "
            f"SQS hides a message that long at most; over {LAMBDA_MAX_TIMEOUT:,.0f} the job runs on "
            f"jf worker), got {seconds:,.0f}; split longer work into smaller jobs"
        )
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ConfigurationError(f"job {name}: version must be an int >= 1, got {version!r}")
    if version > 1 and upgrade is None:
        raise ConfigurationError(
            f"job {name}: version={version} without upgrade=: the version-{version - 1} payloads still "
            f"queued (and any redriven later) would be dead-lettered, reason version. Give upgrade="
            f"{{{version - 1}: fn}}, fn turning a version-{version - 1} payload dict into version {version} "
            "(lambda p: p when only its meaning, not its shape, stayed the same), or upgrade={} to take "
            f"version-{version} payloads only"
        )
    steps = dict(upgrade or {})
    for step, fn in steps.items():
        if not isinstance(step, int) or not 1 <= step < version or not callable(fn):
            raise ConfigurationError(
                f"job {name}: upgrade= maps an older version n (1 <= n < {version}) to a function that "
                f"turns a version-n payload dict into version n+1; got {step!r}: {fn!r}"
            )
    gaps = [n for n in range(min(steps, default=version), version) if n not in steps]
    if gaps:  # a payload upgraded from the oldest step could never reach the job's version
        raise ConfigurationError(
            f"job {name}: upgrade= has no step from version {gaps[0]} to {gaps[0] + 1}: a version-"
            f"{min(steps)} payload could not reach version {version}; give a function for every version "
            f"from {min(steps)} to {version - 1}"
        )
    window = None if dedup_window is None else duration_seconds(dedup_window, f"job {name}: dedup_window")
    if window is not None and not 0 <= window <= 7 * 24 * 3600:
        raise ConfigurationError(
            f"job {name}: dedup_window must be 0 (off) to 7 days (604,800 s), got {window:,.0f} s"
        )
    if batch is not None and not isinstance(batch, BatchOptions):
        raise ConfigurationError(f"job {name}: batch= takes BatchOptions(max_size=..., max_wait=...)")
    if batch is not None and idempotent:
        raise ConfigurationError(
            f"job {name}: idempotent=True cannot go with batch=: a batched call runs its items together, "
            "not each under its own key's claim, so a redelivered item runs again; drop idempotent= "
            "and make the handler safe to repeat (dedup enqueues with key= and dedup_window=), or use a "
            "plain job"
        )
    try:
        prof = Profile(profile) if profile is not None else None
    except ValueError:
        raise ConfigurationError(f"job {name}: profile must be 'io' or 'cpu', got {profile!r}") from None
    try:
        backlogged = WhenBacklogged(when_backlogged)
    except ValueError:
        raise ConfigurationError(
            f"job {name}: when_backlogged must be 'run', 'skip' or 'defer', got {when_backlogged!r}"
        ) from None
    if backlogged is not WhenBacklogged.RUN and schedule is None:
        raise ConfigurationError(f"job {name}: when_backlogged= applies to scheduled jobs: add schedule=")
    if isinstance(backlog_depth, bool) or not isinstance(backlog_depth, int) or backlog_depth < 1:
        raise ConfigurationError(f"job {name}: backlog_depth must be an int >= 1, got {backlog_depth!r}")
    age = None if backlog_age is None else duration_seconds(backlog_age, f"job {name}: backlog_age")
    try:
        sched = Schedule(schedule) if isinstance(schedule, str) else schedule
    except ConfigurationError as exc:  # the expression's own message, said of this job
        raise ConfigurationError(f"job {name}: {exc}") from None
    if sched is not None and not isinstance(sched, Schedule):
        raise ConfigurationError(
            f"job {name}: schedule= takes a Schedule or an expression string{_every(sched)}"
        )
    flow = flow_options(
        name,
        expires_after=expires_after,
        tenant=tenant,
        concurrency=concurrency,
        concurrency_key=concurrency_key,
        rate=rate,
        rate_key=rate_key,
        ordered_by=ordered_by,
        limit_group=limit_group,
    )
    if ordered_by is not None and (batch is not None or sched is not None):
        raise ConfigurationError(
            f"job {name}: ordered_by= cannot go with {'batch=' if batch is not None else 'schedule='}: "
            "an ordered job runs one record of its group at a time, in order, from a FIFO queue (batched "
            "calls and EventBridge schedules do not carry a message group); drop one of them"
        )
    return JobOptions(
        priority=prio,
        retry=policy,
        permanent=permanent_types,
        transient=transient_types,
        key=key,
        timeout=seconds,
        schedule=sched,
        version=version,
        upgrade=steps,
        idempotent=batch is None if idempotent is None else bool(idempotent),
        dedup_window=window,
        batch=batch,
        profile=prof,
        when_backlogged=backlogged,
        backlog_depth=backlog_depth,
        backlog_age=age,
        flow=flow,
        track=sched is not None if track is None else flag(track, f"job {name}: track"),
        retry_budget=checked_retry_budget(retry_budget, name),
    )


def flag(value: object, what: str) -> bool:
    """A ``True``/``False`` option, or a ConfigurationError that says so (not any truthy value)."""
    if not isinstance(value, bool):
        raise ConfigurationError(f"{what} must be True or False, got {value!r}")
    return value


def _with_hint(retry: object) -> str:
    """A ``retry=`` that is not a policy, with the policy a number of attempts would be.

    Example:
        >>> _with_hint(3), _with_hint("x")
        ('3 (retry=RetryPolicy(max_attempts=3))', "'x'")
        >>> _with_hint({"max_attempts": 3})
        "{'max_attempts': 3} (retry=RetryPolicy(max_attempts=3))"
        >>> _with_hint({"attempts": 3})  # (no such field: no policy to suggest)
        "{'attempts': 3}"
    """
    if type(retry) is int and retry >= 1:
        return f"{retry} (retry=RetryPolicy(max_attempts={retry}))"
    if isinstance(retry, dict) and retry and _is_policy(retry):
        return f"{retry!r} (retry=RetryPolicy({', '.join(f'{k}={v!r}' for k, v in retry.items())}))"
    return repr(retry)


def _is_policy(fields: dict[Any, Any]) -> bool:
    """Whether ``RetryPolicy(**fields)`` is a policy (a hint must not suggest one that is not)."""
    from jobframework.retry import RetryPolicy

    try:
        RetryPolicy(**fields)
    except Exception:  # (a field it does not take, a value out of range: no hint)
        return False
    return True


def _every(schedule: object) -> str:
    """A ``schedule=`` of seconds (Celery beat's), as the rate it would be.

    Example:
        >>> _every(300)
        " (every 300 seconds: schedule='rate(5 minutes)')"
        >>> _every(60.0), _every("x")
        (" (every 60 seconds: schedule='rate(1 minute)')", '')
    """
    if isinstance(schedule, bool) or not isinstance(schedule, int | float) or schedule < 60:
        return ""
    minutes = round(schedule / 60)
    return f" (every {schedule:g} seconds: schedule='rate({minutes} minute{'s' if minutes > 1 else ''})')"
