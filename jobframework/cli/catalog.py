"""``jf catalog``: the job catalog of your job modules, as JSON: what a service that enqueues your
jobs by name checks its payloads against in its own tests (``EnqueueRecorder(catalog=...)``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from jobframework.cli.base import JobsOption, app, require_jobs
from jobframework.cli.errors import CliError


@app.command("catalog")
def catalog(
    jobs: JobsOption = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write it to this file (default: standard output)."),
    ] = None,
) -> None:
    """The job catalog of the job modules as JSON (each job's name, route and payload schema, as the
    stack writes it into the topology parameter): another service checks its by-name enqueues
    against it with EnqueueRecorder(catalog="billing-catalog.json").

    Example: jf catalog --jobs billing.jobs -o billing-catalog.json
    """
    from jobframework.catalog_file import catalog_json
    from jobframework.jobs import registry
    from jobframework.topology import Topology

    require_jobs(jobs)
    text = catalog_json(Topology.from_registry(registry).catalog)
    if output is None:
        typer.echo(text)
        return
    try:
        output.write_text(text + "\n", encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot write {output}: {exc.strerror or exc}") from exc
    count = len(registry)
    typer.echo(f"wrote the catalog of {count} job type{'' if count == 1 else 's'} to {output}", err=True)
