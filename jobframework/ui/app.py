"""The console's ASGI app: Starlette routes per page, Jinja2 templates, htmx from the package.

Example:
    >>> app = create_app(console, allowed_hosts=["127.0.0.1", "localhost"])   # doctest: +SKIP
    >>> uvicorn.run(app, host="127.0.0.1", port=8089)                          # doctest: +SKIP
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from jobframework.ui import security
from jobframework.ui.console import Console
from jobframework.ui.pages import (
    dead_letters,
    dlq_actions,
    flow,
    jobs,
    overview,
    retry_plans,
    sagas,
    schedules,
)
from jobframework.ui.tasks import Tasks
from jobframework.ui.templating import is_htmx, make_templates, render

log = logging.getLogger(__name__)


def describe_error(exc: BaseException) -> tuple[int, str]:
    """The HTTP status and one line for a failure a page hit (never a traceback, never a credential)."""
    from botocore.exceptions import (
        BotoCoreError,
        ClientError,
        ConnectTimeoutError,
        EndpointConnectionError,
        NoCredentialsError,
        ReadTimeoutError,
    )

    from jobframework.errors import ConfigurationError, JobFrameworkError

    text = " ".join(str(exc).split())
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, EndpointConnectionError | ConnectTimeoutError | ReadTimeoutError):
            return 502, f"cannot reach the AWS endpoint: {' '.join(str(seen).split())}"
        seen = seen.__cause__ or seen.__context__
    if isinstance(exc, NoCredentialsError):
        return 502, "no AWS credentials: start jf ui with a profile (--profile/AWS_PROFILE) or against jf dev"
    if isinstance(exc, ClientError):
        from jobframework.cli.errors import missing_resource_hint  # (an earlier jf dev's exports, say)

        error = exc.response.get("Error", {})
        message = " ".join(str(error.get("Message", "")).split())
        return 502, f"AWS refused the request: {error.get('Code')}: {message}{missing_resource_hint(exc)}"
    if isinstance(exc, LookupError):
        return 404, text
    if isinstance(exc, ConfigurationError | ValueError):
        return 400, text
    if isinstance(exc, JobFrameworkError | BotoCoreError):
        return 502, text
    return 500, f"{type(exc).__name__}: {text}"


class RenderErrors:
    """ASGI middleware: a failing page answers with the error page (or fragment), one line, logged."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watch(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except Exception as exc:
            if started:
                raise
            response = await _error(Request(scope, receive), exc)
            await response(scope, receive, send)


async def _error(request: Request, exc: Exception) -> Response:
    if isinstance(exc, HTTPException):
        status, message = exc.status_code, str(exc.detail)
    else:
        status, message = describe_error(exc)
        if status == 500:
            log.exception("console page %s failed", request.url.path, exc_info=exc)
    name = "_error.html" if is_htmx(request) else "error.html"
    return render(request, name, status_code=status, message=message, status=status)


def create_app(
    console: Console, *, allowed_hosts: Sequence[str] = ("127.0.0.1", "localhost"), csrf_token: str = ""
) -> Starlette:
    """The console for ``console``, answering only requests addressed to ``allowed_hosts``."""
    routes = [
        *overview.routes,
        *dead_letters.routes,
        *dlq_actions.routes,
        *jobs.routes,
        *schedules.routes,
        *sagas.routes,
        *retry_plans.routes,
        *flow.routes,
        Mount("/static", app=StaticFiles(packages=[("jobframework.ui", "static")]), name="static"),
    ]
    token = csrf_token or security.new_token()
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts)),
            Middleware(security.Protect, token=token, read_only=console.read_only),
            Middleware(RenderErrors),
        ],
        exception_handlers={HTTPException: _error},
    )
    app.state.console = console
    app.state.csrf_token = token
    app.state.templates = make_templates()
    app.state.tasks = Tasks()
    return app
