"""``jf demo``: the whole job lifecycle on the embedded AWS, then a summary."""

from __future__ import annotations

from typing import Annotated

import typer

from jobframework.cli.base import JsonOption, app, print_json, rich_console
from jobframework.cli.errors import EXIT_FAILED, CliError


@app.command()
def demo(
    json_output: JsonOption = False,
    port: Annotated[
        int, typer.Option(help="Port of the embedded AWS (0: a free one).", min=0, max=65535)
    ] = 0,
    timeout: Annotated[float, typer.Option(help="Give up after this many seconds.", min=5)] = 120.0,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show the jobs' and consumer's logs.")
    ] = False,
) -> None:
    """The whole job lifecycle on the embedded AWS, then a summary (no AWS account needed).

    Example: jf demo
    """
    from jobframework.local.demo import example_jobs, run_demo
    from jobframework.local.demo_summary import BANNER, render_summary

    example_jobs()  # (from a wheel there are none: said before the banner promises a demo)
    console = rich_console()
    if not json_output:
        console.print(BANNER)
    report = run_demo(
        console=None if json_output else console,
        live=not json_output,
        port=port,
        timeout=timeout,
        verbose=verbose,
    )
    if json_output:
        print_json(report.as_dict())
    else:
        console.print(render_summary(report))
    ok = report.settled and report.redriven_succeeded == report.redriven
    if not ok:
        raise CliError("the demo's workload did not settle in time", EXIT_FAILED)
