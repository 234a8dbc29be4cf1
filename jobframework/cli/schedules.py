"""``jf schedules``: the job modules' schedules, each with its next slot and its recent runs (Celery
beat's schedule listing; the console's Schedules page on the command line)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from jobframework.cli.aws import aws_of
from jobframework.cli.base import JobsOption, JsonOption, age_text, app, load_jobs, print_json, rich_console
from jobframework.cli.errors import CliError

if TYPE_CHECKING:
    from jobframework.registry import JobRegistry
    from jobframework.state import JobStatus, StateStore
    from jobframework.topology import RuntimeConfig, ScheduleSpec
    from jobframework.ui.schedule_runs import ScheduleRuns


@app.command("schedules")
def schedules(
    ctx: typer.Context,
    jobs: JobsOption = None,
    json_output: JsonOption = False,
    run: Annotated[
        str | None,
        typer.Option(
            "--run",
            metavar="JOB",
            help="Enqueue one run of JOB's schedule now, with the schedule's payload (beat's manual "
            "run; the console's Enqueue now); prints its id.",
        ),
    ] = None,
) -> None:
    """The schedules of the job modules (@job(schedule=...)): expression, time zone, next slot (a
    cron's) or interval (a rate's), and from the job status records the last run and the runs
    missed in the last 24 hours (tracked scheduled jobs keep a status; others show no runs).

    Example: jf schedules --jobs myapp.jobs
    Example: jf schedules --run warehouse.nightly_sync
    """
    from jobframework.jobs import registry

    load_jobs(jobs)
    config, store, why = _state(ctx)
    specs = _specs(registry, config)
    if not specs:
        raise CliError(
            f"no job of {', '.join(sorted(j.name for j in registry)) or 'the loaded modules'} has a "
            "schedule: name the modules with @job(schedule=...) (--jobs myapp.jobs, or JF_JOBS)"
        )
    if run is not None:
        _run_now(ctx, config, specs, run, why, json_output=json_output)
        return
    from jobframework.ui.schedule_runs import schedule_runs

    now = datetime.now(UTC)
    views = [schedule_runs(store, spec, now=now) if store is not None else None for spec in specs]
    stopped = _paused(store)
    if json_output:
        print_json(
            [
                {**_as_dict(spec, view, now), "lane_paused": spec.lane in stopped}
                for spec, view in zip(specs, views, strict=True)
            ]
        )
    else:
        _table(specs, views, now)
    for lane in sorted({spec.lane for spec in specs} & stopped.keys()):  # (runs fire, and wait there)
        held = ", ".join(spec.job for spec in specs if spec.lane == lane)
        typer.echo(
            f"note: the {lane} queue is paused (since {stopped[lane] or '?'}): the runs of {held} wait "
            f"in it until `jf queue resume {lane}`",
            err=True,
        )
    if why:
        typer.echo(f"note: runs not read: {why}", err=True)


def _run_now(
    ctx: typer.Context,
    config: RuntimeConfig | None,
    specs: tuple[ScheduleSpec, ...],
    job: str,
    why: str,
    *,
    json_output: bool,
) -> None:
    """``--run JOB``: one run of the schedule, now, keyed by a slot of its own (to the millisecond:
    never a scheduled slot's, whose run it would take)."""
    from jobframework.errortext import closest
    from jobframework.ui.schedule_runs import enqueue_by_hand

    spec = next((s for s in specs if s.job == job), None)
    if spec is None:
        names = [s.job for s in specs]
        close = closest(job, names)
        raise typer.BadParameter(
            f"no schedule of a job named {job!r}"
            + (f" (did you mean {close!r}?)" if close else f"; the scheduled jobs: {', '.join(names)}"),
            param_hint="--run",
        )
    if config is None:
        raise CliError(why)
    aws = aws_of(ctx)
    result = enqueue_by_hand(aws.job_client(config), spec)
    if not result.ok:
        raise CliError(f"the run of {spec.job} could not be sent: {result.error}")
    if json_output:
        print_json({"id": result.id, "type": spec.job, "key": result.key, "duplicate": result.duplicate})
    else:
        typer.echo(result.id)
    aws.note_if_paused(config, spec.lane, "the run")


def _paused(store: StateStore | None) -> dict[str, str]:
    """The lanes ``jf queue pause`` paused and since when (none without a state table)."""
    from jobframework.flow.pause import paused

    return paused(store) if store is not None else {}


def _state(ctx: typer.Context) -> tuple[RuntimeConfig | None, StateStore | None, str]:
    """The configuration and the status store, when there is one to read runs from (else why not)."""
    from jobframework.state import StateStore

    aws = aws_of(ctx)
    try:
        config = aws.runtime_config()
    except CliError as exc:
        return None, None, str(exc)
    if not config.state_table:
        return config, None, "no state table (JF_STATE_TABLE): the schedules' runs are their status records"
    return config, StateStore.of(config, aws.client("dynamodb", config=config)), ""


def _specs(registry: JobRegistry, config: RuntimeConfig | None) -> tuple[ScheduleSpec, ...]:
    """The registry's schedules, named as the topology names them (its app and stage, from the
    topology parameter: ``/<app>/<stage>/topology``)."""
    from jobframework.topology import Topology
    from jobframework.topology_settings import settings_of_parameter

    settings = settings_of_parameter(config.topology_parameter if config else None, "dev")
    return Topology.from_registry(registry, settings).schedules


def _last(view: ScheduleRuns | None) -> JobStatus | None:
    return view.runs[0] if view is not None and view.runs else None


def _next(spec: ScheduleSpec, now: datetime) -> tuple[datetime | None, str | None]:
    """A cron's next slot, or a rate's interval (its next time counts from its scheduler's start)."""
    from jobframework.local.scheduler import ScheduleClock
    from jobframework.ui.schedule_runs import interval

    every = interval(spec.expression)
    return (
        None if every else ScheduleClock(spec.expression, spec.timezone, start=now).next_after(now)
    ), every


def _as_dict(spec: ScheduleSpec, view: ScheduleRuns | None, now: datetime) -> dict[str, Any]:
    last = _last(view)
    upcoming, every = _next(spec, now)
    return {
        "name": spec.name,
        "job": spec.job,
        "expression": spec.expression,
        "timezone": spec.timezone,
        "next": upcoming.isoformat() if upcoming else None,
        "every": every,
        "last_run": (
            {"id": last.id, "status": str(last.status), "at": last.finished_at or last.started_at}
            if last is not None
            else None
        ),
        "missed_24h": len(view.missed) if view is not None else None,
    }


def _table(specs: tuple[ScheduleSpec, ...], views: list[ScheduleRuns | None], now: datetime) -> None:
    from rich.table import Table

    table = Table(title=f"{len(specs)} schedule{'' if len(specs) == 1 else 's'}", title_justify="left")
    for name in ("schedule", "job", "expression", "next", "last run", "missed (24 h)"):
        table.add_column(name, overflow="fold", no_wrap=name == "schedule")
    for spec, view in zip(specs, views, strict=True):
        upcoming, every = _next(spec, now)
        last = _last(view)
        when = last.finished_at or last.started_at if last is not None else None
        ago = age_text((now - datetime.fromisoformat(when)).total_seconds()) + " ago" if when else ""
        table.add_row(
            spec.name,
            spec.job,
            f"{spec.expression} {spec.timezone}",
            upcoming.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC") if upcoming else (every or "-"),
            f"{last.status} {ago}".strip() if last is not None else ("none seen" if view else "-"),
            (str(len(view.missed)) if view.runs else "-") if view is not None else "-",
        )
    rich_console().print(table)
