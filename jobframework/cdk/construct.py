"""``JobFramework``: the whole framework for one app and stage, as a construct for any stack.

Example (a team's ``app.py``)::

    from aws_cdk import App, Stack
    from jobframework.cdk import JobFramework

    app = App()
    stack = Stack(app, "Billing")
    jobs = JobFramework(stack, "Jobs", job_modules=["billing.jobs"], stage="prod")
    jobs.grant_enqueue(my_service_role)
    app.synth()

The consumers' code is the team's project, bundled locally (:mod:`jobframework.cdk.bundling`): the
job modules' packages from ``code_root``, the project's declared runtime dependencies for the function's
platform, and jobframework itself.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from aws_cdk import Annotations, Environment, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from constructs import Construct
from pydantic import ValidationError

from jobframework.cdk.bundling import BundleSpec, python_code
from jobframework.cdk.container_workers import DOCKERFILE, worker_image
from jobframework.cdk.defaults import POWERTOOLS_LAYER_VERSION, StageConfig
from jobframework.cdk.dependencies import (
    check_job_packages,
    find_dependency_file,
    read_dependency_file,
    runtime_requirements,
)
from jobframework.cdk.props import NAME_ADVICE, prop_error
from jobframework.cdk.resources import JobResources
from jobframework.cdk.workers import RUNTIME
from jobframework.errors import ConfigurationError
from jobframework.jobs import Job, JobRegistry
from jobframework.jobs import registry as default_registry
from jobframework.modules import import_job_modules, packages_hint
from jobframework.topology import Topology, TopologySettings
from jobframework.unlisted_modules import unlisted_job_modules

DEFAULT_STAGE = "dev"
DEFAULT_APP = "jf"


class JobFramework(JobResources):
    """Queues, DLQs, consumers, tables, schedules, the payload bucket, the delay group, the example API,
    alarms and the dashboard of the jobs declared in ``job_modules``, for one app and stage.

    Props (all keyword-only):
        job_modules: the modules that declare the ``@job`` functions, e.g. ``["billing.jobs"]`` (or
            ``"billing.jobs,billing.sagas"``). They are imported at synth (to derive the topology) and
            by the consumers (``JF_JOBS``). Default: the ``[tool.jobframework] jobs`` of the
            ``pyproject.toml`` at or above ``code_root`` (the list ``jf`` and the tests' plugin read).
        stage: default ``"dev"``; ``"prod"`` (``"production"``, ``"prod-eu"``) retains data and keeps
            logs a year (:class:`StageConfig`).
        app_name: the prefix of every resource name, default ``"jf"`` (``jf-dev-high``).
        settings: queue and consumer tuning (:class:`TopologySettings`); default from ``app_name`` and
            ``stage``. Settings that do not name ``app``/``stage`` take ``app_name``/``stage``; settings
            that name a different one are a conflict.
        registry: where the jobs are registered; default jobframework's default registry.
        topology: a topology derived already; default :meth:`Topology.from_registry`.
        code_root: the directory holding the project's top-level packages; default the current
            directory (where ``cdk`` runs ``app.py``). Use ``src`` for a src layout.
        packages: the top-level packages (or modules) of ``code_root`` to ship; default the job
            modules' top-level packages; ``()`` for none, when the job modules are installed by
            ``requirements=`` (a service's jobs as a wheel, or from an internal index).
        dependency_file: ``requirements.txt`` or ``pyproject.toml`` (its ``[project] dependencies``);
            default the first of these in ``code_root``, none when neither exists.
        requirements: the runtime requirements given directly (``()`` for none); default read from
            the dependency file. jobframework and what the runtime and the Powertools layer provide
            (boto3, Powertools, pydantic) are never installed.
        architecture: default ``x86_64`` (``ARM_64`` installs aarch64 wheels and uses the arm64 layer).
        code: bring your own Lambda code (then nothing is bundled); default the bundle.
        stage_config: default ``StageConfig.for_stage(stage)``.
        powertools_layer_version, signing_keys, retry_budget (default 0.2, ``None`` off), api (default
        ``True``), container_lanes, container_image (required with container lanes outside this
        repository's layout), vpc, outputs (CloudFormation outputs, default ``True``),
        reserve_concurrency (default ``True``: the critical consumer reserves its concurrency while a
        job uses the critical lane), alarm_topic (an existing topic the alarms go to, e.g. the team's
        paging topic from ``sns.Topic.from_topic_arn``; default one of its own), encryption_key (a
        customer-managed KMS key for the queues, tables, payload bucket and log groups, or ``True`` for
        one of its own; default AWS-managed keys): see :class:`~jobframework.cdk.resources.JobResources`.

    Attributes:
        topology, queues (by lane), dead_letter_queues (by lane), functions (consumers by name),
        tables, state_table, idempotency_table, alarm_topic, payloads, delays, signing_keys,
        encryption_key, workers, container_workers, api, schedules, monitoring, runtime_config,
        topology_parameter, code, job_modules; :meth:`grant_enqueue`, :meth:`grant_operate`.

    Raises:
        ConfigurationError: at synth, with a message naming the conflict: no job modules; a job module
            whose package is not shipped, or that cannot be imported from the asset; a package missing
            from ``code_root``; ``settings`` against ``stage``/``app_name``; ``dependency_file`` or
            ``requirements`` with ``code``; a deploy-only package (aws-cdk-lib) among the runtime
            dependencies; and the checks of the queues, workers and container lanes.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        job_modules: Sequence[str] | None = None,
        stage: str | None = None,
        app_name: str | None = None,
        settings: TopologySettings | None = None,
        registry: JobRegistry | None = None,
        topology: Topology | None = None,
        code_root: str | Path | None = None,
        packages: Sequence[str] | None = None,
        dependency_file: str | Path | None = None,
        requirements: Sequence[str] | None = None,
        architecture: lambda_.Architecture | None = None,
        code: lambda_.Code | None = None,
        stage_config: StageConfig | None = None,
        powertools_layer_version: int = POWERTOOLS_LAYER_VERSION,
        signing_keys: str | None = None,
        retry_budget: float | None = 0.2,
        api: bool = True,
        container_lanes: Sequence[str] = (),
        container_image: ecs.ContainerImage | None = None,
        vpc: ec2.IVpc | None = None,
        outputs: bool = True,
        reserve_concurrency: bool = True,
        alarm_topic: sns.ITopic | None = None,
        encryption_key: kms.IKey | bool | None = None,
    ) -> None:
        root = Path(code_root if code_root is not None else os.getcwd()).resolve()
        modules = _job_modules(job_modules, root)
        imported = topology is None  # (the job modules are imported here to derive it)
        # (``packages=()`` ships none of code_root's: the job modules come from requirements=, a wheel)
        default = [m.split(".", 1)[0] for m in modules]
        shipped = tuple(dict.fromkeys(packages if packages is not None else default))
        left_out: list[str] = []
        topology = topology or _topology(
            modules,
            root,
            stage=stage,
            app_name=app_name,
            settings=settings,
            registry=registry,
            packages=shipped,
            left_out=left_out,
            container_lanes=container_lanes,
        )
        for name, given in (("stage", stage), ("app_name", app_name)):
            actual = topology.stage if name == "stage" else topology.app
            if given is not None and given != actual:
                raise ConfigurationError(
                    f"JobFramework: {name}={given!r} conflicts with the topology's (or settings') "
                    f"{actual!r}: give one of them"
                )
        arch = architecture or lambda_.Architecture.X86_64
        if code is None:
            needs = tuple(_requirements(root, dependency_file, requirements))
            check_job_packages(modules, shipped, root, installs=bool(needs))
            code = python_code(
                BundleSpec(
                    code_root=root,
                    packages=shipped,
                    requirements=needs,
                    python_version=RUNTIME.name.removeprefix("python"),
                    architecture="arm64" if arch.name == "arm64" else "x86_64",
                    job_modules=tuple(modules),
                )
            )
        elif dependency_file is not None or requirements is not None or packages is not None:
            raise ConfigurationError(
                "JobFramework: code= is your own Lambda code, so packages=, dependency_file= and "
                "requirements= (which build the bundle) cannot be given with it"
            )
        if container_lanes and container_image is None:
            if not (root / DOCKERFILE).is_file():
                raise ConfigurationError(
                    f"container_lanes={list(container_lanes)} need a worker image: pass container_image= "
                    f"(an image whose entry point runs `jf worker` with your packages installed); the "
                    f"built-in one needs this repository's layout ({DOCKERFILE} under {root})"
                )
            container_image = worker_image(root, ("jobframework", *shipped))
        _check_names_free(scope, topology)
        self.job_modules: tuple[str, ...] = tuple(modules)
        super().__init__(
            scope,
            construct_id,
            topology=topology,
            job_modules=modules,
            code=code,
            architecture=arch,
            stage_config=stage_config,
            powertools_layer_version=powertools_layer_version,
            signing_keys=signing_keys,
            retry_budget=retry_budget,
            api=api,
            container_lanes=container_lanes,
            container_image=container_image,
            vpc=vpc,
            outputs=outputs,
            reserve_concurrency=reserve_concurrency,
            alarm_topic=alarm_topic,
            encryption_key=encryption_key,
        )
        if left_out:
            Annotations.of(self).add_warning_v2(
                "jobframework:other-jobs",
                f"left out of this construct's topology: {', '.join(left_out)}: registered in this process "
                f"(by another JobFramework's modules, or a module app.py imports) but defined outside its "
                f"packages ({', '.join(shipped)}) and its job_modules; a library's job module to run here "
                "goes in job_modules=",
            )
        for module in unlisted_job_modules(root, shipped, modules) if imported else ():
            Annotations.of(self).add_warning_v2(
                "jobframework:job-modules",
                f"module {module} applies @job but is not in job_modules= (nor imported by a module "
                "there): the deployed consumer does not know its jobs and dead-letters them unknown-type; "
                "add it to job_modules=",
            )


class JobFrameworkStack(Stack):
    """A stack holding one :class:`JobFramework` and nothing else: the common case.

    Takes the props of :class:`JobFramework` plus ``env`` and ``description``. The construct's id is
    ``Default``, so the stack's logical ids are those of resources declared on the stack itself.

    Attributes:
        jobs (the :class:`JobFramework`), topology; :meth:`grant_enqueue`, :meth:`grant_operate`.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        job_modules: Sequence[str] | None = None,
        env: Environment | None = None,
        description: str | None = None,
        **props: Any,
    ) -> None:
        super().__init__(scope, construct_id, env=env, description=description)
        self.jobs = JobFramework(self, "Default", job_modules=job_modules, **props)
        self.topology = self.jobs.topology

    def grant_enqueue(self, grantee: iam.IGrantable) -> None:
        """See :meth:`JobFramework.grant_enqueue`."""
        self.jobs.grant_enqueue(grantee)

    def grant_operate(self, grantee: iam.IGrantable) -> None:
        """See :meth:`JobFramework.grant_operate`."""
        self.jobs.grant_operate(grantee)


def _check_names_free(scope: Construct, topology: Topology) -> None:
    """Refuse a second framework of the same app and stage in one stack, or in another stack of the
    same CDK app bound for the same account and region (both environment-agnostic counts as the same:
    they deploy where the CLI points): every resource name and the topology parameter's export would be
    taken twice, which only the deploy would find out."""
    stack = Stack.of(scope)
    for other in stack.node.root.node.find_all():
        if not isinstance(other, JobResources) or (other.topology.app, other.topology.stage) != (
            topology.app,
            topology.stage,
        ):
            continue
        other_stack = Stack.of(other)
        if other_stack is stack:
            raise ConfigurationError(
                f"JobFramework: {other.node.path} in this stack has app_name={topology.app!r} and stage="
                f"{topology.stage!r} already, and so the same queue, table and export names: give each "
                "framework its own app_name"
            )
        if (other_stack.account, other_stack.region) == (stack.account, stack.region):
            raise ConfigurationError(
                f"JobFramework: {other.node.path} in stack {other_stack.stack_name} has app_name="
                f"{topology.app!r} and stage={topology.stage!r} already, in the same account and region "
                f"as {stack.stack_name}, and so the same queue, table and parameter names: give each its "
                "own app_name or stage, or give the stacks different environments (env=)"
            )


def _job_modules(given: Sequence[str] | None, root: Path) -> list[str]:
    """``job_modules=`` as a list (a string is a comma-separated one), else the project file's."""
    if given is None:
        from jobframework.project_file import project_jobs

        found = project_jobs(root)
        given = found.modules if found is not None else []
    elif isinstance(given, str):  # (a string is a sequence too: of one-letter "modules")
        given = given.split(",")
    modules = [m.strip() for m in given if m.strip()]
    if not modules:
        raise ConfigurationError(
            "JobFramework needs job_modules: the module(s) that declare your @job functions, "
            'e.g. job_modules=["mysvc.jobs"], or in your pyproject.toml: [tool.jobframework] '
            'jobs = ["mysvc.jobs"]'
        )
    return modules


def _own_jobs(
    modules: Sequence[str], packages: Sequence[str], left_out: list[str]
) -> Callable[[Job[Any]], bool]:
    """Which jobs of the default registry are this construct's: those its job modules hold by name,
    and those defined in its packages or in its job modules (another construct of the app registers
    its own jobs there too: a platform trial's second team deployed the first team's schedule,
    dead-lettered unknown-type each day). The others are named in ``left_out``."""
    # A job a job module holds by name is its own wherever it was made (a factory's in a shared
    # package, a library's job imported there). The modules are imported already.
    held = {
        id(value)
        for module in filter(None, (sys.modules.get(m) for m in modules))
        for value in vars(module).values()
        if isinstance(value, Job)
    }

    def own(job_: Job[Any]) -> bool:
        where = getattr(job_.fn, "__module__", None) or ""
        mine = (
            id(job_) in held
            or where.split(".", 1)[0] in packages
            or any(where == m or where.startswith(m + ".") for m in modules)
        )
        if not mine:
            left_out.append(f"{job_.name} ({where})")
        return mine

    return own


def _topology(
    modules: Sequence[str],
    root: Path,
    *,
    stage: str | None,
    app_name: str | None,
    settings: TopologySettings | None,
    registry: JobRegistry | None,
    packages: Sequence[str],
    left_out: list[str],
    container_lanes: Sequence[str],
) -> Topology:
    """Import the job modules (``code_root`` importable) and derive the topology of their registry (of
    the default registry, the construct's own jobs: :func:`_own_jobs`, the others named in
    ``left_out``)."""
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    import_job_modules(modules)
    reg = registry if registry is not None else default_registry
    if not list(reg):
        raise ConfigurationError(
            f"job modules {', '.join(modules)} registered no jobs: decorate your job functions with @job"
            + packages_hint(modules)
        )
    # Settings given without app or stage take the construct's (a team tuning batch_size had to
    # repeat both in them, and was told its app_name conflicted with the default's 'jf').
    tuned = settings.model_dump(include=settings.model_fields_set) if settings is not None else {}
    if not {"app", "stage"} <= tuned.keys():
        given_stage, given_app = (
            tuned.pop("stage", stage or DEFAULT_STAGE),
            tuned.pop("app", app_name or DEFAULT_APP),
        )
        try:
            settings = TopologySettings(**tuned, stage=given_stage, app=given_app)
        except ValidationError as exc:
            raise prop_error(
                "JobFramework",
                exc,
                {
                    "stage": ("stage", given_stage, f"e.g. 'dev' or 'prod': {NAME_ADVICE}"),
                    "app": ("app_name", given_app, f"e.g. 'billing': {NAME_ADVICE}"),
                },
            ) from None
    only = None if registry is not None else _own_jobs(modules, packages, left_out)
    topology = Topology.from_registry(reg, settings, only=only, container_lanes=container_lanes)
    if not topology.jobs:
        raise ConfigurationError(
            f"job modules {', '.join(modules)} registered no jobs of their own (the registry's jobs are "
            "defined in other packages): decorate your job functions with @job" + packages_hint(modules)
        )
    return topology


def _requirements(
    root: Path, dependency_file: str | Path | None, requirements: Sequence[str] | None
) -> list[str]:
    if requirements is not None and dependency_file is not None:
        raise ConfigurationError(
            "JobFramework: give dependency_file= or requirements=, not both (requirements= replaces the file)"
        )
    if requirements is not None:
        return runtime_requirements(requirements, source="requirements=")
    path = Path(dependency_file) if dependency_file is not None else find_dependency_file(root)
    if path is None:
        return []
    if not path.is_absolute():
        path = root / path
    return runtime_requirements(read_dependency_file(path), source=str(path))
