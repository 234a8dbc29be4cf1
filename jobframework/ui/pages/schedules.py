"""Schedules: each ``@job(schedule=...)``, its next slot, last run, heartbeat and missed runs; enqueue now.

The schedules come from the loaded job modules (``jf ui --jobs``), as the topology derives them; the
runs from the status records (:mod:`jobframework.ui.schedule_runs`). "Enqueue now" sends one run
through :meth:`jobframework.client.JobClient.enqueue` with the schedule's payload and a slot key for
this second (``schedule:<job>:<now>``), so it counts as a run of the schedule.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from jobframework.topology import ScheduleSpec
from jobframework.ui.console import Console
from jobframework.ui.schedule_runs import WINDOW, enqueue_by_hand, schedule_runs
from jobframework.ui.templating import render


def _spec(console: Console, name: str) -> ScheduleSpec:
    for spec in console.schedules():
        if spec.name == name:
            return spec
    known = ", ".join(s.name for s in console.schedules()) or "none"
    raise LookupError(f"no schedule {name!r} among the loaded jobs (known: {known})")


def schedules(request: Request) -> Response:
    console: Console = request.app.state.console
    specs = console.schedules()
    store = console.store
    views = [schedule_runs(store, spec) for spec in specs] if store is not None else []
    return render(
        request,
        "schedules.html",
        page="schedules",
        specs=specs,
        views=views,
        window_hours=int(WINDOW.total_seconds() // 3600),
        has_store=store is not None,
    )


async def enqueue_now(request: Request) -> Response:
    console: Console = request.app.state.console
    spec = _spec(console, request.path_params["name"])
    result = await run_in_threadpool(lambda: enqueue_by_hand(console.client, spec))
    return render(request, "_enqueued.html", spec=spec, result=result)


routes = [
    Route("/schedules", schedules, name="schedules"),
    Route("/schedules/{name}/enqueue", enqueue_now, methods=["POST"], name="enqueue_now"),
]
