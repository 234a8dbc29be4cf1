"""Sagas: the list (newest first, by status or name), one saga's steps and compensations, and the
signal of a waiting step (a human approval: what ``jf saga signal`` does).

Reads with :func:`jobframework.saga.list_sagas` / :func:`jobframework.saga.load_saga`, and shows the
same summary as ``jf saga ls`` (:func:`jobframework.saga.view.saga_summary`). A signal needs the saga's
definition: the console must have loaded the job module that defines it (``jf ui --jobs``).
"""

from __future__ import annotations

import json

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from jobframework.errors import ConfigurationError
from jobframework.saga import SagaStatus, list_sagas, load_saga
from jobframework.saga.definition import find_saga
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


def _signal(console: Console, saga_id: str, name: str, data: object) -> bool:
    record = load_saga(console.require_store(), saga_id)
    if record is None:
        raise LookupError(f"no saga {saga_id} (never started, or its record expired)")
    definition = find_saga(console.registry, record.name) if console.registry is not None else None
    if definition is None:
        raise ConfigurationError(
            f"this console has not loaded the job module that defines saga {record.name}: start it with "
            "jf ui --jobs <that module> to signal it (or use jf saga signal)"
        )
    return definition.signal(saga_id, name, data, client=console.client)


async def signal_saga(request: Request) -> Response:
    console: Console = request.app.state.console
    saga_id = request.path_params["saga_id"]
    form = await request.form()
    name = str(form.get("name", "")).strip()
    text = str(form.get("data", "")).strip()
    try:
        data = json.loads(text) if text else None
    except ValueError as exc:
        raise ValueError(
            f'the data is not JSON ({exc}): leave it empty, or give e.g. {{"approved_by": "ops"}}'
        ) from None
    taken = await run_in_threadpool(_signal, console, saga_id, name, data)
    return render(request, "_signalled.html", name=name, taken=taken)


routes = [
    Route("/sagas", sagas, name="sagas"),
    Route("/sagas/{saga_id}", saga, name="saga"),
    Route("/sagas/{saga_id}/signal", signal_saga, methods=["POST"], name="signal_saga"),
]
