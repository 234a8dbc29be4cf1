"""The ``JobFramework`` construct in a team's own stack: what it exposes, ``grant_enqueue``, the Lambda
code it bundles from the team's project, and the synth-time checks that name the conflict."""

from __future__ import annotations

import importlib
import itertools
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Match, Template

from jobframework.cdk import JobFramework, JobFrameworkStack
from jobframework.cdk.bundling import BundleSpec
from jobframework.errors import ConfigurationError
from jobframework.jobs import JobRegistry

_counter = itertools.count()

JOBS = """
from pydantic import BaseModel
from jobframework import JobRegistry, Priority, job
{extra_import}
REGISTRY = JobRegistry()

class Order(BaseModel):
    order_id: str

@job("orders.ship", priority=Priority.HIGH, registry=REGISTRY)
def ship(order: Order) -> None: ...

@job("orders.audit", priority=Priority.LOW, registry=REGISTRY)
def audit(order: Order) -> None: ...
"""


def _project(root: Path, extra_import: str = "") -> tuple[str, JobRegistry]:
    """A team's package (a fresh name each time) under ``root``; returns it and its jobs' registry."""
    package = f"shop{next(_counter)}"
    (root / package).mkdir(parents=True)
    (root / package / "__init__.py").write_text("")
    (root / package / "jobs.py").write_text(JOBS.format(extra_import=extra_import))
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    module = importlib.import_module(f"{package}.jobs")
    registry: JobRegistry = module.REGISTRY
    return package, registry


@pytest.fixture(autouse=True)
def _bundle_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("JF_BUNDLE_CACHE", str(tmp_path / "bundles"))


def _framework(stack: Stack, root: Path, package: str, registry: JobRegistry, **props: Any) -> JobFramework:
    """The team's construct (``job_modules=`` its package's ``jobs`` unless ``props`` give them)."""
    props.setdefault("job_modules", [f"{package}.jobs"])
    return JobFramework(
        stack,
        "Jobs",
        registry=registry,
        code_root=root,
        app_name="shop",
        api=False,
        **props,
    )


def test_a_stage_that_is_neither_dev_nor_prod_is_warned_to_get_devs_settings(tmp_path):
    """`stage="production"` destroyed its data with the stack (a warning said so): a stage named as
    production retains its data; another (`staging`) is warned that it does not."""
    from aws_cdk.assertions import Annotations, Match

    package, registry = _project(tmp_path / "src")
    stack = Stack(App(), "S")
    _framework(stack, tmp_path / "src", package, registry, requirements=(), stage="staging")
    Annotations.from_stack(stack).has_warning(
        "*", Match.string_like_regexp("stage 'staging' gets dev's settings.*only 'prod', 'production' and")
    )
    for stage in ("prod", "production", "prod-eu"):
        prod = Stack(App(), "P")
        _framework(prod, tmp_path / "src", package, registry, requirements=(), stage=stage)
        assert not Annotations.from_stack(prod).find_warning("*", Match.string_like_regexp("gets dev's"))
        tables = Template.from_stack(prod).find_resources("AWS::DynamoDB::Table")
        assert tables and all(t["DeletionPolicy"] == "Retain" for t in tables.values()), stage


def test_a_module_that_declares_jobs_but_is_not_in_job_modules_is_warned_at_synth(tmp_path):
    """A team added reports.py beside jobs.py and deployed: the consumer loaded only job_modules= and
    dead-lettered every report job unknown-type. A module imported by a listed one is loaded too."""
    from aws_cdk.assertions import Annotations

    package, registry = _project(tmp_path / "src")
    job = (
        "from pydantic import BaseModel\nfrom jobframework import JobRegistry, job\n\n"
        '@job("{name}", registry=JobRegistry())\ndef run(p: BaseModel) -> None: ...\n'
    )
    (tmp_path / "src" / package / "reports.py").write_text(job.format(name=f"{package}.report"))
    (tmp_path / "src" / package / "audits.py").write_text(job.format(name=f"{package}.audit"))
    importlib.import_module(f"{package}.audits")  # as a listed module importing it would
    stack = Stack(App(), "S")
    _framework(stack, tmp_path / "src", package, registry, requirements=())
    warned = Annotations.from_stack(stack).find_warning("*", Match.string_like_regexp("job_modules="))
    texts = [str(w.entry.data) for w in warned]
    assert len(texts) == 1 and f"module {package}.reports applies @job but is not in job_modules=" in texts[0]
    assert "dead-letters them unknown-type; add it to job_modules=" in texts[0]


def test_job_modules_given_as_one_string_are_module_names_not_letters(tmp_path):
    """A string is a sequence too: ``job_modules="shop.jobs"`` was read as the modules 's', 'h', ..."""
    package, registry = _project(tmp_path / "src")
    jobs = _framework(
        Stack(App(), "S"), tmp_path / "src", package, registry, job_modules=f"{package}.jobs", requirements=()
    )
    assert jobs.job_modules == (f"{package}.jobs",)


def test_without_job_modules_the_construct_takes_the_project_files_list(tmp_path):
    """The list jf and the tests' plugin read (pyproject.toml's [tool.jobframework] jobs), from the
    nearest project file at or above code_root (a src layout's is its parent's)."""
    package, registry = _project(tmp_path / "src")
    (tmp_path / "pyproject.toml").write_text(f'[tool.jobframework]\njobs = ["{package}.jobs"]\n')
    jobs = _framework(
        Stack(App(), "S"), tmp_path / "src", package, registry, job_modules=None, requirements=()
    )
    assert jobs.job_modules == (f"{package}.jobs",)
    assert {j.name for j in jobs.topology.jobs} == {"orders.ship", "orders.audit"}


def test_the_construct_goes_into_a_stack_of_the_team_and_exposes_what_it_built(tmp_path):
    package, registry = _project(tmp_path / "src")
    stack = Stack(App(), "ShopService")
    jobs = _framework(stack, tmp_path / "src", package, registry, requirements=())
    assert jobs.job_modules == (f"{package}.jobs",)
    assert set(jobs.queues) == set(jobs.dead_letter_queues) == {"critical", "high", "default", "low"}
    assert set(jobs.functions) == {"critical", "shared"}
    assert jobs.topology.app == "shop" and jobs.topology.stage == "dev"
    assert jobs.state_table is jobs.tables.state_table and jobs.alarm_topic is jobs.monitoring.topic
    template = Template.from_stack(stack)
    template.has_resource_properties("AWS::SQS::Queue", {"QueueName": "shop-dev-high"})
    template.has_resource_properties(
        "AWS::Lambda::Function",
        {
            "FunctionName": "shop-dev-consumer-shared",
            "Environment": {"Variables": Match.object_like({"JF_JOBS": f"{package}.jobs"})},
        },
    )
    assert all(lid.startswith("Jobs") for lid in template.find_resources("AWS::SQS::Queue"))


def test_the_bundle_holds_the_team_package_and_jobframework_without_what_lambda_never_runs(tmp_path):
    package, registry = _project(tmp_path / "src")
    (tmp_path / "src" / "scripts").mkdir()  # not a job module's package: not shipped
    (tmp_path / "src" / "scripts" / "__init__.py").write_text("")
    app = App(outdir=str(tmp_path / "cdk.out"))
    jobs = _framework(Stack(app, "ShopService"), tmp_path / "src", package, registry, requirements=())
    app.synth()
    [asset] = [p for p in (tmp_path / "cdk.out").glob("asset.*") if (p / "jobframework").is_dir()]
    assert sorted(p.name for p in asset.iterdir()) == sorted([package, "jobframework"])
    assert (asset / "jobframework" / "entrypoints" / "worker.py").is_file()
    for left_out in ("cdk", "cli", "local", "ui", "testing.py"):  # nothing Lambda runs
        assert not (asset / "jobframework" / left_out).exists(), left_out
    assert jobs.code is jobs.workers.code


def test_grant_enqueue_lets_a_producer_send_to_every_queue_and_read_the_topology(tmp_path):
    package, registry = _project(tmp_path / "src")
    stack = Stack(App(), "ShopService")
    jobs = _framework(stack, tmp_path / "src", package, registry, requirements=())
    producer = iam.Role(stack, "Checkout", assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com"))
    jobs.grant_enqueue(producer)
    [policy] = [
        p
        for p in Template.from_stack(stack).find_resources("AWS::IAM::Policy").values()
        if p["Properties"]["Roles"] == [{"Ref": stack.get_logical_id(producer.node.default_child)}]
    ]
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    sent_to = {
        r["Fn::GetAtt"][0]
        for s in statements
        if "sqs:SendMessage" in s["Action"]
        for r in (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]])
    }
    queue_ids = {stack.get_logical_id(q.queue.node.default_child) for q in jobs.queues.values()}
    assert sent_to == queue_ids
    assert any("ssm:GetParameter" in s["Action"] for s in statements)


def test_the_thin_stack_keeps_the_logical_ids_of_resources_declared_on_the_stack(tmp_path):
    package, registry = _project(tmp_path / "src")
    stack = JobFrameworkStack(
        App(),
        "Shop",
        job_modules=[f"{package}.jobs"],
        registry=registry,
        code_root=tmp_path / "src",
        requirements=(),
        api=False,
    )
    queues = Template.from_stack(stack).find_resources("AWS::SQS::Queue")
    # The ids of the stack before the construct existed (the hash is of the path within the stack).
    assert {"HighQueue59379633", "HighQueueDeadLetterQueue75FB90EB"} <= set(queues)
    assert stack.topology is stack.jobs.topology


def test_a_job_module_whose_package_is_not_shipped_fails_the_synth_naming_it(tmp_path):
    package, registry = _project(tmp_path / "src")
    (tmp_path / "src" / "other").mkdir()
    (tmp_path / "src" / "other" / "__init__.py").write_text("")
    with pytest.raises(ConfigurationError, match=rf"job module {package}\.jobs is not in the Lambda asset"):
        _framework(
            Stack(App(), "S"), tmp_path / "src", package, registry, packages=["other"], requirements=()
        )


def test_no_packages_ships_none_and_the_job_modules_can_come_from_a_wheel(tmp_path):
    """A platform trial's two services: each one's jobs a wheel of its own, none under the app's code
    root. ``packages=()`` had meant the default (the job modules' packages, not found there)."""
    package, registry = _project(tmp_path / "src")
    with pytest.raises(
        ConfigurationError, match=r"not among packages=\[\]; it is under code_root .*: add it to packages="
    ):
        _framework(Stack(App(), "S"), tmp_path / "src", package, registry, packages=(), requirements=())

    wheel = _wheel_of(tmp_path / "src" / package, tmp_path / "dist")
    app_root = tmp_path / "app"
    app_root.mkdir()

    def from_the_wheel(stack: str) -> JobFramework:
        requirement = f"{package} @ {wheel.as_uri()}"
        return _framework(
            Stack(App(), stack), app_root, package, registry, packages=(), requirements=[requirement]
        )

    jobs = from_the_wheel("S")
    assets = [p for p in (tmp_path / "bundles").iterdir() if (p / "jobframework").is_dir()]
    assert [(a / package / "jobs.py").is_file() for a in assets] == [True]  # installed from the wheel
    assert jobs.topology.jobs

    # The wheel rebuilt at the same version with a change: a new asset (a trial's deploy kept the old
    # code: the asset hash had been of the requirement's text).
    source = tmp_path / "src" / package / "jobs.py"
    source.write_text(source.read_text() + "\n# a new job would be here\n")
    wheel.unlink()
    shutil.rmtree(tmp_path / "dist")
    _wheel_of(tmp_path / "src" / package, tmp_path / "dist")
    from_the_wheel("S2")
    assets = [p for p in (tmp_path / "bundles").iterdir() if (p / "jobframework").is_dir()]
    assert sorted("a new job" in (a / package / "jobs.py").read_text() for a in assets) == [False, True]


def _wheel_of(package_dir: Path, dist: Path) -> Path:
    """A pure-Python wheel of ``package_dir`` (as ``uv build`` makes one), written by hand: no build
    backend is needed offline."""
    import base64
    import hashlib
    import zipfile

    name = package_dir.name
    dist.mkdir(parents=True)
    wheel = dist / f"{name}-1.0-py3-none-any.whl"
    info = f"{name}-1.0.dist-info"
    files = {f"{name}/{p.name}": p.read_bytes() for p in package_dir.glob("*.py")}
    files[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode()
    files[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )

    def digest(data: bytes) -> str:
        return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()

    record = "".join(f"{path},sha256={digest(data)},{len(data)}\n" for path, data in files.items())
    files[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
    return wheel


def test_a_job_module_that_cannot_be_imported_from_the_asset_fails_the_synth_naming_it(tmp_path):
    """Importable here (the helper package is in the code root) but not from the bundle (not shipped)."""
    root = tmp_path / "src"
    root.mkdir()
    helpers = f"helpers{next(_counter)}"
    (root / f"{helpers}.py").write_text("VALUE = 1\n")
    package, registry = _project(root, extra_import=f"import {helpers}")
    with pytest.raises(
        ConfigurationError,
        match=rf"job module {package}\.jobs cannot be imported from the Lambda asset .*{helpers}'? "
        rf"\(at {package}/jobs\.py:4\)",  # (the line of the team's code that imports it)
    ):
        _framework(Stack(App(), "S"), root, package, registry, requirements=())


def test_a_package_missing_from_the_code_root_says_where_it_looked(tmp_path):
    package, registry = _project(tmp_path / "src")
    with pytest.raises(
        ConfigurationError, match=rf"package {package} is not under the code root .*code_root="
    ):
        _framework(Stack(App(), "S"), tmp_path, package, registry, requirements=())


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"stage": "prod", "settings": "dev"}, r"stage='prod' conflicts with the topology's .*'dev'"),
        ({"code": "inline", "requirements": ["x"]}, r"code= is your own Lambda code, so packages="),
        ({"requirements": ["aws-cdk-lib>=2"]}, r"requirements= lists aws-cdk-lib, which only synthesizes"),
        ({"requirements": ["not a requirement!"]}, r"'not a requirement!' is not a valid requirement"),
        (
            {"container_lanes": ["low"]},
            r"container_lanes=\['low'\] need a worker image: pass container_image=",
        ),
    ],
)
def test_conflicting_props_fail_the_synth_naming_the_conflict(tmp_path, props, message):
    from aws_cdk import aws_lambda as lambda_

    from jobframework.topology import TopologySettings

    package, registry = _project(tmp_path / "src")
    if props.get("settings") == "dev":
        props["settings"] = TopologySettings(app="shop", stage="dev")
    if props.get("code") == "inline":
        props["code"] = lambda_.Code.from_inline("def handler(e, c): ...")
    with pytest.raises(ConfigurationError, match=message):
        JobFramework(
            Stack(App(), "S"),
            "Jobs",
            job_modules=[f"{package}.jobs"],
            registry=registry,
            code_root=tmp_path / "src",
            api=False,
            **props,
        )


def test_settings_given_without_app_or_stage_take_the_constructs(tmp_path):
    """A platform trial tuned batch_size in settings= and was told app_name='acme' conflicted with the
    settings' default 'jf' (and TopologySettings(app_name=...) was ignored without a word)."""
    from pydantic import ValidationError

    from jobframework.topology import TopologySettings

    package, registry = _project(tmp_path / "src")
    made = _framework(
        Stack(App(), "S"),
        tmp_path / "src",
        package,
        registry,
        stage="prod",
        settings=TopologySettings(batch_size=50, batching_window=5),
    )
    assert (made.topology.app, made.topology.stage) == ("shop", "prod")
    assert {q.batch_size for q in made.topology.queues if not q.fifo} == {50}
    with pytest.raises(ValidationError, match="app_name"):
        TopologySettings(app_name="acme")  # type: ignore[call-arg]


def test_no_job_modules_says_what_to_name(tmp_path):
    with pytest.raises(ConfigurationError, match=r"JobFramework needs job_modules.*mysvc\.jobs"):
        JobFramework(Stack(App(), "S"), "Jobs", job_modules=[" "])
    with pytest.raises(ConfigurationError, match=r"or in your pyproject\.toml: \[tool\.jobframework\] jobs"):
        JobFramework(Stack(App(), "S"), "Jobs", code_root=tmp_path)  # (no project file names them)


def test_the_bundle_key_follows_the_code_and_the_requirements_not_the_path(tmp_path):
    for root in (tmp_path / "a", tmp_path / "b"):
        (root / "svc").mkdir(parents=True)
        (root / "svc" / "__init__.py").write_text("X = 1\n")
    spec = BundleSpec(code_root=tmp_path / "a", packages=("svc",), requirements=(), python_version="3.14")
    same_elsewhere = BundleSpec(
        code_root=tmp_path / "b", packages=("svc",), requirements=(), python_version="3.14"
    )
    assert spec.key() == same_elsewhere.key()
    arm = BundleSpec(
        code_root=tmp_path / "a",
        packages=("svc",),
        requirements=(),
        python_version="3.14",
        architecture="arm64",
    )
    with_dependency = BundleSpec(
        code_root=tmp_path / "a", packages=("svc",), requirements=("idna",), python_version="3.14"
    )
    before = spec.key()
    (tmp_path / "a" / "svc" / "__init__.py").write_text("X = 2\n")
    assert len({before, spec.key(), arm.key(), with_dependency.key()}) == 4


def test_two_constructs_on_the_default_registry_each_take_their_own_packages_jobs(tmp_path, monkeypatch):
    """A platform trial's two teams in one CDK app: team B's topology held team A's jobs (one default
    registry), so B deployed A's daily schedule, dead-lettered unknown-type by B's consumers."""
    import jobframework.cdk.construct as construct_module
    import jobframework.jobs

    fresh = JobRegistry()
    monkeypatch.setattr(jobframework.jobs, "registry", fresh)
    monkeypatch.setattr(construct_module, "default_registry", fresh)
    root = tmp_path / "src"
    for team, schedule in (("teama", ', schedule="rate(1 day)"'), ("teamb", "")):
        (root / team).mkdir(parents=True)
        (root / team / "__init__.py").write_text("")
        (root / team / "jobs.py").write_text(
            "from pydantic import BaseModel\nfrom jobframework import job\n"
            "class P(BaseModel):\n    n: int = 0\n"
            f"@job('{team}.run'{schedule})\ndef run(p: P) -> None: ...\n"
        )
    # A job made by a shared package's factory, held by team B's module: B's own (a review's case).
    (root / "common").mkdir()
    (root / "common" / "__init__.py").write_text(
        "from pydantic import BaseModel\nfrom jobframework import job\n"
        "class Q(BaseModel):\n    n: int = 0\n"
        "def make(name):\n    def run(q: Q) -> None: ...\n    return job(name)(run)\n"
    )
    with (root / "teamb" / "jobs.py").open("a") as jobs:
        jobs.write("from common import make\nsync = make('teamb.sync')\n")
    app = App()

    def team(name: str) -> JobFramework:
        return JobFramework(
            Stack(app, name.title()),
            "Jobs",
            job_modules=[f"{name}.jobs"],
            code_root=root,
            app_name=name,
            api=False,
            code=lambda_.Code.from_inline("def handler(e, c): ..."),  # (common is not shipped)
        )

    a, b = team("teama"), team("teamb")
    assert [j.name for j in a.topology.jobs] == ["teama.run"]
    assert [j.name for j in b.topology.jobs] == ["teamb.run", "teamb.sync"] and not b.topology.schedules
    from aws_cdk.assertions import Annotations

    warned = Annotations.from_stack(Stack.of(b)).find_warning("*", Match.string_like_regexp("left out"))
    texts = [str(w.entry.data) for w in warned]
    assert len(texts) == 1 and "left out of this construct's topology: teama.run (teama.jobs)" in texts[0]
    assert not Annotations.from_stack(Stack.of(a)).find_warning("*", Match.string_like_regexp("left out"))
