"""Build the CDK app from context: which job modules to load, which stage, what to tune.

Context (``-c key=value`` or ``cdk.json``):
    stage: ``dev`` (default) or ``prod`` (or any other name, treated like ``dev``).
    jobs: comma-separated job modules, default ``handlers.jobs``.
    app: the app name that prefixes every resource, default ``jf``.
    shared_max_concurrency, critical_reserved_concurrency, batch_size, batching_window, memory_mb:
        :class:`~jobframework.topology.TopologySettings`.
    powertools_layer_version: the Powertools v3 layer version.
"""

from __future__ import annotations

import importlib
from typing import Any

from aws_cdk import App, Validations
from cdk_nag import AwsSolutionsChecks

from jobframework.jobs import JobRegistry
from jobframework.jobs import registry as default_registry
from jobframework.topology import Topology, TopologySettings
from stacks.defaults import POWERTOOLS_LAYER_VERSION
from stacks.job_framework_stack import JobFrameworkStack

DEFAULT_JOBS = "handlers.jobs"
INT_SETTINGS = (
    "shared_max_concurrency",
    "critical_reserved_concurrency",
    "batch_size",
    "batching_window",
    "memory_mb",
)


def _context(app: App, name: str) -> Any:
    return app.node.try_get_context(name)


def load_job_modules(spec: str) -> list[str]:
    """Import the comma-separated job modules (registering their jobs); returns their names."""
    modules = [m.strip() for m in spec.split(",") if m.strip()]
    for module in modules:
        importlib.import_module(module)
    return modules


def settings_from_context(app: App) -> TopologySettings:
    values: dict[str, Any] = {"stage": str(_context(app, "stage") or "dev")}
    if _context(app, "app"):
        values["app"] = str(_context(app, "app"))
    for name in INT_SETTINGS:
        raw = _context(app, name)
        if raw is not None:
            values[name] = int(raw)
    return TopologySettings(**values)


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
    modules = load_job_modules(str(_context(app, "jobs") or DEFAULT_JOBS))
    settings = settings or settings_from_context(app)
    topology = Topology.from_registry(registry if registry is not None else default_registry, settings)
    stack = JobFrameworkStack(
        app,
        f"JobFramework-{topology.app}-{topology.stage}",
        topology=topology,
        job_modules=modules,
        powertools_layer_version=int(_context(app, "powertools_layer_version") or POWERTOOLS_LAYER_VERSION),
        description=f"jobframework {topology.app} ({topology.stage}): priority queues, consumers, schedules",
    )
    if nag:
        Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app, stack

