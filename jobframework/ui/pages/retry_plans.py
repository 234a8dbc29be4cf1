"""Retry plans: each loaded job's policy as a schedule of delays (what ``jf retry-plan`` prints).

The delays are :func:`jobframework.retry_plan.retry_plan`'s, as ``jf retry-plan`` prints them: after
each failed attempt, the shortest and longest delay the jitter allows in whole seconds (as SQS hides a
message), and the cumulative time since the first attempt.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from jobframework import retry_plan as plans
from jobframework.jobs import Job
from jobframework.ui.console import Console
from jobframework.ui.templating import render


def plan(job: Job[Any]) -> list[plans.PlanRow]:
    return plans.retry_plan(job.retry)


def retry_plans(request: Request) -> Response:
    console: Console = request.app.state.console
    jobs = sorted(console.registry or [], key=lambda j: j.name)
    return render(request, "retry_plans.html", page="retry", jobs=jobs, plans={j.name: plan(j) for j in jobs})


def retry_plan(request: Request) -> Response:
    console: Console = request.app.state.console
    name = request.path_params["job_type"]
    job = console.registry.find(name) if console.registry is not None else None
    if job is None:
        known = ", ".join(sorted(j.name for j in console.registry or [])) or "none"
        raise LookupError(f"no job named {name!r} is loaded (known: {known}; start jf ui with --jobs)")
    return render(
        request, "retry_plan.html", page="retry", job=job, rows=plan(job), own_delay_note=plans.OWN_DELAY_NOTE
    )


routes = [
    Route("/retry-plans", retry_plans, name="retry_plans"),
    Route("/retry-plans/{job_type}", retry_plan, name="retry_plan"),
]
