"""Sagas: the list (newest first, by status or name) and one saga's steps and compensations.

Reads with :func:`jobframework.saga.list_sagas` / :func:`jobframework.saga.load_saga`, and shows the
same summary as ``jf saga ls`` (:func:`jobframework.saga.view.saga_summary`).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from jobframework.saga import SagaStatus, list_sagas, load_saga
from jobframework.saga.view import current_step, saga_summary
from jobframework.ui.console import Console
from jobframework.ui.records import seconds_between
from jobframework.ui.templating import render

RESULTS = 100


def sagas(request: Request) -> Response:
    console: Console = request.app.state.console
    status = request.query_params.get("status", "").strip() or None
    name = request.query_params.get("name", "").strip() or None
    if status is not None and status not in {s.value for s in SagaStatus}:
        raise ValueError(
            f"unknown saga status {status!r}: use one of {', '.join(s.value for s in SagaStatus)}"
        )
    found = list_sagas(console.require_store(), status=status, name=name, limit=RESULTS)
    return render(
        request,
        "sagas.html",
        page="sagas",
        rows=[saga_summary(r) for r in found],
        status=status or "",
        name=name or "",
        states=[s.value for s in SagaStatus],
        limit=RESULTS,
    )


def saga(request: Request) -> Response:
    console: Console = request.app.state.console
    saga_id = request.path_params["saga_id"]
    record = load_saga(console.require_store(), saga_id)
    if record is None:
        raise LookupError(f"no saga {saga_id} (never started, or its record expired)")
    took = {s.name: seconds_between(s.started_at or s.queued_at, s.finished_at) for s in record.steps}
    return render(
        request,
        "saga.html",
        page="sagas",
        record=record,
        summary=saga_summary(record),
        current=current_step(record),
        took=took,
    )


routes = [Route("/sagas", sagas, name="sagas"), Route("/sagas/{saga_id}", saga, name="saga")]
