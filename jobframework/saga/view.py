"""How ``jf saga ls`` and ``jf saga show`` present saga records (plain data and rich tables)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from jobframework.saga.record import SagaRecord, StepRecord, StepState


def _seconds(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    return round((datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds(), 3)


def current_step(record: SagaRecord) -> str | None:
    """The step the saga is at: queued or waiting, or the compensation in flight."""
    for s in record.steps:
        if s.compensation_state is not None and s.compensation_state.value in ("queued", "failed"):
            return f"compensate:{s.name}"
    for s in record.steps:
        if s.state in (StepState.QUEUED, StepState.WAITING):
            return s.name
    return None


def saga_summary(record: SagaRecord) -> dict[str, Any]:
    """One line of ``jf saga ls``.

    Example:
        >>> from jobframework.saga import SagaRecord
        >>> r = SagaRecord(id="s-1", name="order.place", created_at="2026-01-01T00:00:00+00:00",
        ...                updated_at="2026-01-01T00:00:02+00:00")
        >>> saga_summary(r)["status"]
        'running'
    """
    return {
        "id": record.id,
        "name": record.name,
        "status": record.status.value,
        "step": current_step(record),
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "duration_seconds": _seconds(record.created_at, record.finished_at),
        "reason": record.reason,
        "version": record.version,
    }


def _output(value: Any, limit: int = 60) -> str:
    if value is None:
        return "-"
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _step_timing(s: StepRecord) -> str:
    took = _seconds(s.started_at or s.queued_at, s.finished_at)
    if s.deadline and s.state is StepState.WAITING:
        return f"deadline {s.deadline}"
    return "-" if took is None else f"{took:.2f}s"


def saga_table(record: SagaRecord) -> Any:
    """``jf saga show``: a header and a table of the steps and their compensations."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    took = _seconds(record.created_at, record.finished_at)
    lines = [
        f"saga {record.id} ({record.name}): {record.status.value}",
        f"started {record.created_at}"
        + (f", finished {record.finished_at} ({took:.2f}s)" if took is not None else "")
        + f", version {record.version}",
    ]
    if record.trace_id:
        lines.append(f"trace {record.trace_id}")
    if record.reason:
        lines.append(f"reason: {record.reason}")
    if record.error:
        lines.append(f"error: {record.error}")
    if record.outbox:
        lines.append(f"outbox: {len(record.outbox)} message(s) not yet confirmed sent")
    table = Table(title="steps", title_justify="left")
    for column in ("#", "step", "job", "state", "attempts", "took", "output / error", "compensation"):
        table.add_column(column, overflow="fold")
    for n, s in enumerate(record.steps, 1):
        if s.compensation_state is not None:
            undo = f"{s.compensation} {s.compensation_state.value}"
            if s.compensation_attempts:
                tries = s.compensation_attempts
                undo += f" ({tries} attempt{'' if tries == 1 else 's'})"
            if s.compensation_error:
                undo += f": {s.compensation_error}"
        else:  # (declared, never queued: the step did not need undoing, or has not yet)
            undo = f"{s.compensation} not run" if s.compensation else "-"
        table.add_row(
            str(n),
            s.name,
            s.job or f"wait {s.name!r}",
            s.state.value,
            str(s.attempts or "-"),
            _step_timing(s),
            s.error if s.error else _output(s.output),
            undo,
        )
    return Group(Text("\n".join(lines)), table)
