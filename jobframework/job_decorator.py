"""``@job``: the decorator that makes a function a registered, typed job (:class:`~jobframework.jobs.Job`).

Importable from :mod:`jobframework.jobs` and :mod:`jobframework` as before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from pydantic import ValidationError

from jobframework.budget_keys import RetryBudgetOption
from jobframework.classification import PermanentRule
from jobframework.core import ConfigurationError, Priority, Profile
from jobframework.job_options import BatchOptions, Schedule, WhenBacklogged, checked_options
from jobframework.job_signature import payload_model_of
from jobframework.job_typing import JobDecorator
from jobframework.job_unknown import refusing_unknown_options
from jobframework.masked_fields import masked_fields
from jobframework.registry import JobRegistry
from jobframework.retry import RetryPolicy
from jobframework.running import check_runnable
from jobframework.validation import validate_data, validation_problems

if TYPE_CHECKING:
    from jobframework.jobs import Job

__all__ = ["job"]


@refusing_unknown_options
def job(
    name: str | None = None,  # (None: @job() is refused, saying what to write)
    *,
    priority: Priority | str = Priority.DEFAULT,
    retry: RetryPolicy | None = None,
    permanent: PermanentRule | tuple[PermanentRule, ...] = (),
    transient: type[BaseException] | tuple[type[BaseException], ...] = (),
    key: Callable[[Any], str] | None = None,
    timeout: float | timedelta = 60.0,
    schedule: Schedule | str | None = None,
    version: int = 1,
    upgrade: Mapping[int, Callable[[dict[str, Any]], dict[str, Any]]] | None = None,
    idempotent: bool | None = None,
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
    limit_group: str | None = None,
    ordered_by: Callable[[Any], str] | None = None,
    retry_budget: RetryBudgetOption | None = None,
    registry: JobRegistry | None = None,
) -> JobDecorator:
    """Register a function as a job.

    Args:
        name: stable name that travels in every message (``area.verb``), e.g. ``emails.send``.
        priority: queue: ``critical``, ``high``, ``default`` or ``low``.
        retry: the :class:`RetryPolicy`; the priority's default when ``None``.
        permanent: exception types never retried (dead-lettered at once), unless a nearer type of
            ``transient`` matches (``permanent=(Exception,), transient=(ConnectionError,)``), and
            functions of the exception that say whether it is permanent, asked of every failure but
            a ``RetryableError`` (always retried) before the types (``lambda e: isinstance(e,
            httpx.HTTPStatusError) and e.response.status_code in (400, 404)``).
        transient: exception types always retried (within ``max_attempts``), even subclasses of
            ``PermanentError``.
        key: a function of the payload giving the deterministic idempotency/dedup key.
        timeout: seconds one attempt may take. The consumer does not start a job when less time than
            this is left in the invocation. Up to 900 (Lambda's limit) a job runs on Lambda; longer (up
            to 12 hours) it runs on ``jf worker`` (a container lane: the stack's ``container_lanes=``;
            the example app's ``-c container_workers=<lane>``).
        schedule: run on a schedule: a :class:`Schedule` or an expression such as ``rate(1 hour)``,
            checked as EventBridge Scheduler checks it (:mod:`jobframework.schedule_expr`).
        version: the payload schema version this job reads (and producers send).
        upgrade: ``{n: fn}`` turning a version-``n`` payload dict into version ``n + 1``; the consumer
            upgrades older payloads before validation, and dead-letters newer ones (reason ``version``).
        idempotent: run at most once per key (Powertools idempotency on the state's idempotency
            table); ``False`` opts out. ``None`` (the default): on for a plain job, off for a batched
            one, which cannot take it (its items run together, not each under its key's claim).
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
            ``rate_key``. A record over it reserves its turn and is handed back until then (see
            :mod:`jobframework.flow.limits`).
        limit_group: a name the jobs that call one downstream share (``"crm"``): their ``rate`` and
            ``concurrency`` count together (two job types at ``rate="2/second"`` make 2 calls a second
            between them, not 4). Every job of a group declares the same limits.
        ordered_by: a function of the payload giving its message group (a non-empty str, e.g.
            ``lambda p: p.account_id``): the job goes to a FIFO lane (``<priority>-fifo``) and the jobs
            of one group run one after another in enqueue order; a failing job holds back only its
            own group (:mod:`jobframework.fifo`). Not with ``batch=``, ``schedule=`` or ``tenant=``.
        retry_budget: the retry budget its retries are taken from: its queue's (``True``, the default),
            a named one shared by the jobs that call one downstream (``"smtp"``), one per name a
            function of the payload gives (``lambda p: p.url.host``: a dead host spends only its own),
            or none (``False``) (:mod:`jobframework.budget_keys`).
        registry: where to register (the default registry when ``None``).

    Raises:
        ConfigurationError: on a bad name, option or signature, naming what to change.
    """
    if name is None:  # (@job() with nothing in the brackets)
        raise ConfigurationError(
            '@job needs the job\'s name: @job("area.verb"), e.g. @job("reports.generate")'
        )
    opts = checked_options(
        name,
        priority=priority,
        retry=retry,
        permanent=permanent,
        transient=transient,
        key=key,
        timeout=timeout,
        schedule=schedule,
        version=version,
        upgrade=upgrade,
        idempotent=idempotent,
        dedup_window=dedup_window,
        track=track,
        batch=batch,
        profile=profile,
        when_backlogged=when_backlogged,
        backlog_depth=backlog_depth,
        backlog_age=backlog_age,
        expires_after=expires_after,
        tenant=tenant,
        concurrency=concurrency,
        concurrency_key=concurrency_key,
        rate=rate,
        rate_key=rate_key,
        ordered_by=ordered_by,
        retry_budget=retry_budget,
        limit_group=limit_group,
    )
    sched = opts.schedule
    from jobframework import jobs  # (jobs imports this module: its Job and registry, at call time)

    target = registry if registry is not None else jobs.registry

    def decorate(fn: Callable[..., Any]) -> Job[Any]:
        check_runnable(fn, name)  # async def runs; generators, classes and non-callables are refused
        model, takes_context = payload_model_of(fn, name, batched=opts.batch is not None)
        masked = masked_fields(model)
        if masked:
            raise ConfigurationError(
                f"job {name}: {model.__name__}.{masked[0]} is a pydantic secret, which JSON carries as "
                "'**********': the job would run on the mask. Put the secret in Secrets Manager or SSM "
                "and its name in the payload (the message, its dead letter and jf dlq export hold the "
                "payload as sent), or give the field a @field_serializer that says what to send"
            )
        if sched is not None:
            try:
                validate_data(model, sched.payload)
            except ValidationError as exc:
                raise ConfigurationError(
                    f"job {name}: the schedule's payload does not match {model.__name__}: "
                    f"{validation_problems(exc)}; give it in Schedule({sched.expression!r}, payload={{...}})"
                ) from None
        created: Job[Any] = jobs.Job(name, fn, model, takes_context=takes_context, **opts.as_kwargs())
        target.register(created)
        return created

    return cast(JobDecorator, decorate)
