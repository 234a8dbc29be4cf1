"""``jf retry-plan``: a job's retry schedule as SQS applies it."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from jobframework.cli.base import JobsOption, JsonOption, age_text, app, load_jobs, print_json, rich_console
from jobframework.cli.errors import CliError


@app.command("retry-plan")
def retry_plan(
    job_type: Annotated[str, typer.Argument(metavar="TYPE", help="Registered job name.")],
    jobs: JobsOption = None,
    json_output: JsonOption = False,
) -> None:
    """The retry schedule of a job's policy: attempt, delay range, cumulative time.

    Example: jf retry-plan webhooks.deliver
    """
    load_jobs(jobs)
    from jobframework.errors import UnknownJobError
    from jobframework.jobs import registry

    try:
        job = registry.get(job_type)
    except UnknownJobError:
        from jobframework.errortext import closest

        names = [j.name for j in registry]
        close = closest(job_type, names, cutoff=0.8)
        raise CliError(
            f"no job named {job_type!r} is registered"
            + (f" (did you mean {close!r}?)" if close else f" (known: {', '.join(names) or 'none'})")
        ) from None
    from jobframework.retry_plan import OWN_DELAY_NOTE, retry_plan

    rows = [
        {
            "attempt": row.attempt,
            "next_attempt": row.attempt + 1,
            "delay_min": row.delay_min,
            "delay_max": row.delay_max,
            "cumulative_min": row.cumulative_min,
            "cumulative_max": row.cumulative_max,
        }
        for row in retry_plan(job.retry)
    ]
    budget = budget_of(job.retry_budget, job.lane)
    if json_output:
        print_json(
            {
                "type": job.name,
                "max_attempts": job.retry.max_attempts,
                "retries": rows,
                "retry_budget": budget,
            }
        )
        return
    from rich.table import Table

    table = Table(
        title=f"{job.name}: {job.retry.max_attempts} attempts, then the DLQ",
        title_justify="left",
        caption=(
            "as SQS applies them: the policy's delay and jitter rounded up to whole seconds; "
            f"{OWN_DELAY_NOTE}. {budget['note']}"
        ),
        caption_justify="left",
    )
    for name in ("failed attempt", "next attempt after", "cumulative"):
        table.add_column(name, justify="right")
    for row in rows:
        table.add_row(
            str(row["attempt"]),
            f"{_whole(row['delay_min'])} - {_whole(row['delay_max'])}",
            f"{_whole(row['cumulative_min'])} - {_whole(row['cumulative_max'])}",
        )
    if not rows:
        table.add_row("1", "no retry", "-")
    rich_console().print(table)


def budget_of(option: object, lane: str) -> dict[str, Any]:
    """Which retry budget the job's retries count against, and what it does to the plan (an on-call
    trial's outage dead-lettered most jobs at attempt 1 while this table promised every attempt):
    ``budget`` (the queue's lane, a name, ``"per payload"``, or ``None``: off), ``fraction``,
    ``floor``, ``window_seconds`` and a ``note`` for the table's caption."""
    import contextlib
    import os

    from jobframework.budget import RetryBudget
    from jobframework.config import RuntimeConfig

    setting = os.environ.get("JF_RETRY_BUDGET")
    fraction = RuntimeConfig.model_fields["retry_budget"].default
    with contextlib.suppress(ValueError):  # (a bad setting: the consumer refuses it at its start)
        fraction = RuntimeConfig(queues={}, retry_budget=setting).retry_budget if setting else fraction
    if option is False or fraction is None:
        why = "retry_budget=False" if option is False else "JF_RETRY_BUDGET=off"
        return {"budget": None, "note": f"No retry budget ({why}): every attempt above is made."}
    if option is True:
        name, of = lane, f"the {lane} queue's retry budget"
    elif isinstance(option, str):
        name, of = option, f"the retry budget {option!r}"
    else:
        name, of = "per payload", "the retry budget its retry_budget= function names"
    defaults = RetryBudget()
    return {
        "budget": name,
        "fraction": fraction,
        "floor": defaults.floor,
        "window_seconds": defaults.window,
        "note": (
            f"Each retry also needs room in {of}: up to {fraction * 100:g} % of first attempts, at least "
            f"{defaults.floor}, in {defaults.window / 60:g} minutes. Past it a retry is dead-lettered "
            "(reason budget) at once, so in a long outage most jobs end there: redrive them once the "
            "downstream is back."
        ),
    }


def _whole(seconds: float) -> str:
    """Whole seconds as SQS hides a message for them (``45 s``), minutes and up as :func:`age_text` says.

    Example:
        >>> _whole(1), _whole(11), _whole(90)
        ('1 s', '11 s', '1.5m')
    """
    return f"{seconds:.0f} s" if seconds < 60 else age_text(seconds)
