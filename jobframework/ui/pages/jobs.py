"""Jobs: find a job by id, key, type or status; one job's attempts, error, timings and trace.

A job by id is :meth:`jobframework.client.JobClient.status` (one consistent read); by key, type or
status it is a filtered scan of the state table (:func:`jobframework.ui.records.find_jobs`). The
status record carries no trace id; a dead job's comes from its dead letter's ``traceparent``.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from jobframework.dlq import DeadLetter
from jobframework.state import JobState, no_status
from jobframework.tracing import valid_traceparent
from jobframework.ui.console import Console
from jobframework.ui.pages.dead_letters import READ_LIMIT
from jobframework.ui.records import find_jobs, seconds_between
from jobframework.ui.templating import render

RESULTS = 100


def jobs(request: Request) -> Response:
    console: Console = request.app.state.console
    params = request.query_params
    job_id = params.get("id", "").strip()
    if job_id:
        return RedirectResponse(request.url_for("job", job_id=job_id), status_code=303)
    key = params.get("key", "").strip() or None
    job_type = params.get("type", "").strip() or None
    status = params.get("status", "").strip() or None
    if status is not None and status not in {s.value for s in JobState}:
        raise ValueError(f"unknown status {status!r}: use one of {', '.join(s.value for s in JobState)}")
    store = console.require_store()
    found = find_jobs(store, key_contains=key, job_type=job_type, status=status, limit=RESULTS)
    return render(
        request,
        "jobs.html",
        page="jobs",
        found=found,
        key=key or "",
        job_type=job_type or "",
        status=status or "",
        states=[s.value for s in JobState],
        limit=RESULTS,
    )


def dead_letter_of(console: Console, job_id: str) -> tuple[str, DeadLetter] | None:
    """The lane and dead letter of a dead job (among the first :data:`READ_LIMIT` of each DLQ)."""
    for lane in console.lanes:
        for letter in console.letters.peek(lane, limit=READ_LIMIT):
            if letter.job_id == job_id:
                return lane, letter
    return None


def job(request: Request) -> Response:
    console: Console = request.app.state.console
    job_id = request.path_params["job_id"]
    console.require_store()
    found = console.client.status(job_id)
    if found is None:
        raise LookupError(no_status(job_id))
    letter = dead_letter_of(console, job_id) if found.status is JobState.DEAD else None
    traceparent = letter[1].attributes.get("traceparent") if letter else None
    timings = {
        "waited": seconds_between(found.enqueued_at, found.started_at),
        "ran": seconds_between(found.started_at, found.finished_at),
        "total": seconds_between(found.enqueued_at, found.finished_at),
    }
    return render(
        request,
        "job.html",
        page="jobs",
        job=found,
        max_attempts=console.max_attempts(found.type),
        timings=timings,
        letter=letter,
        trace_id=found.trace_id
        or (traceparent[3:35] if traceparent and valid_traceparent(traceparent) else None),
        has_plan=bool(found.type and console.registry is not None and found.type in console.registry),
    )


routes = [Route("/jobs", jobs, name="jobs"), Route("/jobs/{job_id}", job, name="job")]
