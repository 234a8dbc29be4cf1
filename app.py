#!/usr/bin/env python3
"""The CDK app: loads the job modules, derives the topology, builds the stack, applies cdk-nag.

npx cdk synth -c stage=dev -c jobs=handlers.jobs
npx cdk deploy -c stage=prod -c jobs=my_service.jobs
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
