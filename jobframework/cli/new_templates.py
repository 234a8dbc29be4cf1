"""The files ``jf new`` writes: ``string.Template`` texts with ``$package``, ``$project``, ``$prefix``,
``$app_name``, ``$stack``, ``$framework``, ``$framework_dev`` and ``$context`` (see
:func:`jobframework.cli.new.project_names`)."""

from __future__ import annotations

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

[tool.jobframework]
# The modules that define your @job functions, named once: jf (dev, worker, ui, ...), the tests'
# plugin and the JobFramework construct in app.py read this list. A job module you add goes here.
jobs = ["$package.jobs"]

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
    schedule=Schedule("cron(0 3 * * ? *)", payload={"older_than_days": 30}),
)
def cleanup(request: Cleanup, ctx: JobContext) -> int:
    """A scheduled job: EventBridge Scheduler enqueues it every day at 03:00 UTC with the schedule's
    payload (a cron, whose slots a signing consumer can check; a rate over 12 hours it cannot)."""
    ctx.logger.info("removing what is older than %d days", request.older_than_days)
    return request.older_than_days
'''

APP = '''\
"""The CDK app of $project: ``cdk synth`` / ``cdk deploy`` run it (``-c stage=prod`` for production)."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import App, Validations
from cdk_nag import AwsSolutionsChecks

from jobframework.cdk import JobFrameworkStack

app = App()
# cdk-nag's AWS Solutions rules over the whole app: a finding not acknowledged fails the synth (the
# construct's own carry their acknowledgments, each with its reason)
Validations.of(app).add_plugins(AwsSolutionsChecks(app))
stage = str(app.node.try_get_context("stage") or "dev")
JobFrameworkStack(
    app,
    f"$stack-{stage}",
    app_name="$app_name",
    stage=stage,
    # $package/ and pyproject.toml's dependencies are bundled; its [tool.jobframework] jobs are imported
    code_root=Path(__file__).resolve().parent,
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
"""jobframework's fixtures: ``jf_aws`` (the embedded AWS) and ``jf_config`` (a provisioned topology).

The plugin imports the job modules of pyproject.toml's ``[tool.jobframework] jobs`` before the tests
run: every test sees the jobs registered, run alone or not."""

pytest_plugins = ["jobframework.testing"]
'''

TESTS = '''\
"""The jobs of $project, inline and through one poll of the embedded AWS."""

from __future__ import annotations

from jobframework import JobClient, consumer
from jobframework.testing import EmbeddedAWS, RuntimeConfig, consume_once, run_inline
from $package.jobs import Invoice, cleanup, greet, render_invoice


def test_greet_runs_inline() -> None:
    assert run_inline(greet, {"name": "Ada"}) == "Hello, Ada!"


def test_an_invoice_is_keyed_by_its_id() -> None:
    assert render_invoice.key_for(Invoice(invoice_id="42", amount_cents=100)) == "invoice:42:pdf"
    assert run_inline(render_invoice, {"invoice_id": "42", "amount_cents": 100}) == "invoices/42.pdf"


def test_cleanup_runs_daily_with_its_schedule_payload() -> None:
    assert cleanup.schedule is not None and cleanup.schedule.expression == "cron(0 3 * * ? *)"
    assert run_inline(cleanup, cleanup.schedule.payload) == 30


def test_an_enqueued_greeting_runs_on_the_embedded_aws(jf_aws: EmbeddedAWS, jf_config: RuntimeConfig) -> None:
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
A job module of your own beside it goes in one place: `[tool.jobframework] jobs` in
`pyproject.toml`, which `jf`, the tests and `app.py` read (a job the deployed consumers do not import
is dead-lettered `unknown-type`).

## Set up

    python3 -m venv .venv && .venv/bin/pip install -e ".[dev]"

## Run it locally (embedded AWS, no account)

    .venv/bin/jf dev --app $app_name --port 4566
    # in another terminal: paste the export lines jf dev printed, then
    .venv/bin/jf enqueue $prefix.greet '{"name": "Ada"}'

## Test it

    .venv/bin/python -m pytest

## Deploy it

    npm install -g aws-cdk        # the CDK CLI, once
    source .venv/bin/activate     # cdk.json runs `python3 app.py`: the venv's Python, with aws-cdk-lib
    cdk synth -c stage=dev        # the template, checked by cdk-nag: no account needed
    cdk bootstrap                 # once per account and region
    cdk deploy -c stage=dev       # or -c stage=prod

Without the CDK CLI, `CDK_OUTDIR=cdk.out .venv/bin/python app.py` synthesizes the same template into
`cdk.out/` (no account, no Docker: the Lambda code is bundled with pip).

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
