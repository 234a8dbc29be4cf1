"""``@job``: typed jobs and the registry that names them.

A job is a function whose first parameter is annotated with a pydantic model (the
payload) and whose optional second parameter is a :class:`JobContext`::

    @job("reports.generate", priority=Priority.LOW, key=lambda r: f"report:{r.report_id}")
    def generate_report(req: ReportRequest, ctx: JobContext) -> None: ...

Options are keyword-only and checked when the decorator is applied
(:mod:`jobframework.job_options`); the context is :mod:`jobframework.context`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Generic

from pydantic import BaseModel
from typing_extensions import TypeVar

from jobframework.budget_keys import RetryBudgetOption
from jobframework.classification import PermanentRule
from jobframework.context import JobContext
from jobframework.core import (
    FIFO_MAX_BATCH,
    FIFO_SUFFIX,
    LAMBDA_MAX_TIMEOUT,
    MAX_JOB_TIMEOUT,
    ConfigurationError,
    Priority,
    Profile,
    is_fifo_lane,
    lane_name,
    lane_priority,
    lane_profile,
    lane_sort_key,
    parse_priority,
)
from jobframework.errors import PayloadVersionError
from jobframework.flow.options import FlowOptions
from jobframework.job_options import (
    BatchOptions,
    Schedule,
    WhenBacklogged,
)
from jobframework.job_unknown import (
    missing_attribute,
    refuse_unknown_enqueue_options,
)
from jobframework.registry import JobRegistry
from jobframework.retry import RetryPolicy
from jobframework.validation import validate_data

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from jobframework.client import EnqueueRequest, EnqueueResult, JobClient
    from jobframework.outgoing import EnqueueOptions, RequestOptions


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
R = TypeVar("R", default=Any)
"""What the job's function returns (awaited, for an ``async def`` job): what ``run_inline`` gives."""


UPGRADE_FIX_CONSUMED = "fix the upgrade, deploy, then redrive the letter"
"""What a consumer's failed upgrade step says to do (the record is dead-lettered ``version``)."""
UPGRADE_FIX_SENT = (
    "were these fields version {version}'s? payload_version= names the version of the fields given, and a "
    "payload of the job's current version needs none; else fix the upgrade"
)
"""What a producer's failed upgrade step says to do: most often the payload is of another version."""


class Job(Generic[P, R]):
    """A registered job: its name, payload model, options and function. Made by :func:`job`.

    ``Job[Order, Receipt]`` for ``def f(order: Order) -> Receipt`` (``Job[Order]``: any result)."""

    def __init__(
        self,
        name: str,
        fn: Callable[..., Any],
        payload_model: type[P],
        *,
        takes_context: bool,
        priority: Priority,
        retry: RetryPolicy,
        permanent: tuple[PermanentRule, ...],
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
        retry_budget: RetryBudgetOption = True,
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
        self.retry_budget = retry_budget
        """The retry budget its records count in (:mod:`jobframework.budget_keys`)."""
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def __repr__(self) -> str:
        return f"<Job {self.name} priority={self.priority.value} max_attempts={self.retry.max_attempts}>"

    @property
    def lane(self) -> str:
        """The queue this job goes to: its priority, or ``<priority>-<profile>``; ``-fifo`` after
        either for an ordered job."""
        return self.lane_for(self.priority)

    def lane_for(self, priority: Priority) -> str:
        """The lane of this job at ``priority`` (an enqueue's ``priority=`` moves it there), as a
        catalog's job (:meth:`jobframework.catalog.RoutedJob.lane_for`) says it."""
        return lane_name(priority, self.profile, fifo=self.ordered)

    @property
    def ordered(self) -> bool:
        """The job has ``ordered_by``: it runs on a FIFO lane, in enqueue order within its group."""
        return self.flow.ordered_by is not None

    def __call__(self, payload: P, ctx: JobContext | None = None) -> Any:
        """Call the function directly (no queue): ``ctx`` is required if the job takes one.

        Raises:
            TypeError: the job takes a context and none was given (``run_inline`` makes one).
        """
        if not self.takes_context:
            return self.fn(payload)
        if ctx is None:
            if _context_optional(self.fn):  # (``ctx: JobContext | None = None``: its default applies)
                return self.fn(payload)
            example = "[payload]" if self.batch is not None else "payload"
            raise TypeError(
                f"{self.name} takes a JobContext: pass one ({self.fn.__name__}({example}, ctx)), or run "
                f"it as the consumer does with jobframework.testing.run_inline({self.fn.__name__}, {example})"
            )
        return self.fn(payload, ctx)

    def validate(self, payload: P | dict[str, Any]) -> P:
        """The payload as the job's model; raises pydantic ``ValidationError``."""
        if isinstance(payload, self.payload_model):
            return payload
        if isinstance(payload, BaseModel):
            payload = payload.model_dump(mode="json")
        return validate_data(self.payload_model, payload)

    def upgrade(
        self, payload: dict[str, Any], from_version: int, *, fix: str = UPGRADE_FIX_CONSUMED
    ) -> dict[str, Any]:
        """Bring a payload of an older schema version up to :attr:`version`, one step at a time;
        ``fix`` is what an upgrade step's failure says to do (a consumer's, a producer's).

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
                name = getattr(upgrader, "__qualname__", None) or repr(upgrader)
                raise PayloadVersionError(
                    f"{self.name} upgrade from payload version {step} to {step + 1} ({name}) raised "
                    f"{exc!r}; the version {step} payload's fields: {', '.join(map(str, payload)) or 'none'} "
                    f"({fix.replace('{version}', str(from_version))})"
                ) from exc
            if not isinstance(payload, dict):
                raise PayloadVersionError(
                    f"{self.name} upgrade from version {step} returned {type(payload).__name__}"
                )
        return payload

    def key_for(self, payload: P) -> str | None:
        """The deterministic key the job's ``key=`` function gives, or ``None``."""
        if self.key_fn is None:
            return None
        try:
            key = self.key_fn(payload)
        except Exception as exc:  # the team's function: say whose, and with what
            raise ConfigurationError(
                f"job {self.name}: its key= function raised {type(exc).__name__}: {exc} "
                f"(for a {type(payload).__name__} payload)"
            ) from exc
        if not isinstance(key, str) or not key:
            raise ConfigurationError(f"job {self.name}: key= must return a non-empty str, got {key!r}")
        return key

    def request(self, payload: P | dict[str, Any], **options: Unpack[RequestOptions]) -> EnqueueRequest:
        """An :class:`~jobframework.client.EnqueueRequest` for ``JobClient.enqueue_many``."""
        from jobframework.client import EnqueueRequest
        from jobframework.outgoing import REQUEST_OPTIONS

        refuse_unknown_enqueue_options(options, REQUEST_OPTIONS)  # (countdown=: "write delay=")
        return EnqueueRequest(self, payload, **options)

    if not TYPE_CHECKING:  # (type checkers keep flagging a name a job has not)

        def __getattr__(self, name: str) -> Any:
            raise missing_attribute(self, name)  # my_job.delay(...): "write my_job.enqueue(payload)"

    def enqueue(
        self,
        payload: P | dict[str, Any],
        *,
        client: JobClient | None = None,
        **options: Unpack[EnqueueOptions],
    ) -> EnqueueResult:
        """Send this job to its queue; same options as :meth:`JobClient.enqueue`."""
        from jobframework.client import default_client

        return (client or default_client()).enqueue(self, payload, **options)

    async def aenqueue(
        self,
        payload: P | dict[str, Any],
        *,
        client: JobClient | None = None,
        **options: Unpack[EnqueueOptions],
    ) -> EnqueueResult:
        """:meth:`enqueue` for ``async def`` code: the send on a worker thread, the loop free meanwhile
        (:mod:`jobframework.async_calls`)."""
        from jobframework.async_calls import in_thread

        return await in_thread(lambda: self.enqueue(payload, client=client, **options))

    def enqueue_many(
        self,
        payloads: Iterable[P | dict[str, Any]],
        *,
        client: JobClient | None = None,
        raise_on_error: bool = False,
        **options: Unpack[EnqueueOptions],
    ) -> list[EnqueueResult]:
        """Send many payloads of this job (any iterable: read once), ten per SQS call, with the same
        ``options`` (requests with options of their own go to ``client.enqueue_many``:
        :func:`~jobframework.outgoing.payloads_only`); ``raise_on_error`` as the client's."""
        from jobframework.client import default_client
        from jobframework.outgoing import payloads_only

        given = list(payloads)  # (a generator: checked, then sent; it was used up by the check)
        payloads_only(self.name, given)
        requests = [self.request(p, **options) for p in given]  # (a bad option: before any client)
        return (client or default_client()).enqueue_many(requests, raise_on_error=raise_on_error)


def _context_optional(fn: Callable[..., Any]) -> bool:
    """The function's context parameter has a default."""
    import inspect

    params = list(inspect.signature(fn).parameters.values())
    return len(params) > 1 and params[1].default is not inspect.Parameter.empty


registry = JobRegistry()
"""The default registry that :func:`job` registers into."""


# ``@job`` lives in jobframework.job_decorator (it needs Job and the registry above); importable from here.
from jobframework.job_decorator import job  # noqa: E402
