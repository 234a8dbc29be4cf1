"""What ``jf demo`` shows on the console: live progress, then the summary, stage by stage."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import TYPE_CHECKING, Any

from jobframework.jobs import Priority

if TYPE_CHECKING:
    from jobframework.local.demo import DemoReport, Tally

BANNER = (
    "[bold]jf demo[/]: the job lifecycle (enqueue, run, retry, dead-letter, redrive, schedule, saga) "
    "on the embedded AWS with the real consumer and the example jobs; about 15 s"
)
"""What ``jf demo`` prints first (it takes 11-13 s on a quiet 2-core machine, up to 25 s on a busy one)."""


def progress_table(tally: Tally, expected: Counter[str], title: str) -> Any:
    from rich.progress_bar import ProgressBar
    from rich.table import Table

    table = Table(title=title, title_justify="left", box=None, pad_edge=False)
    # "failed": dead letters, and a saga's failed step, which its saga compensates without one (the
    # column read "dead-lettered" and counted one more than the summary's letters)
    for name in ("queue", "", "settled", "succeeded", "retries", "failed"):
        table.add_column(name, justify="left" if name in ("queue", "") else "right")
    for prio in Priority:
        total = expected[prio.value]
        settled = tally.settled(prio.value)
        table.add_row(
            prio.value,
            ProgressBar(total=max(total, 1), completed=min(settled, total), width=30),
            f"{settled}/{total}",
            str(tally.succeeded[prio.value]),
            str(tally.retried[prio.value]),
            str(tally.dead[prio.value]),
        )
    return table


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f} ms"


def phases(report: DemoReport) -> str:
    """The seconds of the demo's phases, in order.

    Example:
        >>> from types import SimpleNamespace
        >>> phases(SimpleNamespace(phases={"start": 1.24, "workload": 9.5}))
        'start 1.2 s, workload 9.5 s'
    """
    return ", ".join(f"{name} {seconds:.1f} s" for name, seconds in report.phases.items()) or "-"


def render_summary(report: DemoReport) -> Any:
    """The summary as rich renderables: the workload, each lifecycle stage with what it did, timings."""
    from rich.console import Group
    from rich.table import Table

    by_queue: defaultdict[str, int] = defaultdict(int, report.enqueued)
    mix = Table(title="workload", title_justify="left")
    mix.add_column("queue")
    mix.add_column("jobs", justify="right")
    for prio in Priority:
        mix.add_row(prio.value, str(by_queue[prio.value]))

    stages = Table(title="summary: the job lifecycle, stage by stage", title_justify="left", box=None)
    stages.add_column("stage", style="bold")
    stages.add_column("what the demo showed", no_wrap=True)
    stages.add_column("", justify="right")
    stages.add_row(
        "enqueue",
        "jobs enqueued",
        str(sum(report.enqueued.values())),
    )
    stages.add_row("run", "succeeded", str(report.succeeded))
    stages.add_row("retry", "retries (visibility backoff)", str(report.retries))
    stages.add_row("", "jobs that retried, then succeeded", str(report.retried_then_succeeded))
    dead = sorted(report.dead_lettered.items())
    for n, (reason, count) in enumerate(dead):
        stages.add_row("dead-letter" if n == 0 else "", f"dead-lettered: {reason}", str(count))
    stages.add_row(
        "redrive", "redriven after the CRM fix", f"{report.redriven} -> {report.redriven_succeeded} succeeded"
    )
    stages.add_row(
        "", "left in the DLQs", ", ".join(f"{k} {v}" for k, v in report.left_in_dlqs.items() if v) or "0"
    )
    stages.add_row("schedule", "scheduled runs fired", str(len(report.scheduled)))
    for n, s in enumerate(report.sagas):
        detail = s["status"]
        if s["reason"]:
            detail += f" ({s['reason']}; undone: {', '.join(s['compensated']) or 'nothing'})"
        stages.add_row("saga" if n == 0 else "", f"saga order.place {s['order_id']}", detail)
    stages.add_row("took", "elapsed", f"{report.elapsed_seconds:.1f} s")
    stages.add_row("", "of which", phases(report))

    timings = Table(title="timings of successful attempts", title_justify="left")
    timings.add_column("")
    timings.add_column("p50", justify="right")
    timings.add_column("p95", justify="right")
    timings.add_row("queue wait", _ms(report.queue_wait_ms["p50"]), _ms(report.queue_wait_ms["p95"]))
    timings.add_row("processing", _ms(report.processing_ms["p50"]), _ms(report.processing_ms["p95"]))
    return Group(mix, stages, timings)
