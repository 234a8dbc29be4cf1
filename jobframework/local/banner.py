"""What ``jf dev`` prints once it is ready: where the embedded AWS is, the exports, the schedules.

As text, lines a person reads and pastes (``export NAME=value``); with ``--json``, one JSON object on
one line (``"event": "ready"``), so that every line ``jf dev --json`` prints to stdout is a JSON object.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any


def ready_lines(
    *,
    endpoint_url: str,
    modules: Sequence[str],
    env: Mapping[str, str],
    schedules: Sequence[Mapping[str, Any]],
    workers: bool,
    json_lines: bool,
    retry_budget: float | None = None,
    reloaded: bool = False,
) -> list[str]:
    """The lines of ``jf dev``'s banner, as text, or as one JSON line with ``json_lines``.

    Example:
        >>> ready_lines(endpoint_url="http://127.0.0.1:4566", modules=["app.jobs"],
        ...             env={"JF_ENDPOINT_URL": "http://127.0.0.1:4566"}, schedules=[], workers=True,
        ...             json_lines=True)
        ['{"event": "ready", "endpoint_url": "http://127.0.0.1:4566", "jobs": ["app.jobs"], "env": {"JF_ENDPOINT_URL": "http://127.0.0.1:4566"}, "schedules": [], "workers": true}']
    """  # noqa: E501
    if json_lines:
        ready = {
            "event": "ready",
            "endpoint_url": endpoint_url,
            "jobs": list(modules),
            "env": dict(env),
            "schedules": [dict(s) for s in schedules],
            "workers": workers,
        }
        if reloaded:
            ready["reloaded"] = True
        return [json.dumps(ready)]
    if reloaded:  # jf dev --reload: the exports are those printed at its start
        return [
            f"jf dev: reloaded jobs from {', '.join(modules)}",
            *(f"# schedule {s['job']} {s['expression']}, next {s['next']}" for s in schedules),
            "# ready: one line per job outcome below; Ctrl-C stops" if workers else "# ready: no workers",
            "",
        ]
    lines = [
        f"jf dev: embedded AWS at {endpoint_url}, jobs from {', '.join(modules)}",
        "",
        "# Point another shell (other jf commands, your services) at it:",
        *(f"export {name}={value}" for name, value in env.items()),
        "",
        *(f"# schedule {s['job']} {s['expression']}, next {s['next']}" for s in schedules),
    ]
    if workers:
        lines.append(budget_line(retry_budget))
        lines.append("# ready: one line per job outcome below; Ctrl-C stops")
    else:
        lines.append(
            "# ready: no workers (--no-workers): the queues wait for `jf worker` or your consumer, "
            "run in a shell with the exports above; Ctrl-C stops"
        )
    lines.append("")
    return lines


def budget_line(retry_budget: float | None) -> str:
    """What the banner says of the retry budget (two trials testing retries met it unawares).

    Example:
        >>> budget_line(0.2)
        '# retry budget: 20 % of first attempts, at least 100 retries in 5 min a queue; past it a retry is dead-lettered budget (JF_RETRY_BUDGET=off to try retries freely)'
        >>> budget_line(None)
        '# retry budget: off (JF_RETRY_BUDGET=off)'
    """  # noqa: E501
    if retry_budget is None:
        return "# retry budget: off (JF_RETRY_BUDGET=off)"
    from jobframework.budget import RetryBudget

    budget = RetryBudget()
    return (
        f"# retry budget: {retry_budget * 100:g} % of first attempts, at least {budget.floor} retries in "
        f"{budget.window / 60:g} min a queue; past it a retry is dead-lettered budget (JF_RETRY_BUDGET=off "
        "to try retries freely)"
    )
