"""``@job``: typed jobs, their context, and the registry that names them.

A job is a function whose first parameter is annotated with a pydantic model (the
payload) and whose optional second parameter is a :class:`JobContext`::

    @job("reports.generate", priority=Priority.LOW, key=lambda r: f"report:{r.report_id}")
    def generate_report(req: ReportRequest, ctx: JobContext) -> None: ...

Options are keyword-only and checked when the decorator is applied.
"""

from __future__ import annotations

import inspect
import logging
import re
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from jobframework.core import (
    FIFO_MAX_BATCH,
    FIFO_SUFFIX,
    LAMBDA_MAX_TIMEOUT,
    MAX_JOB_TIMEOUT,
    ConfigurationError,
    Priority,
    Profile,
    duration_seconds,
    is_fifo_lane,
    lane_name,
    lane_priority,
    lane_profile,
    lane_sort_key,
    parse_priority,
)
from jobframework.errors import DuplicateJobError, PayloadVersionError, UnknownJobError
from jobframework.flow.options import FlowOptions, flow_options
from jobframework.retry import RetryPolicy, default_policy
from jobframework.running import check_runnable
from jobframework.validation import validation_problems

if TYPE_CHECKING:
    from jobframework.client import EnqueueRequest, EnqueueResult, JobClient


__all__ = [
    "FIFO_MAX_BATCH",
    "FIFO_SUFFIX",
    "LAMBDA_MAX_TIMEOUT",
    "MAX_JOB_TIMEOUT",
    "BatchOptions",
    "Job",
    "JobContext",
    "JobRegistry",
    "Priority",
    "Profile",
    "Schedule",
    "WhenBacklogged",
    "is_fifo_lane",
    "job",
    "lane_name",
    "lane_priority",
    "lane_profile",
    "lane_sort_key",
    "parse_priority",
    "registry",
]

P = TypeVar("P", bound=BaseModel)

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


@dataclass(slots=True)
class JobContext:
    """What a running job knows about itself.

    Durations are seconds; ``remaining_time`` is what is left of the Lambda invocation.
    """

    job_id: str
    job_type: str
    key: str
    attempt: int
    max_attempts: int
    priority: Priority
    enqueued_at: datetime
    trace_id: str | None = None
    traceparent: str | None = None
    xray_trace_header: str | None = None
    saga: dict[str, Any] | None = None
    logger: Any = field(default_factory=lambda: logging.getLogger("jobframework.job"))
    """Powertools Logger in the consumer (job id, type and trace id on every line); a std logger inline."""
    _remaining: Callable[[], float] = field(default=lambda: float("inf"), repr=False)

    @property
    def remaining_time(self) -> float:
        """Seconds left before the Lambda invocation is cut off (``inf`` outside Lambda)."""
        return self._remaining()

    @property
    def is_last_attempt(self) -> bool:
        return self.attempt >= self.max_attempts

    @property
    def cancelled(self) -> bool:
        """``True`` once ``client.cancel(job_id)`` asked this job to stop (read at most once a second).

        A long job checks it between steps and returns (or raises) to stop early; see
        :mod:`jobframework.flow.cancel`. Always ``False`` outside the consumer.
        """
        from jobframework.flow.cancel import cancel_requested

        return cancel_requested(self.job_id)


class Job(Generic[P]):
    """A registered job: its name, payload model, options and function. Made by :func:`job`."""

    def __init__(
        self,
        name: str,
        fn: Callable[..., Any],
        payload_model: type[P],
        *,
        takes_context: bool,
        priority: Priority,
        retry: RetryPolicy,
        permanent: tuple[type[BaseException], ...],
        transient: tuple[type[BaseException], ...],
        key: Callable[[P], str] | None,
        timeout: float,
        schedule: Schedule | None,
        version: int = 1,
        upgrade: Mapping[int, Callable[[dict[str, Any]], dict[str, Any]]] | None = None,
        idempotent: bool = True,
        dedup_window: float | None = None,
        batch: BatchOptions | None = None,
        profile: Profile | None = None,
        when_backlogged: WhenBacklogged = WhenBacklogged.RUN,
        backlog_depth: int = 1000,
        backlog_age: float | None = None,
        flow: FlowOptions | None = None,
        track: bool = False,
    ) -> None:
        self.name = name
        self.fn = fn
        self.payload_model = payload_model
        self.takes_context = takes_context
        self.priority = priority
        self.retry = retry
        self.permanent = permanent
        self.transient = transient
        self.key_fn = key
        self.timeout = timeout
        self.schedule = schedule
        self.version = version
        self.upgraders = dict(upgrade or {})
        self.idempotent = idempotent
        self.dedup_window = dedup_window
        self.batch = batch
        self.profile = profile
        self.when_backlogged = when_backlogged
        self.backlog_depth = backlog_depth
        self.backlog_age = backlog_age
        self.flow = flow if flow is not None else FlowOptions()
        """Expiry, tenant, concurrency and rate limits (:mod:`jobframework.flow`)."""
        self.track = track
        """Keep a status record readable by id (``client.status``); enqueues may override it."""
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def __repr__(self) -> str:
        return f"<Job {self.name} priority={self.priority.value} max_attempts={self.retry.max_attempts}>"

    @property
    def lane(self) -> str:
        """The queue this job goes to: its priority, or ``<priority>-<profile>``; ``-fifo`` after
        either for an ordered job."""
        return lane_name(self.priority, self.profile, fifo=self.ordered)

    @property
    def ordered(self) -> bool:
        """The job has ``ordered_by``: it runs on a FIFO lane, in enqueue order within its group."""
        return self.flow.ordered_by is not None

    def __call__(self, payload: P, ctx: JobContext | None = None) -> Any:
        """Call the function directly (no queue): ``ctx`` is required if the job takes one."""
        if self.takes_context:
            return self.fn(payload, ctx)
        return self.fn(payload)

    def validate(self, payload: P | dict[str, Any]) -> P:
        """The payload as the job's model; raises pydantic ``ValidationError``."""
        if isinstance(payload, self.payload_model):
            return payload
        if isinstance(payload, BaseModel):
            payload = payload.model_dump(mode="json")
        return self.payload_model.model_validate(payload)

    def upgrade(self, payload: dict[str, Any], from_version: int) -> dict[str, Any]:
        """Bring a payload of an older schema version up to :attr:`version`, one step at a time.

        Raises:
            PayloadVersionError: the version is newer than this job knows, or no upgrade step exists.
        """
        if from_version > self.version:
            raise PayloadVersionError(
                f"{self.name} payload is version {from_version}, newer than this consumer's {self.version}: "
                "deploy the new handler before producers send the new schema"
            )
        for step in range(from_version, self.version):
            upgrader = self.upgraders.get(step)
            if upgrader is None:
                raise PayloadVersionError(
                    f"{self.name} has no upgrade from payload version {step} to {step + 1}"
                )
            try:
                payload = upgrader(payload)
            except Exception as exc:
                raise PayloadVersionError(f"{self.name} upgrade from version {step} failed: {exc!r}") from exc
            if not isinstance(payload, dict):
                raise PayloadVersionError(
                    f"{self.name} upgrade from version {step} returned {type(payload).__name__}"
                )
        return payload

    def key_for(self, payload: P) -> str | None:
        """The deterministic key the job's ``key=`` function gives, or ``None``."""
        if self.key_fn is None:
            return None
        key = self.key_fn(payload)
        if not isinstance(key, str) or not key:
            raise ConfigurationError(f"job {self.name}: key= must return a non-empty str, got {key!r}")
        return key

    def request(self, payload: P | dict[str, Any], **options: Any) -> EnqueueRequest:
        """An :class:`~jobframework.client.EnqueueRequest` for ``JobClient.enqueue_many``."""
        from jobframework.client import EnqueueRequest

        return EnqueueRequest(self, payload, **options)

    def enqueue(
        self, payload: P | dict[str, Any], *, client: JobClient | None = None, **options: Any
    ) -> EnqueueResult:
        """Send this job to its queue; same options as :meth:`JobClient.enqueue`."""
        from jobframework.client import default_client

        return (client or default_client()).enqueue(self, payload, **options)

    def enqueue_many(
        self, payloads: list[P] | list[dict[str, Any]], *, client: JobClient | None = None, **options: Any
    ) -> list[EnqueueResult]:
        """Send many payloads of this job, ten per SQS call."""
        from jobframework.client import default_client

        return (client or default_client()).enqueue_many([self.request(p, **options) for p in payloads])


class JobRegistry:
    """Jobs by name. The consumer runs only registered jobs."""

    def __init__(self) -> None:
        self._jobs: dict[str, Job[Any]] = {}

    def register(self, job_: Job[Any]) -> None:
        existing = self._jobs.get(job_.name)
        if existing is not None and existing.fn is not job_.fn:
            raise DuplicateJobError(
                f"a job named {job_.name!r} is already registered by "
                f"{existing.fn.__module__}.{existing.fn.__qualname__}; job names must be unique"
            )
        self._jobs[job_.name] = job_

    def get(self, name: str) -> Job[Any]:
        try:
            return self._jobs[name]
        except KeyError:
            raise UnknownJobError(f"no job named {name!r} is registered") from None

    def find(self, name: str) -> Job[Any] | None:
        return self._jobs.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._jobs

    def __iter__(self) -> Iterator[Job[Any]]:
        return iter(sorted(self._jobs.values(), key=lambda j: j.name))

    def __len__(self) -> int:
        return len(self._jobs)

    def clear(self) -> None:
        self._jobs.clear()


registry = JobRegistry()
"""The default registry that :func:`job` registers into."""


def _payload_model(fn: Callable[..., Any], name: str, batched: bool = False) -> tuple[type[BaseModel], bool]:
    params = list(inspect.signature(fn).parameters.values())
    if not params or params[0].kind not in (params[0].POSITIONAL_ONLY, params[0].POSITIONAL_OR_KEYWORD):
        raise ConfigurationError(
            f"job {name}: the function must take the payload as its first parameter, annotated with a "
            "pydantic model (def my_job(payload: MyModel, ctx: JobContext) -> None)"
        )
    try:
        hints = typing.get_type_hints(fn)
    except Exception as exc:
        raise ConfigurationError(
            f"job {name}: cannot resolve the type hints of {fn.__qualname__}: {exc}"
        ) from exc
    model = hints.get(params[0].name)
    if batched:
        args = typing.get_args(model)
        if typing.get_origin(model) is not list or len(args) != 1:
            raise ConfigurationError(
                f"job {name}: a batched job takes a list of payloads: annotate {params[0].name!r} as "
                "list[MyModel] (def send(emails: list[Email], ctx: JobContext) -> list[...])"
            )
        model = args[0]
    if not (inspect.isclass(model) and issubclass(model, BaseModel)):
        raise ConfigurationError(
            f"job {name}: annotate the first parameter {params[0].name!r} with a pydantic BaseModel "
            f"subclass (got {model!r})"
        )
    extra = params[1:]
    if len(extra) > 1 or (
        extra
        and extra[0].default is inspect.Parameter.empty
        and hints.get(extra[0].name) not in (JobContext, None)
    ):
        raise ConfigurationError(
            f"job {name}: after the payload a job takes at most one parameter, the JobContext"
        )
    return model, bool(extra)


def _exception_types(value: Any, option: str, name: str) -> tuple[type[BaseException], ...]:
    types = value if isinstance(value, tuple | list | set | frozenset) else (value,)
    for t in types:
        if not (inspect.isclass(t) and issubclass(t, BaseException)):
            raise ConfigurationError(f"job {name}: {option}= takes exception classes, got {t!r}")
    return tuple(types)


def job(
    name: str,
    *,
    priority: Priority | str = Priority.DEFAULT,
    retry: RetryPolicy | None = None,
    permanent: type[BaseException] | tuple[type[BaseException], ...] = (),
    transient: type[BaseException] | tuple[type[BaseException], ...] = (),
    key: Callable[[Any], str] | None = None,
    timeout: float | timedelta = 60.0,
    schedule: Schedule | str | None = None,
    version: int = 1,
    upgrade: Mapping[int, Callable[[dict[str, Any]], dict[str, Any]]] | None = None,
    idempotent: bool = True,
    dedup_window: float | timedelta | None = None,
    track: bool | None = None,
    batch: BatchOptions | None = None,
    profile: Profile | str | None = None,
    when_backlogged: WhenBacklogged | str = WhenBacklogged.RUN,
    backlog_depth: int = 1000,
    backlog_age: float | timedelta | None = None,
    expires_after: float | timedelta | None = None,
    tenant: Callable[[Any], str] | None = None,
    concurrency: int | None = None,
    concurrency_key: Callable[[Any], str] | None = None,
    rate: str | None = None,
    rate_key: Callable[[Any], str] | None = None,
    ordered_by: Callable[[Any], str] | None = None,
    registry: JobRegistry | None = None,
) -> Callable[[Callable[..., Any]], Job[Any]]:
    """Register a function as a job.

    Args:
        name: stable name that travels in every message (``area.verb``), e.g. ``emails.send``.
        priority: queue: ``critical``, ``high``, ``default`` or ``low``.
        retry: the :class:`RetryPolicy`; the priority's default when ``None``.
        permanent: exception types never retried (dead-lettered at once).
        transient: exception types always retried (within ``max_attempts``), even subclasses of
            ``PermanentError``.
        key: a function of the payload giving the deterministic idempotency/dedup key.
        timeout: seconds one attempt may take. The consumer does not start a job when less time than
            this is left in the invocation. Up to 900 (Lambda's limit) a job runs on Lambda; longer (up
            to 12 hours) it runs on ``jf worker`` (a container lane: ``-c container_workers=<lane>``).
        schedule: run on a schedule: a :class:`Schedule` or an expression such as ``rate(1 hour)``,
            checked as EventBridge Scheduler checks it (:mod:`jobframework.schedule_expr`).
        version: the payload schema version this job reads (and producers send).
        upgrade: ``{n: fn}`` turning a version-``n`` payload dict into version ``n + 1``; the consumer
            upgrades older payloads before validation, and dead-letters newer ones (reason ``version``).
        idempotent: run at most once per key (Powertools idempotency on the state's idempotency
            table); ``False`` opts out.
        dedup_window: seconds during which a second enqueue with the same key sends nothing and
            returns the first job's id (needs a key: ``key=`` here or at enqueue); ``0`` turns the
            default dedup of enqueues given an explicit ``key=`` off for this job.
        track: keep the job's status readable by id (``client.status``, ``jf status``, the console's
            job page, ``client.cancel``): one status write at enqueue, the cancel check's start
            claim and one batched outcome write; untracked jobs cost no status write at all.
            ``None`` (the default) tracks scheduled jobs only (a few runs an hour, and the console's
            last-run, heartbeat and missed-run views read their statuses). ``enqueue(..., track=)``
            overrides it per job.
        batch: :class:`BatchOptions`: the function takes ``list[Model]`` and returns one outcome per
            item (a value, or an exception instance for an item that failed), or ``None`` when all
            succeeded; each item is then retried or dead-lettered on its own.
        profile: ``io`` or ``cpu``: run on functions (and ``jf worker`` pools) shaped for that work;
            such jobs get a queue of their own per priority (``high-cpu``).
        when_backlogged: for scheduled jobs, what a run does when its queue's backlog is over
            ``backlog_depth`` messages (or its oldest is ``backlog_age`` seconds old): ``run``,
            ``skip`` (dropped, counted), or ``defer`` (put back until the backlog clears).
        expires_after: seconds (or ``timedelta``, up to 14 days) after the enqueue by which the job
            must have started; later it is dropped unrun with status ``expired`` (``enqueue(...,
            expires_in=...)`` overrides it per message).
        tenant: a function of the payload giving the tenant, sent as ``MessageGroupId`` (SQS fair
            queues; ``enqueue(..., tenant=...)`` overrides it).
        concurrency: at most this many runs of the job at once across every consumer (leases in the
            state table); with ``concurrency_key`` (a function of the payload) the cap is per key. A
            record over it is handed back for 1 to 3 s, not using an attempt.
        rate: at most this many starts per period across every consumer, e.g. ``"100/minute"``
            (``N/second``, ``N/minute``, ``N/hour``; a shared token bucket); per key with
            ``rate_key``. A record over it is handed back until the bucket has a token.
        ordered_by: a function of the payload giving its message group (a non-empty str, e.g.
            ``lambda p: p.account_id``): the job goes to a FIFO lane (``<priority>-fifo``) and the jobs
            of one group run one after another in enqueue order; a failing job holds back only its
            own group (:mod:`jobframework.fifo`). Not with ``batch=``, ``schedule=`` or ``tenant=``.
        registry: where to register (the default registry when ``None``).

    Raises:
        ConfigurationError: on a bad name, option or signature, naming what to change.
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigurationError(
            f"job name {name!r} is not valid: use letters, digits, '-', '_' and dots, e.g. 'reports.generate'"
        )
    prio = parse_priority(priority)
    if retry is not None and not isinstance(retry, RetryPolicy):
        raise ConfigurationError(f"job {name}: retry= must be a RetryPolicy, got {retry!r}")
    policy = retry or default_policy(prio)
    permanent_types = _exception_types(permanent, "permanent", name)
    transient_types = _exception_types(transient, "transient", name)
    both = set(permanent_types) & set(transient_types)
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
            f"jf worker), got {seconds:g}; split longer work into smaller jobs"
        )
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ConfigurationError(f"job {name}: version must be an int >= 1, got {version!r}")
    steps = dict(upgrade or {})
    for step, fn in steps.items():
        if not isinstance(step, int) or not 1 <= step < version or not callable(fn):
            raise ConfigurationError(
                f"job {name}: upgrade= maps an older version n (1 <= n < {version}) to a function that "
                f"turns a version-n payload dict into version n+1; got {step!r}: {fn!r}"
            )
    window = None if dedup_window is None else duration_seconds(dedup_window, f"job {name}: dedup_window")
    if window is not None and not 0 <= window <= 7 * 24 * 3600:
        raise ConfigurationError(
            f"job {name}: dedup_window must be 0 (off) to 7 days (604,800 s), got {window:g}s"
        )
    if batch is not None and not isinstance(batch, BatchOptions):
        raise ConfigurationError(f"job {name}: batch= takes BatchOptions(max_size=..., max_wait=...)")
    try:
        prof = Profile(profile) if profile is not None else None
        backlogged = WhenBacklogged(when_backlogged)
    except ValueError:
        raise ConfigurationError(
            f"job {name}: profile must be 'io' or 'cpu' and when_backlogged 'run', 'skip' or 'defer'"
        ) from None
    if backlogged is not WhenBacklogged.RUN and schedule is None:
        raise ConfigurationError(f"job {name}: when_backlogged= applies to scheduled jobs: add schedule=")
    if isinstance(backlog_depth, bool) or not isinstance(backlog_depth, int) or backlog_depth < 1:
        raise ConfigurationError(f"job {name}: backlog_depth must be an int >= 1, got {backlog_depth!r}")
    age = None if backlog_age is None else duration_seconds(backlog_age, f"job {name}: backlog_age")
    sched = Schedule(schedule) if isinstance(schedule, str) else schedule
    if sched is not None and not isinstance(sched, Schedule):
        raise ConfigurationError(f"job {name}: schedule= takes a Schedule or an expression string")
    flow = flow_options(
        name,
        expires_after=expires_after,
        tenant=tenant,
        concurrency=concurrency,
        concurrency_key=concurrency_key,
        rate=rate,
        rate_key=rate_key,
        ordered_by=ordered_by,
    )
    if ordered_by is not None and (batch is not None or sched is not None):
        raise ConfigurationError(
            f"job {name}: ordered_by= cannot go with {'batch=' if batch is not None else 'schedule='}: "
            "an ordered job runs one record of its group at a time, in order, from a FIFO queue (batched "
            "calls and EventBridge schedules do not carry a message group); drop one of them"
        )
    target = registry if registry is not None else globals()["registry"]

    def decorate(fn: Callable[..., Any]) -> Job[Any]:
        check_runnable(fn, name)  # async def runs; generators, classes and non-callables are refused
        model, takes_context = _payload_model(fn, name, batched=batch is not None)
        if sched is not None:
            try:
                model.model_validate(sched.payload)
            except ValidationError as exc:
                raise ConfigurationError(
                    f"job {name}: the schedule's payload does not match {model.__name__}: "
                    f"{validation_problems(exc)}; give it in Schedule({sched.expression!r}, payload={{...}})"
                ) from None
        created: Job[Any] = Job(
            name,
            fn,
            model,
            takes_context=takes_context,
            priority=prio,
            retry=policy,
            permanent=permanent_types,
            transient=transient_types,
            key=key,
            timeout=seconds,
            schedule=sched,
            version=version,
            upgrade=steps,
            idempotent=bool(idempotent),
            dedup_window=window,
            batch=batch,
            profile=prof,
            when_backlogged=backlogged,
            backlog_depth=backlog_depth,
            backlog_age=age,
            flow=flow,
            track=sched is not None if track is None else _flag(track, f"job {name}: track"),
        )
        target.register(created)
        return created

    return decorate


def _flag(value: object, what: str) -> bool:
    """A ``True``/``False`` option, or a ConfigurationError that says so (not any truthy value)."""
    if not isinstance(value, bool):
        raise ConfigurationError(f"{what} must be True or False, got {value!r}")
    return value
