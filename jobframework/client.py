"""``JobClient``: enqueue jobs onto their priority queues.

Every enqueue validates the payload against the job's model before anything is
sent (a bad payload is a :class:`PayloadValidationError`, a ``ValueError``),
refuses messages over the SQS limit, injects the trace context, and routes by
priority. ``enqueue_many`` sends ten per ``SendMessageBatch`` call and retries the
entries a batch reports as failed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from jobframework.async_calls import AsyncCalls
from jobframework.aws_clients import AwsClients
from jobframework.config import RuntimeConfig
from jobframework.default_client import default_client, set_default_client  # (re-exported)
from jobframework.errors import ConfigurationError, StatusUnavailableError
from jobframework.errortext import shown
from jobframework.job_unknown import refusing_unknown_enqueue_options
from jobframework.jobs import Job, JobRegistry, Priority
from jobframework.jobs import registry as default_registry
from jobframework.outgoing import (
    BATCH_ENTRIES,
    DEFAULT_DEDUP_WINDOW,
    MAX_DEDUP_WINDOW,
    MAX_DELAY_SECONDS,
    MAX_ENQUEUE_BYTES,
    MAX_SCHEDULED_DELAY_SECONDS,
    EnqueueRequest,
    EnqueueResult,
    Prepared,
    delay_seconds,
    unsent_said,
)
from jobframework.preparing import Preparer, of_entry
from jobframework.sender import Sender
from jobframework.state import JobStatus, StateStore
from jobframework.status import wait_for_final

if TYPE_CHECKING:
    import boto3
    from mypy_boto3_sqs import SQSClient

    from jobframework.catalog import JobCatalog, RoutedJob
    from jobframework.flow.cancel import CancelResult
    from jobframework.saga import SagaRecord
    from jobframework.signing import KeySource

log = logging.getLogger(__name__)

__all__ = [
    "BATCH_ENTRIES",
    "DEFAULT_DEDUP_WINDOW",
    "MAX_DEDUP_WINDOW",
    "MAX_DELAY_SECONDS",
    "MAX_ENQUEUE_BYTES",
    "MAX_SCHEDULED_DELAY_SECONDS",
    "EnqueueRequest",
    "EnqueueResult",
    "JobClient",
    "default_client",
    "delay_seconds",
    "set_default_client",
]
"""The client's API; the request types and limits live in :mod:`jobframework.outgoing`."""


class JobClient(AsyncCalls):
    """Sends jobs to their queues.

    Args:
        config: where the queues are (``RuntimeConfig.from_env()`` when ``None``).
        registry: the jobs that can be named by string (the default registry when ``None``).
        session: a boto3 session to make the SQS client from.
        sqs_client: an SQS client to use as is (tests, custom retry config).
        clients: other boto3 clients to use as is, by service name (``dynamodb``, ``s3``,
            ``scheduler``); the others are made from ``session`` when first needed.
        batch_retries: how many times ``enqueue_many`` resends entries a batch reports as failed.

    Example:
        >>> client = JobClient(config)                         # doctest: +SKIP
        >>> client.enqueue("reports.generate", {"report_id": "r-1"}).id  # doctest: +SKIP
    """

    def __init__(
        self,
        config: RuntimeConfig | None = None,
        *,
        registry: JobRegistry | None = None,
        session: boto3.Session | None = None,
        sqs_client: SQSClient | None = None,
        clients: Mapping[str, Any] | None = None,
        batch_retries: int = 3,
    ) -> None:
        self.config = config if config is not None else RuntimeConfig.from_env()
        self.registry = registry if registry is not None else default_registry
        self._session = session
        self.aws = AwsClients(
            session=session,
            endpoint_url=self.config.endpoint_url,
            region=self.config.region,
            clients={**(clients or {}), "sqs": sqs_client},
        )
        """Where this client's boto3 clients come from (the given ones, else made on first use)."""
        self.batch_retries = batch_retries
        self.sender = Sender(
            sqs=lambda: self.sqs,
            state=lambda: self.state,
            schedule=self._schedule,
            retries=lambda: self.batch_retries,
        )
        """Sends what :meth:`prepare` makes (:mod:`jobframework.sender`)."""
        self._catalog: JobCatalog | None = None
        keys: KeySource | None = None
        if self.config.signing_keys:
            from jobframework.signing import KeySource

            keys = KeySource(self.config.signing_keys, session=session, endpoint_url=self.config.endpoint_url)
        self.preparer = Preparer(
            lambda: self.config,
            job=self.job,
            state=lambda: self.state,
            s3=lambda: self._client("s3"),
            keys=keys,
        )
        """Builds what :meth:`send` sends (:mod:`jobframework.preparing`)."""

    @property
    def sqs(self) -> SQSClient:
        return self.aws.client("sqs")  # type: ignore[no-any-return]

    def _client(self, service: str) -> Any:
        return self.aws.client(service)

    @property
    def state(self) -> StateStore | None:
        """The state table (job status, dedup markers), when one is configured."""
        if not self.config.state_table:
            return None
        return StateStore.of(self.config, self._client("dynamodb"))

    def status(self, job_id: str) -> JobStatus | None:
        """What is known of a job: queued, scheduled, running, retrying, succeeded or dead.

        Returns ``None`` for an id the state table does not know (or that expired), and for text that
        is no job id (empty, or over 128 characters: a 404 to a caller of a status API).

        Raises:
            ConfigurationError: no state table is configured, or the id is not text.
            StatusUnavailableError: the state table could not be read now (a 503 to a caller).
        """
        state = self.state
        if state is None:
            raise ConfigurationError("job status needs the state table: set JF_STATE_TABLE")
        if not isinstance(job_id, str):
            raise ConfigurationError(f"a job id is a string of 1 to 128 characters, got {shown(job_id)}")
        if not 0 < len(job_id) <= 128:
            return None
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return state.get_status(job_id)
        except (BotoCoreError, ClientError) as exc:  # (as enqueue wraps SQS's: EnqueueError)
            raise StatusUnavailableError(f"reading the status of job {job_id} failed: {exc}") from exc

    def wait(self, job_id: str, *, timeout: float = 60.0, every: float = 1.0) -> JobStatus:
        """Block until a tracked job ends (succeeded, dead, cancelled, expired) and return its status:
        Celery's ``AsyncResult.get(timeout=...)``, without raising the job's error (read ``.status``,
        ``.error``). Each poll is one status read; polls start 0.1 s apart and slow to ``every``.

        Raises:
            LookupError: the job has no status record (unknown, untracked or expired, or text that
                is no job id).
            TimeoutError: it has not ended within ``timeout`` seconds.
            ValueError: ``every`` not above 0, or ``timeout`` below 0.
            ConfigurationError: no state table is configured, or the id is not text.
        """
        return wait_for_final(lambda: self.status(job_id), job_id, timeout=timeout, every=every)

    def cancel(self, job_id: str) -> CancelResult:
        """Cancel a job: if it has not started it never will (status ``cancelled``); if it is running,
        its ``ctx.cancelled`` turns true so that it may stop, and no further attempt starts.

        Race-safe with a start (one conditional write decides) and idempotent; see
        :mod:`jobframework.flow.cancel`. The result's ``outcome`` says which of ``cancelled``,
        ``signalled`` or ``finished`` (too late: nothing changed) it came to.

        Raises:
            ConfigurationError: no state table is configured, or a bad id.
        """
        from jobframework.flow.cancel import cancel

        state = self.state
        if state is None:
            raise ConfigurationError("cancel needs the state table: set JF_STATE_TABLE")
        if not isinstance(job_id, str) or not 0 < len(job_id) <= 128:
            raise ConfigurationError(f"a job id is a string of 1 to 128 characters, got {shown(job_id)}")
        return cancel(state, job_id, unschedule=self._unschedule)

    def _unschedule(self, job_id: str) -> None:
        """Delete the one-time schedule of a cancelled job delayed past 15 minutes."""
        from jobframework.delays import delete_one_time_schedule

        delete_one_time_schedule(self._client("scheduler"), self.config.schedule_group, job_id)

    def saga_status(self, saga_id: str) -> SagaRecord | None:
        """A saga's record: status, steps (state, output, attempts, error, timings), signals, trace.

        Returns ``None`` for an id the state table does not know (or that expired).

        Raises:
            ConfigurationError: no state table is configured.
        """
        from jobframework.saga import load_saga

        state = self.state
        if state is None:
            raise ConfigurationError("saga status needs the state table: set JF_STATE_TABLE")
        return load_saga(state, saga_id)

    def job(self, job: Job[Any] | str) -> Job[Any] | RoutedJob:
        """The job of a name: this process's registry, else the topology's job catalog (no import).

        Raises:
            UnknownJobError: in neither; the message says where the client looked and what to set.
        """
        if isinstance(job, Job):
            return job
        found = self.registry.find(job)
        if found is not None:
            return found
        if self._catalog is None:
            from jobframework.catalog import JobCatalog

            self._catalog = JobCatalog(self.config, lambda: self._client("ssm"))
        return self._catalog.get(job, known=[j.name for j in self.registry])

    def prepare(self, request: EnqueueRequest) -> Prepared:
        """Validate, build the envelope and attributes, check the size; sends nothing
        (:mod:`jobframework.preparing`)."""
        return self.preparer.prepare(request)

    # -- sending --------------------------------------------------------------------------------------

    @refusing_unknown_enqueue_options
    def enqueue(
        self,
        job: Job[Any] | str,
        payload: BaseModel | dict[str, Any],
        *,
        key: str | None = None,
        delay: float | timedelta | datetime | None = None,
        priority: Priority | str | None = None,
        dedup_window: float | timedelta | None = None,
        expires_in: float | timedelta | None = None,
        debounce: float | timedelta | None = None,
        tenant: str | None = None,
        track: bool | None = None,
        group: str | None = None,
        payload_version: int | None = None,
    ) -> EnqueueResult:
        """Send one job.

        Args:
            job: the job or its registered name.
            payload: the job's model, or a dict validated against it.
            key: the idempotency/dedup key (the job's ``key=`` function, else the job id, when ``None``).
                An explicit key dedups the enqueue for :data:`DEFAULT_DEDUP_WINDOW` (24 hours) unless
                ``dedup_window`` says otherwise: a second enqueue with the key sends nothing and returns
                the first job's id with ``duplicate=True``.
            delay: seconds (or ``timedelta``) before the job becomes visible, or a ``datetime`` (with
                its time zone) to run at: up to 900 s via SQS ``DelaySeconds``, up to a year via an
                EventBridge Scheduler one-time schedule.
            priority: send to another priority's queue than the job's own.
            dedup_window: seconds in which another enqueue with the same key sends nothing and
                returns this job's id (``duplicate=True``), up to 7 days; ``0`` turns dedup off; the
                job's own ``dedup_window`` when ``None``, else 24 hours for an explicit ``key``.
            expires_in: seconds (or ``timedelta``, up to 14 days) by which the job must have started,
                else it is dropped with status ``expired``; the job's ``expires_after`` when ``None``.
            debounce: seconds (up to 900): of the enqueues with this ``key`` in a window that opens
                with the first, only the last runs, once, when the window closes (the others end
                ``cancelled``, reason ``debounced``); needs ``key`` and the state table.
            tenant: the ``MessageGroupId`` (SQS fair queues): one tenant's flood does not hold up
                another's jobs; the job's ``tenant=`` function of the payload when ``None``.
            track: keep this job's status readable by id (``status``, ``cancel``); the job's
                ``track=`` when ``None``. An untracked job costs no status write.
            group: the message group of an ordered job (``@job(ordered_by=...)``, a FIFO lane): its
                ``ordered_by`` value when ``None``; a job known only from the catalog needs it. Jobs
                of one group run one after another in send order; ``MessageDeduplicationId`` is the
                SHA-256 of the job's id (SQS drops a second send of one job within 5 minutes). An ordered
                job takes no ``delay`` or ``debounce`` (a FIFO queue cannot delay one message).
            payload_version: the version of the job's payload that ``payload`` is, when older than
                the job's ``version=`` (a producer not yet moved to a new schema): sent with it, the
                consumer upgrades it; checked here through the job's ``upgrade=`` steps when this
                process has the job's module, sent unchecked by name (the catalog has the current
                schema only). ``None``: the job's version.

        Raises:
            PayloadValidationError: the payload does not match (nothing sent).
            PayloadTooLargeError: the message is over 1 MiB (nothing sent).
            ConfigurationError: a bad delay, key or priority.
            UnknownJobError: no job of that name in the registry or the topology's job catalog.
            EnqueueError: SQS failed to take it.
        """
        return self.send(
            self.prepare(
                EnqueueRequest(
                    job,
                    payload,
                    key=key,
                    delay=delay,
                    priority=priority,
                    dedup_window=dedup_window,
                    expires_in=expires_in,
                    debounce=debounce,
                    tenant=tenant,
                    track=track,
                    group=group,
                    payload_version=payload_version,
                )
            )
        )

    def _schedule(self, prepared: Prepared) -> str:
        from jobframework.delays import create_one_time_schedule

        return create_one_time_schedule(
            self._client("scheduler"), self.config, prepared.envelope, prepared.delay, prepared.queue_url
        )

    def send(self, prepared: Prepared) -> EnqueueResult:
        """Send what :meth:`prepare` made (the saga outbox prepares under its root trace, then sends).

        Raises:
            EnqueueError: SQS (or Scheduler) refused it.
        """
        return self.sender.send(prepared)

    def enqueue_many(
        self, requests: Iterable[EnqueueRequest], *, raise_on_error: bool = False
    ) -> list[EnqueueResult]:
        """Send many jobs, ten per ``SendMessageBatch``, in the order given.

        Ordered jobs keep the order of their group when SQS takes every entry; an entry it refuses and
        a retry then sends goes after the group's entries that were taken. A keyed entry's key is
        claimed before its batch is sent; a key repeated in one call is a duplicate of its first entry.

        Every payload is validated before anything is sent. Entries a batch reports as failed are
        resent up to ``batch_retries`` times with backoff (unless SQS says the entry itself is at fault);
        what still fails comes back as a result with ``error`` set (``ok`` false; logged as a WARNING),
        or with ``raise_on_error=True`` raises :class:`~jobframework.errors.EnqueueManyError` once
        the rest are sent (its ``results`` has every entry's).
        """
        entries = list(requests)
        for entry in entries:
            if not isinstance(entry, EnqueueRequest):
                raise ConfigurationError(
                    "enqueue_many takes EnqueueRequest entries: job.request(payload, key=...) or "
                    f"EnqueueRequest(job, payload), got {type(entry).__name__} {shown(entry)}"
                )
        count = len(entries)
        prepared = [of_entry(i, count, self.prepare, r) for i, r in enumerate(entries)]
        return self.send_many(prepared, raise_on_error=raise_on_error)

    def send_many(self, prepared: list[Prepared], *, raise_on_error: bool = False) -> list[EnqueueResult]:
        """Send what :meth:`prepare` made, as :meth:`enqueue_many` sends (``jf enqueue-many`` prepares
        every line first, then sends them a chunk at a time)."""
        return unsent_said(self.sender.send_many(prepared), raise_on_error=raise_on_error)
