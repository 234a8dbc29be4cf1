"""``jf ui``: a local web console for operators (needs the ``ui`` extra).

Pages: Overview (queues, DLQs, the last hour per job type), Dead letters (grouped by reason and job
type, search, a letter in full, redrive by filter or selection with a dry-run count and progress,
purge with confirmation, export), Jobs (by id, key, type or status), Schedules (last run, heartbeat,
missed runs, enqueue now), Sagas (steps and compensations) and Retry plans. It is a Starlette app
with Jinja2 templates and htmx (vendored in ``static/``), served by uvicorn; it calls the library's
own operations (:mod:`jobframework.dlq`, :mod:`jobframework.state`, :mod:`jobframework.saga`,
:class:`jobframework.client.JobClient`). See docs/console.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jobframework.ui.app import create_app
    from jobframework.ui.console import Console

__all__ = ["Console", "create_app"]


def __getattr__(name: str) -> Any:
    """``Console`` and ``create_app`` on first use: the modules that read records and schedule runs
    (``jf schedules`` uses them) then need no web server installed (the ``ui`` extra)."""
    if name == "create_app":
        from jobframework.ui.app import create_app

        return create_app
    if name == "Console":
        from jobframework.ui.console import Console

        return Console
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
