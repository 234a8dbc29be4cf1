"""The console's Jinja2 templates (autoescaped, from the package) and the filters they use."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.templating import Jinja2Templates

NAV = (
    ("overview", "/", "Overview"),
    ("dlq", "/dlq", "Dead letters"),
    ("jobs", "/jobs", "Jobs"),
    ("schedules", "/schedules", "Schedules"),
    ("sagas", "/sagas", "Sagas"),
    ("retry", "/retry-plans", "Retry plans"),
)


def duration(seconds: float | None) -> str:
    """``0.25`` -> ``250 ms``, ``90`` -> ``1.5m``, ``None`` -> ``-``.

    Example:
        >>> duration(0.25), duration(90), duration(7200), duration(None)
        ('250 ms', '1.5m', '2.0h', '-')
    """
    if seconds is None:
        return "-"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.1f}s"


def _moment(value: str | datetime) -> datetime:
    """An ISO time (or datetime) as an aware datetime (UTC when it names no zone); raises ValueError."""
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(value)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def when(value: str | datetime | None) -> str:
    """An ISO time (or datetime) as ``2026-12-02 13:00:05 UTC``."""
    if value is None or value == "":
        return "-"
    try:
        moment = _moment(value)
    except ValueError:
        return str(value)
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def epoch_ms(value: str) -> str:
    """SQS's epoch milliseconds (``SentTimestamp``) as ``when`` shows a time, the number beside it.

    Example:
        >>> epoch_ms("1796556405353"), epoch_ms("AROA...")
        ('2026-12-06 11:26:45 UTC (1796556405353)', 'AROA...')
    """
    if not value.isdigit():
        return value
    return f"{when(datetime.fromtimestamp(int(value) / 1000, UTC))} ({value})"


def ago(value: str | datetime | None) -> str:
    """How long ago an ISO time (or datetime) was: ``5.0m ago``."""
    if value is None or value == "":
        return "-"
    try:
        moment = _moment(value)
    except ValueError:
        return str(value)
    seconds = (datetime.now(UTC) - moment).total_seconds()
    return f"in {duration(-seconds)}" if seconds < 0 else f"{duration(seconds)} ago"


def percent(rate: float | None) -> str:
    return "-" if rate is None else f"{100 * rate:.1f} %"


def pretty_json(value: Any) -> str:
    """A JSON text (or value) indented for reading; other text as is."""
    text = value if isinstance(value, str) else None
    try:
        if text is not None:
            value = json.loads(text)
        return json.dumps(value, indent=2, sort_keys=True, default=str)
    except (ValueError, RecursionError):  # (not JSON, or nested deeper than Python reads: as it is)
        return text if text is not None else repr(value)


def deployment(parameter: str | None) -> str | None:
    """The app and stage a console reads, from its topology parameter's name (``None``: another shape).

    Example:
        >>> deployment("/uploads/dev/topology"), deployment("/custom/name"), deployment(None)
        ('uploads/dev', None, None)
    """
    from jobframework.topology_settings import app_of_parameter, settings_of_parameter

    if app_of_parameter(parameter) is None:
        return None
    settings = settings_of_parameter(parameter, "dev")
    return f"{settings.app}/{settings.stage}"


def make_templates() -> Jinja2Templates:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("jobframework.ui", "templates"),
        autoescape=jinja2.select_autoescape(["html"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        duration=duration, when=when, ago=ago, percent=percent, pretty_json=pretty_json, epoch_ms=epoch_ms
    )
    env.globals["nav"] = NAV
    env.globals["deployment"] = deployment
    return Jinja2Templates(env=env)


def render(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    """Render a template with what every page needs (the console, its token, the active page)."""
    state = request.app.state
    templates: Jinja2Templates = state.templates
    response: HTMLResponse = templates.TemplateResponse(
        request,
        template,
        {
            "console": state.console,
            "read_only": state.console.read_only,
            "csrf_token": state.csrf_token,
            "csrf_headers": json.dumps({"X-CSRF-Token": state.csrf_token}),
            "page": context.pop("page", ""),
            **context,
        },
        status_code=status_code,
    )
    return response


def is_htmx(request: Request) -> bool:
    return request.headers.get("hx-request") == "true"
