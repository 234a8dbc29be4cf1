"""The examples in the public docstrings run and say what they show."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "jobframework.retry",
    "jobframework.errors",
    "jobframework.envelope",
    "jobframework.scheduling",
    "jobframework.telemetry",
    "jobframework.flow.cancel",
    "jobframework.cli.feature_flags",
    "jobframework.sizing",
    "jobframework.local.console",
    "jobframework.concurrency",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
