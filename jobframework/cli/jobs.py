"""``jf enqueue``: one job at a time (``jf status``: cli/status.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer._click.exceptions import UsageError  # typer carries its own copy of click

from jobframework.cli.aws import aws_of, catalog_of
from jobframework.cli.base import (
    JobsOption,
    JsonOption,
    PriorityName,
    app,
    optional_jobs,
    parse_duration,
    print_json,
)
from jobframework.cli.errors import EXIT_FAILED, CliError

if TYPE_CHECKING:
    from jobframework.catalog import RoutedJob
    from jobframework.config import JobRoute
    from jobframework.jobs import Job

MAX_DELAY_SECONDS = 365 * 24 * 3600
"""The client's limit (``jobframework.client.MAX_SCHEDULED_DELAY_SECONDS``): one year."""
MAX_DELAY_HELP = (
    "How long before it runs (90, 90s, 15m, 2h, 1d), or when (a time with its zone: "
    "2027-01-31T09:00:00Z): up to 900 s by SQS DelaySeconds, longer (up to a year, 31536000 s) by an "
    "EventBridge Scheduler one-time schedule."
)


def _delay_seconds(text: str | None) -> float | None:
    """``--delay`` in seconds (a number of seconds, a duration such as ``15m``, or an ISO time with its
    zone to run at), at most a year."""
    if text is None:
        return None
    if "T" in text.strip() and "-" in text:  # (a time: 2027-01-31T09:00:00Z)
        from datetime import datetime

        from jobframework.errors import EnqueueOptionError
        from jobframework.outgoing import delay_seconds

        try:
            when = datetime.fromisoformat(text.strip())
            if when.tzinfo is None:  # (the client's words name a datetime object: not what was typed)
                raise EnqueueOptionError(f"{text.strip()} has no time zone")
            return float(delay_seconds(when))
        except ValueError as exc:  # (EnqueueOptionError too: no zone, over a year)
            shown = str(exc) if isinstance(exc, EnqueueOptionError) else f"{text!r} is not an ISO time"
            raise typer.BadParameter(
                f"{shown}; give a time with its zone, e.g. 2027-01-31T09:00:00Z", param_hint="--delay"
            ) from None
    seconds = parse_duration(text, option="--delay")
    if seconds > MAX_DELAY_SECONDS:
        raise typer.BadParameter(
            f"{text} is over the one-year limit ({MAX_DELAY_SECONDS:,} s, 365d)", param_hint="--delay"
        )
    return seconds


def _catalog_warning(
    found: Job[Any] | RoutedJob, catalog: dict[str, JobRoute], parameter: str | None, sent_version: int | None
) -> str | None:
    """What to warn of a job known here from ``--jobs`` that the consumers the catalog describes
    would dead-letter: one the catalog lacks (``unknown-type``), or a payload version newer than the
    catalog's (``version``). ``None``: nothing (a job of the catalog itself, or no catalog).

    Example:
        >>> from pydantic import BaseModel
        >>> from jobframework.config import JobRoute
        >>> from jobframework.jobs import JobRegistry, job
        >>> class P(BaseModel):
        ...     n: int
        >>> @job("t.new", registry=JobRegistry(), version=2, upgrade={1: lambda d: d})
        ... def new(p: P) -> None: ...
        >>> v1 = {"t.new": JobRoute(priority="default", lane="default", payload_schema={})}
        >>> print(_catalog_warning(new, v1, "/jf/dev/topology", None))  # doctest: +ELLIPSIS
        t.new is payload version 2 here and version 1 in the topology's job catalog (/jf/dev/topology)...
        >>> _catalog_warning(new, v1, "/jf/dev/topology", 1) is None  # (sent at the catalog's version)
        True
        >>> _catalog_warning(new, v1, "/jf/dev/topology", 3) is None  # (no such version: the enqueue says so)
        True
    """
    from jobframework.jobs import Job

    if not isinstance(found, Job) or not catalog:
        return None
    if sent_version is not None and not 1 <= sent_version <= found.version:
        return None  # (the enqueue refuses it, in its own words)
    route = catalog.get(found.name)
    where = f"the topology's job catalog ({parameter or 'the configuration'})"
    if route is None:
        return (
            f"{found.name} is not in {where}: the consumers it describes may not have it and would "
            "dead-letter it unknown-type (restart jf dev, or deploy, with its module)"
        )
    version = sent_version or found.version
    if version > route.version:
        return (
            f"{found.name} is payload version {version} here and version {route.version} in {where}: "
            "its consumers would hand it back for an hour, then dead-letter it `version` (restart jf dev, "
            "or deploy, with the new "
            f"module first; or send a version-{route.version} payload with --payload-version {route.version})"
        )
    return None


def _check_here(job_type: str, data: dict[str, Any], payload_version: int | None) -> None:
    """The payload of a job whose module is imported here (``--jobs``) checked before any AWS call: a
    field error said first, not an endpoint that cannot be reached."""
    from jobframework.errors import EnqueueOptionError
    from jobframework.jobs import registry
    from jobframework.outgoing import EnqueueRequest
    from jobframework.payload_data import checked_payload

    local = registry.find(job_type)
    if local is None:
        return
    try:
        checked_payload(local, EnqueueRequest(local, data, payload_version=payload_version))
    except EnqueueOptionError as exc:  # (a bad --payload-version: a bad argument)
        raise UsageError(str(exc)) from exc


def _waited(client: Any, job_id: str, seconds: float, sent: dict[str, Any] | None) -> None:
    """``--wait``: how the job ended (with ``sent``, as JSON beside it: ``"ended"``); exit 1 unless it
    succeeded, or when it has not ended within ``seconds``."""
    try:
        ended = client.wait(job_id, timeout=seconds)
    except TimeoutError as exc:
        if sent is not None:  # (and its status now, as the error says it)
            now = client.status(job_id)
            print_json({**sent, "ended": None, "status": now.model_dump(mode="json") if now else None})
        raise CliError(str(exc)) from None
    if sent is not None:
        print_json({**sent, "ended": ended.model_dump(mode="json")})
    elif ended.duplicate:
        # (an on-call trial's "enqueue again" read "succeeded after 1 attempt" of a run that never happened)
        typer.echo("not run: a duplicate (its key's earlier run succeeded; the result is that run's)")
        typer.echo(f"result: {ended.result if isinstance(ended.result, str) else json.dumps(ended.result)}")
        from jobframework.idempotency import DEFAULT_EXPIRY_SECONDS

        typer.echo(
            f"reason: {ended.reason}; to run the work again, enqueue a payload whose key differs, or "
            f"after the key's idempotency record lapses ({DEFAULT_EXPIRY_SECONDS // 3600} hours)"
        )
    else:
        typer.echo(f"{ended.status.value} after {ended.attempts} attempt{'' if ended.attempts == 1 else 's'}")
        for name, value in (("result", ended.result), ("reason", ended.reason), ("error", ended.error)):
            if value is not None:
                typer.echo(f"{name}: {value if isinstance(value, str) else json.dumps(value)}")
    if ended.status.value != "succeeded":
        raise typer.Exit(EXIT_FAILED)


def _payload_text(payload: str) -> str:
    """The payload argument's JSON: as given, from the file ``@FILE`` names, or from stdin (``-``)."""
    if payload == "-":
        return sys.stdin.read()
    if payload.startswith("@"):
        path = Path(payload[1:])
        try:
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise typer.BadParameter(
                f"cannot read the payload from {path}: {exc}", param_hint="JSON"
            ) from None
    return payload


@app.command()
def enqueue(  # noqa: PLR0917
    ctx: typer.Context,
    job_type: Annotated[
        str, typer.Argument(metavar="TYPE", help="Registered job name, e.g. reports.generate.")
    ],
    payload: Annotated[
        str,
        typer.Argument(
            metavar="JSON", help="The payload as a JSON object; @FILE reads it from a file, - from stdin."
        ),
    ],
    key: Annotated[
        str | None,
        typer.Option(
            help="Idempotency/dedup key: a second enqueue with it inside the dedup window sends nothing "
            "and prints the first job's id."
        ),
    ] = None,
    dedup_window: Annotated[
        float | None,
        typer.Option(
            help="Seconds a --key dedups for (0 off; default the job's own, else 86400, as long as the "
            "consumer's idempotency record lasts).",
            min=0,
            max=7 * 24 * 3600,
        ),
    ] = None,
    delay: Annotated[str | None, typer.Option(help=MAX_DELAY_HELP)] = None,
    priority: Annotated[PriorityName | None, typer.Option(help="Send to another priority's queue.")] = None,
    group: Annotated[
        str | None,
        typer.Option(
            help="The message group of an ordered job (a FIFO lane): its ordered_by value; needed when "
            "the job module is not importable here."
        ),
    ] = None,
    tenant: Annotated[
        str | None, typer.Option(help="The tenant (MessageGroupId of a standard queue: SQS fair queues).")
    ] = None,
    track: Annotated[
        bool | None,
        typer.Option(
            "--track/--no-track", help="Keep (or not) a status readable by id; default the job's own."
        ),
    ] = None,
    expires_in: Annotated[
        str | None,
        typer.Option(
            metavar="DURATION",
            help="By when it must have started (90, 90s, 15m, 2h, 1d), else it is dropped as expired.",
        ),
    ] = None,
    debounce: Annotated[
        str | None,
        typer.Option(
            metavar="DURATION", help="Window (5, 5s, 2m): of the enqueues of --key in it only the last runs."
        ),
    ] = None,
    payload_version: Annotated[
        int | None,
        typer.Option(
            help="The version of the payload's schema, when older than the job's (a producer not yet "
            "moved to a new version=): the consumer upgrades it.",
            min=1,
        ),
    ] = None,
    jobs: JobsOption = None,
    json_output: JsonOption = False,
    wait: Annotated[
        float | None,
        typer.Option(
            "--wait",
            metavar="SECONDS",
            min=0,
            help="Wait up to SECONDS for the job to end (it is tracked) and print how it ended; exit 1 "
            "unless it succeeded.",
        ),
    ] = None,
    countdown: Annotated[str | None, typer.Option(hidden=True)] = None,  # Celery's: "use --delay"
    eta: Annotated[str | None, typer.Option(hidden=True)] = None,
) -> None:
    """Enqueue one job; prints its id (with --key, a duplicate prints the first job's id).

    The job's route and payload schema come from the topology (its SSM parameter), so the job module
    need not be importable here; --jobs (or JF_JOBS) validates with the module's model instead.

    Example: jf enqueue reports.generate '{"report_id": "r-1"}' --key report:r-1
    """
    for celery, given in (("--countdown", countdown), ("--eta", eta)):
        if given is not None:
            raise typer.BadParameter(
                f"jf enqueue takes --delay: seconds, a duration (10m) or a time to run at (an ISO "
                f"datetime with its zone), e.g. --delay {given}",
                param_hint=celery,
            )
    if wait is not None and track is False:
        raise typer.BadParameter("--wait reads the job's status: not with --no-track", param_hint="--wait")
    delay_seconds = _delay_seconds(delay)  # (a bad one before anything is read or sent)
    if key is not None and not 0 < len(key) <= 1024:
        raise typer.BadParameter("a key has 1 to 1024 characters", param_hint="--key")
    try:
        data = json.loads(_payload_text(payload))
    except ValueError as exc:
        raise typer.BadParameter(
            f"the payload is not JSON ({exc}): a JSON object in single quotes for the shell, e.g. "
            f'jf enqueue {job_type} \'{{"field": "value"}}\'',
            param_hint="JSON",
        ) from None
    if not isinstance(data, dict):
        hint = (
            " (a batched job's too: its items are enqueued one at a time)" if isinstance(data, list) else ""
        )
        raise typer.BadParameter(f"the payload must be a JSON object{hint}", param_hint="JSON")
    optional_jobs(jobs)
    _check_here(job_type, data, payload_version)
    aws = aws_of(ctx)
    config = aws.runtime_config()
    client = aws.job_client(config)
    found = client.job(job_type)  # an unknown type fails before anything is sent
    warning = _catalog_warning(found, catalog_of(aws, config), config.topology_parameter, payload_version)
    if warning:
        typer.echo(f"jf: warning: {warning}", err=True)
    from jobframework.errors import EnqueueOptionError

    try:
        result = client.enqueue(
            job_type,
            data,
            key=key,
            delay=delay_seconds,
            priority=priority.value if priority else None,
            dedup_window=dedup_window,
            group=group,
            tenant=tenant,
            track=True if wait is not None else track,
            expires_in=parse_duration(expires_in, option="--expires-in") if expires_in is not None else None,
            debounce=parse_duration(debounce, option="--debounce") if debounce is not None else None,
            payload_version=payload_version,
        )
    except EnqueueOptionError as exc:  # the options given: a bad argument
        raise UsageError(str(exc)) from exc
    sent = {
        "id": result.id,
        "key": result.key,
        "type": result.job_type,
        "priority": result.priority.value,
        "message_id": result.message_id,
        "duplicate": result.duplicate,
    }
    if not json_output:
        typer.echo(result.id)
    if not result.duplicate:  # (an on-call trial's enqueue into a paused lane said nothing)
        aws.note_if_paused(config, found.lane_for(result.priority), "the job")
    if wait is not None:
        _waited(client, result.id, wait, sent if json_output else None)
    elif json_output:
        print_json(sent)
    if result.duplicate:
        typer.echo(
            f"jf: key {result.key} was enqueued already as job {result.id}; nothing sent (the key dedups "
            f"for its window whatever became of that job: jf status {result.id}; --dedup-window 0 sends "
            "it anyway)",
            err=True,
        )
