"""One synth of the default app (example jobs, stage dev, cdk-nag on, the low lane on Fargate) for the
whole session, and one small synth of an app whose jobs use worker profiles and batching."""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("JSII_RUNTIME_PACKAGE_CACHE_ROOT", str(ROOT / ".jsii-cache"))

from aws_cdk import App, cx_api  # noqa: E402
from aws_cdk import aws_iam as iam  # noqa: E402
from aws_cdk.assertions import Template  # noqa: E402
from pydantic import BaseModel  # noqa: E402

from jobframework.cdk.construct import JobFrameworkStack  # noqa: E402
from jobframework.jobs import BatchOptions, JobRegistry, Priority, job  # noqa: E402
from jobframework.topology import Topology, TopologySettings  # noqa: E402
from stacks.application import build_app  # noqa: E402

SIGNING_KEYS = "ssm:/jf/dev/signing-keys"
"""The session synth has signing on, so that its grants are checked by cdk-nag and the tests."""
CONTAINER_LANES = ("low",)
"""The session synth serves these lanes with ``jf worker`` on Fargate instead of Lambda."""
PROFILE_CONTAINER_LANES = ("critical", "low-cpu")
"""The profiles app serves these on Fargate (a critical lane keeps one task; low-cpu scales from 0)."""


@dataclass(frozen=True)
class Synth:
    app: App
    stack: JobFrameworkStack
    assembly: cx_api.CloudAssembly
    template: Template
    template_path: Path
    outdir: Path

    @property
    def topology(self) -> Topology:
        return self.stack.topology

    def template_json(self) -> dict[str, Any]:
        template: dict[str, Any] = json.loads(self.template_path.read_text())
        return template

    def functions(self) -> dict[str, Mapping[str, Any]]:
        """The framework's own functions (consumers, the API) by logical id: not CDK's helpers, such as
        the provider that empties a dev payload bucket on delete."""
        functions = self.template.find_resources("AWS::Lambda::Function")
        return {k: f for k, f in functions.items() if f["Properties"]["Handler"].startswith("jobframework.")}

    def code_assets(self) -> list[dict[str, Any]]:
        """The zip assets that the framework's own functions run."""
        keys = {json.dumps(f["Properties"]["Code"]["S3Key"]) for f in self.functions().values()}
        return [
            a
            for a in self.zip_assets()
            if any(json.dumps(d["objectKey"]) in keys for d in a["destinations"].values())
        ]

    def zip_assets(self) -> list[dict[str, Any]]:
        """The file assets (source and destination) of the assets manifest that are zipped directories."""
        manifest = json.loads((self.outdir / f"{self.stack.artifact_id}.assets.json").read_text())
        files: dict[str, dict[str, Any]] = manifest["files"]
        return [a for a in files.values() if a["source"].get("packaging") == "zip"]


@pytest.fixture(scope="session")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The example app synthesized once (signing on), with a producer role granted enqueue rights.

    ``app.synth()`` runs cdk-nag; an unacknowledged finding fails it (and so every test here).
    """
    import handlers.jobs
    from jobframework.jobs import registry

    if "maintenance.cleanup" not in registry:  # another suite cleared the default registry
        importlib.reload(handlers.jobs)
    outdir = tmp_path_factory.mktemp("cdk.out")
    app, stack = build_app(
        App(
            outdir=str(outdir),
            context={
                "stage": "dev",
                "jobs": "handlers.jobs",
                "signing_keys": SIGNING_KEYS,
                "container_workers": ",".join(CONTAINER_LANES),
            },
        )
    )
    producer = iam.Role(stack, "ExampleProducer", assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com"))
    stack.grant_enqueue(producer)
    assembly = app.synth()
    artifact = assembly.get_stack_artifact(stack.artifact_id)
    return Synth(
        app=app,
        stack=stack,
        assembly=assembly,
        template=Template.from_stack(stack),
        template_path=Path(artifact.template_full_path),
        outdir=outdir,
    )


class Item(BaseModel):
    n: int = 0


def profiles_registry() -> JobRegistry:
    """Jobs on every kind of lane: critical, shared, a batched shared lane (default, 50 records, 2 s),
    a batched io lane (high-io, 200 records, 5 s) and two cpu lanes (default-cpu, low-cpu)."""
    registry = JobRegistry()

    @job("auth.otp", priority=Priority.CRITICAL, timeout=10, registry=registry)
    def otp(p: Item) -> None: ...

    @job("crm.sync", priority=Priority.DEFAULT, registry=registry)
    def sync(p: Item) -> None: ...

    @job(
        "events.ingest",
        priority=Priority.DEFAULT,
        batch=BatchOptions(max_size=50, max_wait=2),
        registry=registry,
    )
    def ingest(items: list[Item]) -> None: ...

    @job(
        "emails.bulk",
        priority=Priority.HIGH,
        profile="io",
        batch=BatchOptions(max_size=200, max_wait=5),
        registry=registry,
    )
    def bulk(items: list[Item]) -> None: ...

    @job("images.render", priority=Priority.DEFAULT, profile="cpu", timeout=300, registry=registry)
    def render(p: Item) -> None: ...

    @job("videos.transcode", priority=Priority.LOW, profile="cpu", timeout=900, registry=registry)
    def transcode(p: Item) -> None: ...

    return registry


@pytest.fixture(scope="session")
def profiles(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The profiles app (``prof-dev``, no API), synthesized once with cdk-nag, critical and low-cpu on
    Fargate."""
    outdir = tmp_path_factory.mktemp("cdk.out.profiles")
    app, stack = build_app(
        App(
            outdir=str(outdir),
            context={
                "jobs": "handlers.jobs",
                "api": "false",
                "container_workers": ",".join(PROFILE_CONTAINER_LANES),
            },
        ),
        registry=profiles_registry(),
        settings=TopologySettings(app="prof"),
    )
    assembly = app.synth()
    artifact = assembly.get_stack_artifact(stack.artifact_id)
    return Synth(
        app=app,
        stack=stack,
        assembly=assembly,
        template=Template.from_stack(stack),
        template_path=Path(artifact.template_full_path),
        outdir=outdir,
    )
