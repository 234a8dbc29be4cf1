"""One synth of the default app (example jobs, stage dev, cdk-nag on) for the whole session."""

from __future__ import annotations

import importlib
import json
import os
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

from jobframework.topology import Topology  # noqa: E402
from stacks.application import build_app  # noqa: E402
from stacks.job_framework_stack import JobFrameworkStack  # noqa: E402

SIGNING_KEYS = "ssm:/jf/dev/signing-keys"
"""The session synth has signing on, so that its grants are checked by cdk-nag and the tests."""


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
            context={"stage": "dev", "jobs": "handlers.jobs", "signing_keys": SIGNING_KEYS},
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
