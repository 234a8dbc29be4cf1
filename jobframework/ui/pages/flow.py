"""Flow control in the console: pause and resume a queue (Overview), cancel a job (its page).

Pause and resume are :mod:`jobframework.flow.pause` (the pollers' flag in the state table, and the
event source mappings when the console has a Lambda client); cancel is
:meth:`jobframework.client.JobClient.cancel`. Each answers with the fragment it replaces.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from jobframework.flow import pause as flags
from jobframework.ui.console import Console
from jobframework.ui.templating import render


def _switch(console: Console, lane: str, *, pause: bool) -> str | None:
    """Pause or resume ``lane``; the time it is paused since (``None`` once resumed)."""
    store = console.require_store()
    if console.lambda_client is not None:
        from jobframework.local.pollers import queue_arn_from_url

        arn = queue_arn_from_url(console.config.endpoints(lane).url, console.config.region or "us-east-1")
        flags.set_mappings_enabled(console.lambda_client, arn, enabled=not pause)
    if pause:
        flags.pause(store, lane, by="jf ui")
    else:
        flags.resume(store, lane)
    return flags.paused(store).get(lane)


async def pause_queue(request: Request) -> Response:
    console: Console = request.app.state.console
    lane = console.lane(request.path_params["lane"])
    since = await run_in_threadpool(_switch, console, lane, pause=True)
    return render(request, "_queue_state.html", lane=lane, paused_at=since, has_store=True)


async def resume_queue(request: Request) -> Response:
    console: Console = request.app.state.console
    lane = console.lane(request.path_params["lane"])
    since = await run_in_threadpool(_switch, console, lane, pause=False)
    return render(request, "_queue_state.html", lane=lane, paused_at=since, has_store=True)


async def cancel_job(request: Request) -> Response:
    console: Console = request.app.state.console
    job_id = request.path_params["job_id"]
    console.require_store()
    result = await run_in_threadpool(console.client.cancel, job_id)
    return render(request, "_cancelled.html", result=result)


routes = [
    Route("/queues/{lane}/pause", pause_queue, methods=["POST"], name="pause_queue"),
    Route("/queues/{lane}/resume", resume_queue, methods=["POST"], name="resume_queue"),
    Route("/jobs/{job_id}/cancel", cancel_job, methods=["POST"], name="cancel_job"),
]
