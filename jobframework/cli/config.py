"""``jf config``: what the other commands would read, and from where (before a purge at 3 a.m.)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from jobframework.cli.aws import aws_of
from jobframework.cli.base import JsonOption, app, print_json, rich_console, where_text

if TYPE_CHECKING:
    from jobframework.cli.aws import Aws
    from jobframework.topology import RuntimeConfig


@app.command("config")
def show_config(ctx: typer.Context, json_output: JsonOption = False) -> None:
    """The configuration jf reads: which deployment, from where (the JF_* variables or the topology
    parameter), its queues and DLQs, tables, payload bucket, the job catalog's size, and the job
    modules jf dev and jf worker would import. Reads the parameter when no JF_QUEUE_URL_* is set;
    nothing else is called.

    Example: jf config
    """
    aws = aws_of(ctx)
    config = aws.runtime_config()
    shown = described(config, aws)
    if json_output:
        print_json(shown)
        return
    _print(shown)


def described(config: RuntimeConfig, aws: Aws) -> dict[str, Any]:
    """The configuration as ``--json`` prints it."""
    from jobframework.cli.aws import catalog_of
    from jobframework.config import queues_in_env
    from jobframework.core import lane_sort_key
    from jobframework.topology import ENV_TOPOLOGY_PARAMETER

    from_variables = bool(queues_in_env(os.environ))  # (as RuntimeConfig.from_env decides)
    parameter = config.topology_parameter or os.environ.get(ENV_TOPOLOGY_PARAMETER)
    region = config.region or aws.region or aws.session(None).region_name
    return {
        "deployment": where_text(config),
        "source": "JF_* variables" if from_variables else f"SSM parameter {parameter}" + _over(),
        "endpoint_url": aws.endpoint_url or config.endpoint_url,
        "region": region,
        "profile": aws.profile or os.environ.get("AWS_PROFILE"),
        "queues": {
            lane: {"queue": ep.url, "dlq": ep.dlq_url}
            for lane, ep in sorted(config.queues.items(), key=lambda kv: lane_sort_key(kv[0]))
        },
        "state_table": config.state_table,
        "idempotency_table": config.idempotency_table,
        "payload_bucket": config.payload_bucket,
        "signing_keys": config.signing_keys,
        "schedule_group": config.schedule_group,
        "retry_budget": config.retry_budget,
        "catalog_jobs": sorted(catalog_of(aws, config)),  # (jf dev's exports name its parameter)
        "job_modules": _job_modules(),
    }


def _job_modules() -> dict[str, Any]:
    """The modules ``jf dev``/``jf worker`` import with no ``--jobs``, and where that comes from."""
    from jobframework.config import ENV_JOBS
    from jobframework.errors import ConfigurationError
    from jobframework.modules import parse_job_modules
    from jobframework.project_file import project_jobs

    named = parse_job_modules(os.environ.get(ENV_JOBS, ""))
    if named:
        return {"modules": named, "from": ENV_JOBS}
    try:
        found = project_jobs(Path.cwd())
    except ConfigurationError as exc:  # (a bad project file: said, and the rest shown)
        return {"modules": [], "from": None, "error": str(exc)}
    if found is not None:
        return {"modules": found.modules, "from": str(found.path)}
    return {"modules": [], "from": None}


def _print(shown: dict[str, Any]) -> None:
    from rich.table import Table

    console = rich_console()
    for label, key in (
        ("deployment", "deployment"),
        ("read from", "source"),
        ("endpoint", "endpoint_url"),
        ("region", "region"),
        ("profile", "profile"),
        ("state table", "state_table"),
        ("idempotency table", "idempotency_table"),
        ("payload bucket", "payload_bucket"),
        ("signing keys", "signing_keys"),
        ("schedule group", "schedule_group"),
    ):
        value = shown[key]
        if key == "endpoint_url" and value is None:
            value = "AWS (the boto3 chain)"
        console.print(
            f"{label + ':':<19} {value if value is not None else '-'}", markup=False, highlight=False
        )
    budget = shown["retry_budget"]
    console.print(
        f"{'retry budget:':<19} {'off' if budget is None else f'{budget:g} retries per first attempt'}",
        markup=False,
        highlight=False,
    )
    jobs = shown["catalog_jobs"]
    console.print(
        f"{'job catalog:':<19} {len(jobs)} job(s)" + (f": {', '.join(jobs)}" if jobs else ""),
        markup=False,
        highlight=False,
    )
    modules = shown["job_modules"]
    if modules["modules"]:
        said = f"{', '.join(modules['modules'])} (from {modules['from']})"
    elif modules.get("error"):
        said = f"not read: {modules['error']}"
    else:
        said = (
            "none named (jf dev and jf worker take --jobs, JF_JOBS or pyproject.toml's "
            "[tool.jobframework] jobs)"
        )
    console.print(f"{'job modules:':<19} {said}", markup=False, highlight=False)
    table = Table(title=f"Queues of {shown['deployment']}", title_justify="left")
    for name in ("lane", "queue", "dlq"):
        table.add_column(name, overflow="fold")
    for lane, ep in shown["queues"].items():
        table.add_row(lane, ep["queue"], ep["dlq"])
    console.print(table)


def _over() -> str:
    """`` (JF_SIGNING_KEYS over it)``: the settings the environment gives over a parameter's."""
    from jobframework.config import OPTIONAL_SETTINGS, over_parameter

    given = {field: os.environ[name] for field, name in OPTIONAL_SETTINGS.items() if os.environ.get(name)}
    over = [OPTIONAL_SETTINGS[field] for field in over_parameter(given)]
    return f" ({', '.join(over)} over it)" if over else ""
