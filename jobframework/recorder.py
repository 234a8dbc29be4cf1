"""What a job enqueues while a test runs it, recorded and not sent: :class:`EnqueueRecorder`, which
``run_inline(job, payload, client=EnqueueRecorder())`` gives the job's ``other_job.enqueue(...)``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel

from jobframework.envelope import new_job_id
from jobframework.jobs import Job, Priority, registry
from jobframework.outgoing import EnqueueRequest, EnqueueResult
from jobframework.preparing import payload_data


class EnqueueRecorder:
    """Stands for a :class:`~jobframework.client.JobClient` in a test: each enqueue is validated as the
    client validates it (``PayloadValidationError``), recorded in :attr:`requests` with its payload as
    the job's model, and answered with a new job id; nothing is sent.

    Example::

        sent = EnqueueRecorder()
        run_inline(place_order, {"order_id": "o-1", "items": ["a", "b"]}, client=sent)
        assert [p.item for p in sent.payloads(notify)] == ["a", "b"]
    """

    def __init__(self) -> None:
        self.requests: list[EnqueueRequest] = []
        """Every enqueue, in order; a job's payload as its model (a name's, as it was given)."""

    def enqueue(
        self, job: Job[Any] | str, payload: BaseModel | dict[str, Any], **options: Any
    ) -> EnqueueResult:
        """Record one enqueue (the options of :meth:`JobClient.enqueue`)."""
        return self.enqueue_many([EnqueueRequest(job, payload, **options)])[0]

    def enqueue_many(self, requests: Iterable[EnqueueRequest]) -> list[EnqueueResult]:
        """Record each request; the results in their order."""
        results = []
        for request in requests:
            job = registry.find(request.job) if isinstance(request.job, str) else request.job
            if isinstance(job, Job):
                payload_data(job, request.payload)  # (refused as the client refuses it)
                request.payload = job.validate(request.payload)
            job_id = request.job_id or new_job_id()
            self.requests.append(request)
            name = request.job if isinstance(request.job, str) else request.job.name
            priority = job.priority if isinstance(job, Job) else Priority.DEFAULT
            results.append(EnqueueResult(job_id, request.key or job_id, name, priority))
        return results

    def payloads(self, job: Job[Any] | str) -> list[Any]:
        """The payloads enqueued of ``job`` (the job or its name), in order."""
        name = job if isinstance(job, str) else job.name
        return [r.payload for r in self.requests if (r.job if isinstance(r.job, str) else r.job.name) == name]
