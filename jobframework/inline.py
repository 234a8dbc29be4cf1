"""Run a job in-process as the consumer would: ``run_inline`` (a user's unit tests; importable from
:mod:`jobframework.testing`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar, cast, overload

from pydantic import BaseModel

from jobframework.default_client import enqueues_with
from jobframework.envelope import Envelope
from jobframework.errors import ConfigurationError, JobTimedOut
from jobframework.errortext import shown
from jobframework.jobs import UPGRADE_FIX_SENT, Job, JobContext
from jobframework.local.context import LocalLambdaContext
from jobframework.running import call, is_async
from jobframework.tracing import new_trace

if TYPE_CHECKING:
    from jobframework.client import JobClient
    from jobframework.recorder import EnqueueRecorder


M = TypeVar("M", bound=BaseModel)
R = TypeVar("R")


@overload
def run_inline(
    job: Job[M, R],
    payload: M | dict[str, Any],
    *,
    attempt: int = 1,
    key: str | None = None,
    timeout: float | None = None,
    job_id: str | None = None,
    payload_version: int | None = None,
    client: JobClient | EnqueueRecorder | None = None,
) -> R: ...
@overload
def run_inline(  # (a batched job's: one outcome per payload)
    job: Job[M, Any],
    payload: Sequence[M | dict[str, Any]],
    *,
    attempt: int = 1,
    key: str | None = None,
    timeout: float | None = None,
    job_id: str | None = None,
    payload_version: int | None = None,
    client: JobClient | EnqueueRecorder | None = None,
) -> list[Any]: ...
def run_inline(
    job: Job[M, Any],
    payload: M | dict[str, Any] | Sequence[M | dict[str, Any]],
    *,
    attempt: int = 1,
    key: str | None = None,
    timeout: float | None = None,
    job_id: str | None = None,
    payload_version: int | None = None,
    client: JobClient | EnqueueRecorder | None = None,
) -> Any:
    """Run a job in-process as the consumer would (payload upgraded and validated, a real
    ``JobContext``).

    Args:
        job: the job (what ``@job`` returned).
        payload: its model, or a dict validated against it (pydantic ``ValidationError`` otherwise);
            for a batched job (``batch=``), a list of them, which it is called with at once.
        payload_version: the version of a dict ``payload`` (default the job's ``version``): an older
            one goes through the job's ``upgrade=`` steps first, as the consumer's would
            (``PayloadVersionError`` when they cannot take it).
        attempt: ``ctx.attempt`` (``ctx.is_last_attempt`` when it is the job's ``max_attempts``).
        key: ``ctx.key``; the job's ``key=`` function's, else the job id, when ``None``.
        timeout: seconds of the fake Lambda invocation (``ctx.remaining_time``); the job's timeout + 5.
        job_id: ``ctx.job_id``; a new UUIDv7 when ``None``.
        client: where the jobs it enqueues (``other_job.enqueue(...)``) go: an
            :class:`~jobframework.testing.EnqueueRecorder` records them and sends nothing, a
            ``JobClient(jf_config)`` sends them to the embedded AWS (either wins over
            ``set_default_client``'s). Without one an enqueue raises ``ConfigurationError`` (it would
            go where ``JF_*`` points), unless ``set_default_client`` set a client.

    Returns what the job returns (an ``async def`` job is awaited, on the framework's own event loop, and
    cancelled at its ``timeout=``; a batched job's one outcome per payload, values and exception
    instances alike); its exceptions propagate, so a test can assert on them. Nothing touches AWS: no
    queue, no idempotency record, no status (what the job enqueues goes to ``client``). It blocks: from
    an ``async def`` test, ``await arun_inline(...)``.
    """
    arg, ctx = _prepared(
        job,
        payload,
        attempt=attempt,
        key=key,
        timeout=timeout,
        job_id=job_id,
        payload_version=payload_version,
    )
    with enqueues_with(_enqueuer(job, client), first=client is not None):
        try:
            return _outcomes(job, arg, call(job, arg, ctx, timeout=job.timeout))
        except JobTimedOut as exc:
            if _in_running_loop():
                exc.add_note(
                    "run_inline was called from a running event loop (an async test), which it blocks "
                    "while the job runs: a job waiting on that loop (a fake server started there) waits "
                    "for nothing; `await arun_inline(...)` runs the job on the test's loop"
                )
            raise


@overload
async def arun_inline(
    job: Job[M, R],
    payload: M | dict[str, Any],
    *,
    attempt: int = 1,
    key: str | None = None,
    timeout: float | None = None,
    job_id: str | None = None,
    payload_version: int | None = None,
    client: JobClient | EnqueueRecorder | None = None,
) -> R: ...
@overload
async def arun_inline(  # (a batched job's: one outcome per payload)
    job: Job[M, Any],
    payload: Sequence[M | dict[str, Any]],
    *,
    attempt: int = 1,
    key: str | None = None,
    timeout: float | None = None,
    job_id: str | None = None,
    payload_version: int | None = None,
    client: JobClient | EnqueueRecorder | None = None,
) -> list[Any]: ...
async def arun_inline(
    job: Job[M, Any],
    payload: M | dict[str, Any] | Sequence[M | dict[str, Any]],
    *,
    attempt: int = 1,
    key: str | None = None,
    timeout: float | None = None,
    job_id: str | None = None,
    payload_version: int | None = None,
    client: JobClient | EnqueueRecorder | None = None,
) -> Any:
    """:func:`run_inline` for an ``async def`` test (pytest-asyncio, anyio): the same arguments and
    outcomes, awaited. An ``async def`` job runs on the test's own event loop (so a fake server or
    client the test started on that loop answers it: ``run_inline`` there blocked the loop, and the
    job's call waited for a server that could not run), cancelled at its ``timeout=``; a plain ``def``
    job runs on a worker thread (``asyncio.to_thread``), so the loop keeps serving meanwhile.

    Example, in an ``async def`` test (``@pytest.mark.asyncio`` with pytest-asyncio)::

        async def test_sync_contact(fake_crm: FakeCrm) -> None:  # a server on the test's loop
            assert await arun_inline(sync_contact, {"contact_id": "c-1"}) == "synced"
    """
    import asyncio
    import inspect

    from jobframework.running import awaited

    arg, ctx = _prepared(
        job,
        payload,
        attempt=attempt,
        key=key,
        timeout=timeout,
        job_id=job_id,
        payload_version=payload_version,
    )
    with enqueues_with(_enqueuer(job, client), first=client is not None):
        if is_async(job.fn):
            result = job(arg, ctx)
            if inspect.isawaitable(result):
                result = await awaited(result, job.timeout)
        else:
            result = await asyncio.to_thread(call, job, arg, ctx, timeout=job.timeout)
        return _outcomes(job, arg, result)


def _in_running_loop() -> bool:
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _outcomes(job: Job[Any], arg: Any, result: Any) -> Any:
    """What the job returned, a batched job's outcomes checked as the consumer checks them."""
    if job.batch is None:
        return result
    from jobframework.batched import checked_outcomes

    return checked_outcomes(job, result, len(arg))


def _enqueuer(job: Job[Any], client: JobClient | EnqueueRecorder | None) -> Callable[[], JobClient]:
    """Where the job's own enqueues go: ``client`` (a recorder stands in for a client), else refused."""
    if client is None:
        return _refused(job)
    return cast("Callable[[], JobClient]", lambda: client)


def _prepared(
    job: Job[Any],
    payload: Any,
    *,
    attempt: int,
    key: str | None,
    timeout: float | None,
    job_id: str | None,
    payload_version: int | None,
) -> tuple[Any, JobContext]:
    """The job's argument (its payload, or a batched job's list) validated, and its context."""
    if not isinstance(job, Job):
        raise TypeError(
            "run_inline takes the Job that @job made of your function: the name the decorated function "
            "has in its module (run_inline(generate_report, {...})), not its job name or .fn; got "
            f"{shown(job)}"
        )
    if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 1:
        raise ValueError(f"attempt= counts from 1 (the first execution), got {shown(attempt)}")
    if job.batch is not None:
        if isinstance(payload, BaseModel | dict | str) or not isinstance(payload, Sequence) or not payload:
            raise TypeError(
                f"{job.name} is a batched job: pass a non-empty list of payloads, e.g. "
                f"run_inline({job.fn.__name__}, [{job.payload_model.__name__}(...), ...])"
            )
        models = [_inline_payload(job, p, payload_version) for p in payload]
    elif isinstance(payload, BaseModel | dict):
        models = [_inline_payload(job, payload, payload_version)]
    else:
        given = (
            "a list"
            if isinstance(payload, list | tuple)
            else f"{type(payload).__name__} {shown(payload, 40)}"
        )
        if isinstance(cast(object, payload), str | bytes):
            given += " (JSON text: json.loads it first)"
        raise TypeError(
            f"{job.name} takes one payload (its {job.payload_model.__name__} model, or a dict), got {given}"
        )
    model = models[0]
    trace = new_trace()
    context = LocalLambdaContext(timeout or job.timeout + 5, "jf-local-consumer")
    env = Envelope.new(job.name, model.model_dump(mode="json"), key=key or job.key_for(model), job_id=job_id)
    ctx = JobContext(
        job_id=env.id,
        job_type=job.name,
        key=env.key,
        attempt=attempt,
        max_attempts=job.retry.max_attempts,
        priority=job.priority,
        enqueued_at=datetime.now(UTC),
        trace_id=trace.trace_id,
        traceparent=trace.traceparent,
        logger=KeyedLogger(
            logging.getLogger("jobframework.job"),
            {
                "job_id": env.id,
                "job_type": job.name,
                "job_key": env.key,
                "attempt": attempt,
                "trace_id": trace.trace_id,
            },
        ),
        timeout=job.timeout,
        _remaining=lambda: context.get_remaining_time_in_millis() / 1000,
    )
    return (models if job.batch is not None else model), ctx


class KeyedLogger(logging.LoggerAdapter):  # type: ignore[type-arg]
    """``ctx.logger`` under :func:`run_inline`: a standard logger whose records carry the job's keys
    (``record.job_id``, ``job_type``, ``job_key``, ``attempt``, ``trace_id``, as the consumer's lines
    do) beside the ``extra=`` a call gives (``caplog`` sees both)."""

    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Any]:
        kwargs["extra"] = {**(self.extra or {}), **(kwargs.get("extra") or {})}
        return msg, kwargs


def _refused(job: Job[Any]) -> Callable[[], JobClient]:
    def refuse() -> JobClient:
        raise ConfigurationError(
            f"{job.name} enqueued a job while run_inline ran it, and run_inline sends nothing: pass "
            "client=EnqueueRecorder() (from jobframework.testing) to record what it enqueues, or "
            "client=JobClient(jf_config) to send it to the embedded AWS"
        )

    return refuse


def _inline_payload(job: Job[Any], payload: BaseModel | dict[str, Any], version: int | None) -> Any:
    """One payload of :func:`run_inline`, upgraded from ``version`` first and validated."""
    if version is not None and version != job.version:
        if not isinstance(payload, dict):
            raise TypeError("payload_version= upgrades a payload given as a dict (an old version's data)")
        payload = job.upgrade(payload, version, fix=UPGRADE_FIX_SENT)
    return job.validate(payload)
