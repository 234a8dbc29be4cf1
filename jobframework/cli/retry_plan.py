"""``jf retry-plan``: a job's retry schedule as SQS applies it."""

from __future__ import annotations

from typing import Annotated

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
    budget = budget_note(job.retry_budget, job.lane)
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
            f"{OWN_DELAY_NOTE}. {budget}"
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


def budget_note(option: object, lane: str) -> str:
    """What the retry budget does to the plan (an on-call trial's outage dead-lettered most jobs
    ``budget`` at attempt 1 while this table promised every attempt)."""
    if option is False:
        return "No retry budget (retry_budget=False): every attempt above is made."
    if option is True:
        of = f"the {lane} queue's retry budget"
    elif isinstance(option, str):
        of = f"the retry budget {option!r}"
    else:
        of = "the retry budget its retry_budget= function names"
    return (
        f"Each retry also needs room in {of} (JF_RETRY_BUDGET: by default retries up to 20 % of first "
        "attempts, at least 100 in 5 minutes): past it, a retry is dead-lettered budget at once, so in a "
        "long outage most jobs end there (redrive them once the downstream is back)."
    )


def _whole(seconds: float) -> str:
    """Whole seconds as SQS hides a message for them (``45 s``), minutes and up as :func:`age_text` says.

    Example:
        >>> _whole(1), _whole(11), _whole(90)
        ('1 s', '11 s', '1.5m')
    """
    return f"{seconds:.0f} s" if seconds < 60 else age_text(seconds)
