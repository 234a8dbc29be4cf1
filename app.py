#!/usr/bin/env python3
"""This repository's CDK app: the example jobs on the library's JobFrameworkStack, with cdk-nag.

npx cdk synth -c stage=dev              (offline; the Lambda code is bundled locally, never with Docker)
npx cdk deploy -c stage=prod

A team's own app puts jobframework.cdk.JobFramework into its stack instead (`jf new PATH` writes one).
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
os.environ.setdefault("JSII_RUNTIME_PACKAGE_CACHE_ROOT", str(ROOT / ".jsii-cache"))

from stacks.application import build_app  # noqa: E402

if __name__ == "__main__":
    app, _ = build_app()
    app.synth()
