"""What a job enqueues while a test runs it, recorded and not sent: :class:`EnqueueRecorder`, which
``run_inline(job, payload, client=EnqueueRecorder())`` gives the job's ``other_job.enqueue(...)``."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypeVar, overload

from pydantic import BaseModel

from jobframework.catalog_file import CatalogSource, load_catalog
from jobframework.envelope import Envelope, new_job_id
from jobframework.job_unknown import refuse_unknown_enqueue_options
from jobframework.jobs import Job, Priority, registry
from jobframework.outgoing import ENQUEUE_OPTIONS, EnqueueRequest, EnqueueResult
from jobframework.payload_data import checked_payload
from jobframework.preparing import checked_options, of_entry

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from jobframework.catalog import RoutedJob
    from jobframework.outgoing import EnqueueOptions
    from jobframework.status import JobStatus

M = TypeVar("M", bound=BaseModel)


class EnqueueRecorder:
    """Stands for a :class:`~jobframework.client.JobClient` in a test: each enqueue is validated as the
    client validates it (``PayloadValidationError``; its options as the client checks them:
    ``EnqueueOptionError``, ``ConfigurationError``), recorded in :attr:`requests` with its payload as
    the job's model, and answered with a new job id; nothing is sent.

    Example::

        sent = EnqueueRecorder()
        run_inline(place_order, {"order_id": "o-1", "items": ["a", "b"]}, client=sent)
        assert [p.item for p in sent.payloads(notify)] == ["a", "b"]
    """

    def __init__(
        self, *, run: bool = False, propagate: bool = True, catalog: CatalogSource | None = None
    ) -> None:
        """``run=True``: each enqueue also runs its job at once, in-process (``run_inline``, with this
        recorder as the client of what it enqueues in turn), as Celery's ``task_always_eager``: a
        delay is not waited, a job's exception propagates to the enqueue (``propagate=False``: it is
        kept in :attr:`errors` instead, and the job's :meth:`status` reads ``dead``, as Celery's
        ``task_eager_propagates=False``), its return value is in :attr:`results`. A job known only by
        name (not imported) is recorded, not run.

        ``catalog``: another service's job catalog (a file ``jf catalog -o`` wrote, or routes by
        name): an enqueue by name of a job not registered here is checked against it as the client
        checks it against the deployed catalog (``PayloadValidationError``; a name not in it is an
        ``UnknownJobError``). Without one such an enqueue is recorded as given, unchecked."""
        self.run = run
        self.propagate = propagate
        self.catalog = load_catalog(catalog) if catalog is not None else None
        """Routes by job name (``catalog=``), or ``None``."""
        self.requests: list[EnqueueRequest] = []
        """Every enqueue (a copy of its request), in order; a job's payload as its model (an older
        version's as upgraded; a job known only by name, as it was given)."""
        self.results: dict[str, Any] = {}
        """With ``run=True``: what each job run returned, by job id."""
        self.errors: dict[str, BaseException] = {}
        """With ``run=True, propagate=False``: what each job that failed raised, by job id."""
        self._sent: dict[str, tuple[EnqueueResult, str]] = {}
        """Each job enqueued here and when, by id (what :meth:`status` reads)."""

    def enqueue(
        self, job: Job[Any] | str, payload: BaseModel | dict[str, Any], **options: Unpack[EnqueueOptions]
    ) -> EnqueueResult:
        """Record one enqueue (the options of :meth:`JobClient.enqueue`, refused as it refuses them)."""
        refuse_unknown_enqueue_options(options, ENQUEUE_OPTIONS)
        return self.enqueue_many([EnqueueRequest(job, payload, **options)])[0]

    def enqueue_many(
        self, requests: Iterable[EnqueueRequest], *, raise_on_error: bool = False
    ) -> list[EnqueueResult]:
        """Record each request (a copy); the results in their order. As the client sends nothing when
        one entry is refused, a refused entry records none of them (``raise_on_error``: as the
        client's, though nothing recorded fails to send)."""
        entries = list(requests)
        checked = [of_entry(i, len(entries), self._checked, r) for i, r in enumerate(entries)]
        self.requests.extend(recorded for recorded, _ in checked)
        from jobframework.status import now_iso

        sent_at = now_iso()
        self._sent.update((result.id, (result, sent_at)) for _, result in checked)
        if self.run:
            for recorded, result in checked:
                self._run(recorded, result)
        return [result for _, result in checked]

    def _run(self, request: EnqueueRequest, result: EnqueueResult) -> None:
        job = registry.find(request.job) if isinstance(request.job, str) else request.job
        if not isinstance(job, Job):
            return  # (known by name only: recorded, as the client would send it to whoever has it)
        from jobframework.inline import run_inline

        batched = job.batch is not None  # (a batch of one, its one outcome: a failure is raised)
        payload = [request.payload] if batched else request.payload
        try:
            outcome = run_inline(job, payload, job_id=result.id, key=result.key, client=self)
            if batched:
                [outcome] = outcome
                if isinstance(outcome, BaseException):
                    raise outcome
        except Exception as exc:
            if self.propagate:
                raise
            self.errors[result.id] = exc
            return
        self.results[result.id] = outcome

    def status(self, job_id: str) -> JobStatus | None:
        """What a 202 API's ``GET`` reads of a job enqueued here, as ``JobClient.status`` would: with
        ``run=True`` ``succeeded`` (its return value as ``client.status`` gives it: the value of its JSON
        summary) or ``dead`` (what it
        raised); else ``queued``. ``None`` for an id not enqueued here."""
        if job_id not in self._sent:
            return None
        from jobframework.delivery import describe
        from jobframework.errors import PermanentError
        from jobframework.status import JobState, JobStatus, summarize

        sent, sent_at = self._sent[job_id]
        known = {"id": job_id, "type": sent.job_type, "key": sent.key, "enqueued_at": sent_at}
        if job_id in self.errors:
            error = self.errors[job_id]
            reason = "permanent" if isinstance(error, PermanentError) else "raised (run once: no retry here)"
            return JobStatus(**known, status=JobState.DEAD, attempts=1, error=describe(error), reason=reason)
        if job_id in self.results:  # (as the client reads it back: the value of its summary's JSON)
            summary = summarize(self.results[job_id])
            result = None if summary is None else json.loads(summary)
            return JobStatus(**known, status=JobState.SUCCEEDED, attempts=1, result=result)
        return JobStatus(**known, status=JobState.QUEUED)

    def wait(self, job_id: str, *, timeout: float = 60.0, every: float = 1.0) -> JobStatus:
        """``JobClient.wait``: the job's status once ended; a job only recorded never ends here
        (:class:`TimeoutError`, at once), one not enqueued here is a :class:`LookupError`."""
        found = self.status(job_id)
        if found is None:
            raise LookupError(f"no job {job_id} was enqueued here")
        if found.status.value == "queued":
            raise TimeoutError(f"job {job_id} is recorded, not run: EnqueueRecorder(run=True) runs it")
        return found

    def _checked(self, request: EnqueueRequest) -> tuple[EnqueueRequest, EnqueueResult]:
        job: Job[Any] | RoutedJob | None = (
            registry.find(request.job) if isinstance(request.job, str) else request.job
        )
        if job is None and self.catalog is not None:
            job = self._routed(str(request.job))
        recorded = dataclasses.replace(request)
        key, priority, job_id = request.key, Priority.DEFAULT, request.job_id or new_job_id()
        if job is not None:  # validated, keyed and routed as the client does (by name: as given)
            version, data, current, job_key = checked_payload(job, request)
            options = checked_options(job, request, current, job_key)  # (the client's own checks)
            # (an older shape: the model it upgrades to; a catalog's job: its payload as JSON data)
            recorded.payload = job.validate(current) if isinstance(job, Job) else data
            key, priority = options.key, options.priority
            env = Envelope.new(job.name, data, key=key, job_id=request.job_id, payload_version=version)
            job_id = env.id  # (the id checked as the client's envelope checks it)
        name = request.job if isinstance(request.job, str) else request.job.name
        return recorded, EnqueueResult(job_id, key or job_id, name, priority)

    def _routed(self, name: str) -> RoutedJob:
        """The catalog's job of ``name``, or the ``UnknownJobError`` the client would raise."""
        from jobframework.catalog import RoutedJob
        from jobframework.errors import UnknownJobError
        from jobframework.errortext import closest

        assert self.catalog is not None
        route = self.catalog.get(name)
        if route is None:
            close = closest(name, [*self.catalog, *(j.name for j in registry)], cutoff=0.8)
            hint = f" (did you mean {close!r}?)" if close else ""
            listed = ", ".join(sorted(self.catalog)) or "none"
            raise UnknownJobError(
                f"no job named {name!r}{hint} is registered in this process nor in the recorder's "
                f"catalog (it lists: {listed})"
            )
        return RoutedJob(name, route, "the recorder's catalog")

    @overload
    def payloads(self, job: Job[M, Any]) -> list[M]: ...
    @overload
    def payloads(self, job: str) -> list[Any]: ...
    def payloads(self, job: Job[Any] | str) -> list[Any]:
        """The payloads enqueued of ``job`` (the job or its name), in order: of a job, its models (a
        dict given is validated into one); by name, as given."""
        name = job if isinstance(job, str) else job.name
        return [r.payload for r in self.requests if (r.job if isinstance(r.job, str) else r.job.name) == name]
