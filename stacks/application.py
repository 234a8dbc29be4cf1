"""This repository's CDK app, built from context on the library's :class:`JobFrameworkStack` like any
team's: the example jobs of ``handlers/`` (shipped from the repository root), no extra dependencies.

Context (``-c key=value`` or ``cdk.json``):
    stage: ``dev`` (default) or ``prod`` (or any other name, treated like ``dev``).
    jobs: comma-separated job modules, default ``handlers.jobs``.
    app: the app name that prefixes every resource, default ``jf``.
    shared_max_concurrency, critical_reserved_concurrency, batch_size, batching_window, memory_mb:
        :class:`~jobframework.topology.TopologySettings`.
    powertools_layer_version: the Powertools v3 layer version.
    signing_keys: ``ssm:<parameter>`` or ``secretsmanager:<secret>`` with the HMAC keys (signing off
        when unset), e.g. ``-c signing_keys=ssm:/jf/prod/signing-keys``.
    retry_budget: retries per first attempt, default 0.2; ``off`` disables the budget and its alarms.
    api: ``false`` leaves out the example HTTP API (default ``true``).
    container_workers: comma-separated lanes served by ``jf worker`` on ECS Fargate instead of Lambda
        (e.g. ``-c container_workers=low,default``); default none.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import App, Validations
from cdk_nag import AwsSolutionsChecks

from jobframework.cdk.construct import JobFrameworkStack
from jobframework.cdk.defaults import POWERTOOLS_LAYER_VERSION
from jobframework.jobs import JobRegistry
from jobframework.modules import parse_job_modules
from jobframework.topology import TopologySettings

DEFAULT_JOBS = "handlers.jobs"
ROOT = Path(__file__).resolve().parents[1]
"""The code root: ``handlers/`` is shipped from here (jobframework from the installed distribution)."""
DEFAULT_RETRY_BUDGET = 0.2
INT_SETTINGS = (
    "shared_max_concurrency",
    "critical_reserved_concurrency",
    "batch_size",
    "batching_window",
    "memory_mb",
)


def _context(app: App, name: str) -> Any:
    return app.node.try_get_context(name)


def settings_from_context(app: App) -> TopologySettings:
    values: dict[str, Any] = {"stage": str(_context(app, "stage") or "dev")}
    if _context(app, "app"):
        values["app"] = str(_context(app, "app"))
    for name in INT_SETTINGS:
        raw = _context(app, name)
        if raw is not None:
            values[name] = int(raw)
    return TopologySettings(**values)


def flag_from_context(app: App, name: str, *, default: bool) -> bool:
    """``-c name=false`` (or ``0``, ``no``, ``off``) is false, any other value true."""
    raw = _context(app, name)
    if raw is None:
        return default
    return str(raw).strip().lower() not in ("false", "0", "no", "off")


def retry_budget_from_context(app: App) -> float | None:
    """``-c retry_budget=0.1`` or ``off``; default 0.2."""
    raw = _context(app, "retry_budget")
    if raw is None:
        return DEFAULT_RETRY_BUDGET
    if str(raw).strip().lower() in ("off", "none", "false", ""):
        return None
    return float(raw)


def lanes_from_context(app: App, name: str) -> tuple[str, ...]:
    """``-c container_workers=low,default`` -> ``("low", "default")``; empty when unset."""
    raw = _context(app, name)
    return tuple(lane.strip() for lane in str(raw or "").split(",") if lane.strip())


def build_app(
    app: App | None = None,
    *,
    registry: JobRegistry | None = None,
    settings: TopologySettings | None = None,
    nag: bool = True,
) -> tuple[App, JobFrameworkStack]:
    """The app with one :class:`JobFrameworkStack` (named ``JobFramework-<app>-<stage>``) and, unless
    ``nag`` is false, cdk-nag's AwsSolutions checks on the whole app.

    Raises:
        ConfigurationError: the topology is invalid (e.g. a job's max attempts is not below its
            queue's maxReceiveCount; the message names the job).
    """
    app = app or App()
    modules = parse_job_modules(str(_context(app, "jobs") or DEFAULT_JOBS))
    settings = settings or settings_from_context(app)
    stack = JobFrameworkStack(
        app,
        f"JobFramework-{settings.app}-{settings.stage}",
        job_modules=modules,
        settings=settings,
        registry=registry,
        code_root=ROOT,
        requirements=(),
        powertools_layer_version=int(_context(app, "powertools_layer_version") or POWERTOOLS_LAYER_VERSION),
        signing_keys=str(_context(app, "signing_keys") or "") or None,
        retry_budget=retry_budget_from_context(app),
        api=flag_from_context(app, "api", default=True),
        container_lanes=lanes_from_context(app, "container_workers"),
        description=f"jobframework {settings.app} ({settings.stage}): priority queues, consumers, schedules",
    )
    if nag:
        Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app, stack
