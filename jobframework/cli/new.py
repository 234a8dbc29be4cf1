"""``jf new PATH``: scaffold a service project on jobframework, as ``cdk init`` and ``sam init`` do.

The project holds a package with a jobs module (a plain job, a keyed one and a scheduled one), the CDK
app (``app.py`` and ``cdk.json`` on :class:`jobframework.cdk.JobFrameworkStack`), tests on
:mod:`jobframework.testing`, its dependencies in ``pyproject.toml`` (what the construct bundles into
the Lambda code) and a README. As created it passes its own tests and synthesizes offline.
"""

from __future__ import annotations

import json
import keyword
import re
import shlex
import string
from pathlib import Path
from typing import Annotated

import typer

from jobframework.cli.base import app
from jobframework.cli.errors import EXIT_USAGE, CliError

_PACKAGE = re.compile(r"^[a-z][a-z0-9_]*$")
_APP = re.compile(r"^[a-z][a-z0-9-]{0,20}$")

PYPROJECT = """\
[project]
name = "$project"
version = "0.1.0"
description = "$project: background jobs on jobframework"
requires-python = ">=3.11"
# What the jobs need at run time: the JobFramework construct installs these into the Lambda code
# (for the function's platform, without Docker). jobframework itself is shipped from the installed
# distribution; boto3, Powertools and pydantic come from the Lambda runtime and the Powertools layer.
dependencies = [
    "$framework",
]

[project.optional-dependencies]
# Synthesizing and deploying (cdk synth / cdk deploy) and the tests (pytest, the embedded AWS).
dev = ["$framework_dev", "pytest>=8"]

[tool.setuptools.packages.find]
# Every package of the project (a second one you add too), not the tests.
exclude = ["tests", "tests.*"]

[tool.pytest.ini_options]
testpaths = ["tests"]
"""

JOBS = '''\
"""The jobs of $project: a plain one, a keyed one, a scheduled one.

Enqueue them from a service with ``greet.enqueue(Greeting(name="Ada"))`` or, without importing this
module, ``JobClient().enqueue("$prefix.greet", {"name": "Ada"})``.
"""

from __future__ import annotations

from pydantic import BaseModel

from jobframework import JobContext, Priority, RetryPolicy, Schedule, job


class Greeting(BaseModel):
    name: str


@job("$prefix.greet", priority=Priority.DEFAULT)
def greet(greeting: Greeting, ctx: JobContext) -> str:
    """A plain job: runs once per enqueue (retried on failure, dead-lettered when attempts run out)."""
    # ctx.logger: its lines carry the job's id, type and attempt, and `jf dev` shows them.
    ctx.logger.info("greeting %s", greeting.name)
    return f"Hello, {greeting.name}!"


class Invoice(BaseModel):
    invoice_id: str
    amount_cents: int


@job(
    "$prefix.invoice_pdf",
    priority=Priority.HIGH,
    retry=RetryPolicy(max_attempts=5),
    key=lambda invoice: f"invoice:{invoice.invoice_id}:pdf",
    track=True,
)
def render_invoice(invoice: Invoice, ctx: JobContext) -> str:
    """A keyed, tracked job: the consumer runs each key once (its idempotency record), and ``jf status
    ID`` shows where it is. (A second enqueue of the key still sends a message, skipped as a duplicate
    when it runs; ``dedup_window=`` on the job makes the enqueue itself send nothing.)"""
    return f"invoices/{invoice.invoice_id}.pdf"


class Cleanup(BaseModel):
    older_than_days: int = 30


@job(
    "$prefix.cleanup",
    priority=Priority.LOW,
    schedule=Schedule("rate(1 day)", payload={"older_than_days": 30}),
)
def cleanup(request: Cleanup, ctx: JobContext) -> int:
    """A scheduled job: EventBridge Scheduler enqueues it once a day with the schedule's payload."""
    ctx.logger.info("removing what is older than %d days", request.older_than_days)
    return request.older_than_days
'''

APP = '''\
"""The CDK app of $project: ``cdk synth`` / ``cdk deploy`` run it (``-c stage=prod`` for production)."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import App

from jobframework.cdk import JobFrameworkStack

app = App()
stage = str(app.node.try_get_context("stage") or "dev")
JobFrameworkStack(
    app,
    f"$stack-{stage}",
    job_modules=["$package.jobs"],
    app_name="$app_name",
    stage=stage,
    code_root=Path(__file__).resolve().parent,  # $package/ and pyproject.toml's dependencies are bundled
    description=f"$project ({stage}): jobframework queues, consumers and schedules",
)
app.synth()
'''

CDK_JSON = """\
{
  "app": "python3 app.py",
  "watch": {"include": ["app.py", "$package/**"]},
  "context": $context
}
"""
"""``$context``: aws-cdk-lib's recommended feature flags (:mod:`jobframework.cli.feature_flags`)."""

CONFTEST = '''\
"""jobframework's fixtures: ``jf_aws`` (the embedded AWS) and ``jf_config`` (a provisioned topology)."""

# The jobs are registered for every test, run alone or not (a job no test imported is dead-lettered).
import $package.jobs  # noqa: F401

pytest_plugins = ["jobframework.testing"]
'''

TESTS = '''\
"""The jobs of $project, inline and through one poll of the embedded AWS."""

from __future__ import annotations

from jobframework import JobClient, consumer
from jobframework.testing import consume_once, run_inline
from $package.jobs import Invoice, cleanup, greet, render_invoice


def test_greet_runs_inline():
    assert run_inline(greet, {"name": "Ada"}) == "Hello, Ada!"


def test_an_invoice_is_keyed_by_its_id():
    assert render_invoice.key_for(Invoice(invoice_id="42", amount_cents=100)) == "invoice:42:pdf"
    assert run_inline(render_invoice, {"invoice_id": "42", "amount_cents": 100}) == "invoices/42.pdf"


def test_cleanup_runs_daily_with_its_schedule_payload():
    assert cleanup.schedule is not None and cleanup.schedule.expression == "rate(1 day)"
    assert run_inline(cleanup, cleanup.schedule.payload) == 30


def test_an_enqueued_greeting_runs_on_the_embedded_aws(jf_aws, jf_config):
    sqs = jf_aws.client("sqs")
    JobClient(jf_config, sqs_client=sqs).enqueue(greet, {"name": "Ada"})
    records, response = consume_once(
        consumer(config=jf_config, sqs_client=sqs), sqs, jf_config.endpoints("default").url
    )
    assert len(records) == 1 and response == {"batchItemFailures": []}
'''

README = """\
# $project

Background jobs on jobframework (installed from its clone or wheel): SQS queues by priority,
Lambda consumers, retries with backoff, dead letters, schedules. The jobs are in `$package/jobs.py`.

## Set up

    python3 -m venv .venv && .venv/bin/pip install -e ".[dev]"

## Run it locally (embedded AWS, no account)

    .venv/bin/jf dev --jobs $package.jobs --app $app_name --port 4566
    # in another terminal: paste the export lines jf dev printed, then
    .venv/bin/jf enqueue $prefix.greet '{"name": "Ada"}'

## Test it

    .venv/bin/python -m pytest

## Deploy it

    npm install -g aws-cdk        # the CDK CLI, once
    source .venv/bin/activate     # cdk.json runs `python3 app.py`: the venv's Python, with aws-cdk-lib
    cdk bootstrap                 # once per account and region
    cdk deploy -c stage=dev       # or -c stage=prod

The CDK needs Node.js: 22 or 24, which jsii supports. Node 20 still works, but it is past its end of
life and jsii prints a banner saying so at every synth; `export
JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20` hides it.

`app.py` puts the `JobFramework` construct in a stack. It bundles `$package/` and the runtime
`dependencies` of `pyproject.toml` into the Lambda code with `pip install --platform ...` (no Docker):
add a third-party package your jobs import there. A second package of your own that the jobs import
(`shared/`) goes into the construct's `packages=["$package", "shared"]` (the synth imports the job
modules from the bundle and names what is missing); `pyproject.toml` packages every one already, once
you install the project again (`pip install -e ".[dev]"`: an editable install maps the packages it
found when it ran; `jf dev` and pytest import from the project's directory anyway).
"""

IGNORED = (".venv/", "venv/", "cdk.out/", "node_modules/", "__pycache__/", "*.egg-info/")
"""What the project's ``.gitignore`` lists (added to one that is there already)."""

FILES: dict[str, str] = {
    "pyproject.toml": PYPROJECT,
    "$package/__init__.py": '"""$project: background jobs on jobframework."""\n',
    "$package/jobs.py": JOBS,
    "app.py": APP,
    "cdk.json": CDK_JSON,
    "tests/__init__.py": "",
    "tests/conftest.py": CONFTEST,
    "tests/test_jobs.py": TESTS,
    "README.md": README,
    ".gitignore": "\n".join(IGNORED) + "\n",
}
"""The files of a new project, by path; both are ``string.Template`` texts."""


def framework_requirement(extras: str = "") -> str:
    """How the new project depends on jobframework: where this one came from when it was installed
    from a path, a wheel or a repository (PEP 610's ``direct_url.json``), else its version or later.

    Example:
        >>> framework_requirement("[cdk,local]").startswith("jobframework[cdk,local]")
        True
    """
    from importlib import metadata

    try:
        dist = metadata.distribution("jobframework")
    except metadata.PackageNotFoundError:  # run from a source tree that is not installed
        return f"jobframework{extras}"
    try:
        direct = json.loads(dist.read_text("direct_url.json") or "null")
    except ValueError:
        direct = None
    if isinstance(direct, dict) and isinstance(direct.get("url"), str):
        url = direct["url"]
        vcs = direct.get("vcs_info")
        if isinstance(vcs, dict) and vcs.get("vcs") and vcs.get("commit_id"):
            url = f"{vcs['vcs']}+{url}@{vcs['commit_id']}"
        return f"jobframework{extras} @ {url}"
    return f"jobframework{extras}>={dist.version}"


def project_names(path: Path, package: str | None = None) -> dict[str, str]:
    """The names a new project at ``path`` uses: ``project`` (its directory), ``package`` (its Python
    package), ``prefix`` (of its job names), ``app_name`` (of its AWS resources), ``stack``, and the
    ``framework`` requirement (:func:`framework_requirement`).

    Example:
        >>> project_names(Path("/src/billing-service"))["package"]
        'billing_service'

    Raises:
        CliError: the directory's name gives no valid package (or ``package`` is not one), saying what
            to pass.
    """
    project = path.name
    name = package or re.sub(r"[^a-z0-9_]", "_", project.lower()).strip("_")
    if not _PACKAGE.match(name) or keyword.iskeyword(name):
        raise CliError(
            f"{name!r} is not a valid Python package name: pass --package NAME (lowercase letters, digits "
            "and underscores, starting with a letter)",
            EXIT_USAGE,
        )
    app_name = name.replace("_", "-")[:21].rstrip("-")
    if not _APP.match(app_name):
        raise CliError(f"cannot derive an AWS name from {name!r}: pass another --package", EXIT_USAGE)
    stack = "".join(part.capitalize() for part in name.split("_"))
    return {
        "project": project,
        "package": name,
        "prefix": name,
        "app_name": app_name,
        "stack": stack,
        "framework": framework_requirement(),
        "framework_dev": framework_requirement("[cdk,local]"),
    }


ALLOWED_BEFORE = frozenset(
    {".venv", "venv", ".git", ".gitignore", ".python-version", ".idea", ".vscode", ".DS_Store"}
    | {"README.md", "LICENSE", "LICENSE.md", "LICENSE.txt"}
)
"""What a directory may hold already for ``jf new`` to write into it: a virtualenv made to install
jobframework (``jf new .`` from it), a fresh repository (with the README and licence a host may create),
editor settings. A README there is kept; a ``.gitignore`` gets the lines of :data:`IGNORED` it lacks."""


def scaffold(path: Path, package: str | None = None) -> list[Path]:
    """Write a new project into ``path`` (created; it may exist only if empty, or hold only
    :data:`ALLOWED_BEFORE`); returns the files written or added to.

    Raises:
        CliError: ``path`` is a file or a non-empty directory (nothing is written), or the names are
            not valid (see :func:`project_names`).
    """
    path = path.expanduser().resolve()
    present = {p.name for p in path.iterdir()} if path.is_dir() else set()
    if path.exists() and (not path.is_dir() or present - ALLOWED_BEFORE):
        raise CliError(
            f"{path} already exists and holds files of its own: choose a new path, or an empty directory "
            f"(one holding only {', '.join(sorted(ALLOWED_BEFORE))} will do; nothing was written)",
            EXIT_USAGE,
        )
    from jobframework.cli.feature_flags import context_json, recommended_feature_flags

    names = {**project_names(path, package), "context": context_json(recommended_feature_flags()[0])}
    written = []
    for relative, text in FILES.items():
        target = path / string.Template(relative).substitute(names)
        if target.name == ".gitignore" and target.exists():
            if _add_ignored(target):
                written.append(target)
            continue
        if target.exists():  # only what ALLOWED_BEFORE lets through: the team's README
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(string.Template(text).substitute(names), encoding="utf-8")
        written.append(target)
    return written


def _add_ignored(gitignore: Path) -> bool:
    """Append the lines of :data:`IGNORED` that ``gitignore`` lacks; whether it did."""
    text = gitignore.read_text(encoding="utf-8")
    have = {line.strip() for line in text.splitlines()}
    missing = [line for line in IGNORED if line not in have and line.rstrip("/") not in have]
    if missing:
        gitignore.write_text(
            text + ("" if text.endswith("\n") or not text else "\n") + "\n".join(missing) + "\n"
        )
    return bool(missing)


def _next_steps(path: Path, package: str, app_name: str) -> list[str]:
    """What to run after ``jf new``: into the directory unless it is this one, into its venv if it has one."""
    resolved = path.expanduser().resolve()
    steps = [] if resolved == Path.cwd().resolve() else [f"cd {shlex.quote(str(path))}"]
    venv = next((name for name in (".venv", "venv") if (resolved / name / "bin" / "python").exists()), None)
    if venv is None:
        venv = ".venv"
        steps.append('python3 -m venv .venv && .venv/bin/pip install -e ".[dev]"')
    else:
        steps.append(f'{venv}/bin/pip install -e ".[dev]"   # into the venv that is there')
    steps.append(f"{venv}/bin/python -m pytest; {venv}/bin/jf dev --jobs {package}.jobs --app {app_name}")
    steps.append(f"source {venv}/bin/activate && cdk deploy")
    return steps


@app.command()
def new(
    path: Annotated[
        Path,
        typer.Argument(
            help="Directory of the new project (created; an existing one must be empty or hold only a "
            "virtualenv, .git, a README, a licence or editor settings: `jf new .` from the venv you "
            "installed jf into)."
        ),
    ],
    package: Annotated[
        str | None, typer.Option(help="Its Python package (default: the directory's name, as an identifier).")
    ] = None,
) -> None:
    """Create a service project: jobs, a CDK app on the JobFramework construct, tests, a README."""
    written = scaffold(path, package)
    names = project_names(path.expanduser().resolve(), package)
    typer.echo(f"created {path} ({len(written)} files): the jobs are in {names['package']}/jobs.py")
    for n, step in enumerate(_next_steps(path, names["package"], names["app_name"])):
        typer.echo(f"{'next:' if n == 0 else '':6} {step}")
    if "file://" in names["framework"]:
        typer.echo(
            f"note:  pyproject.toml depends on {names['framework']} (where this jf came from): a "
            "teammate or CI needs a git URL or a wheel there instead",
            err=True,
        )
