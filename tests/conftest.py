"""Shared test set-up: fake AWS credentials, the embedded AWS fixtures, and the --run-slow option."""

from __future__ import annotations

import os

import pytest

from jobframework.local.aws import use_fake_credentials

pytest_plugins = ["jobframework.testing"]

use_fake_credentials()
os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--run-slow", action="store_true", default=False, help="run the large chaos and soak runs"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="large run: pass --run-slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
