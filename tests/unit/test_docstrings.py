"""The examples in the public docstrings run and say what they show."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

SKIPPED = ("jobframework.entrypoints.",)
"""Modules that read their environment when imported (a Lambda or container entry point)."""


def _modules() -> list[str]:
    import jobframework

    return [
        m.name
        for m in pkgutil.walk_packages(jobframework.__path__, "jobframework.")
        if not m.name.startswith(SKIPPED)
    ]


def test_every_docstring_example_of_the_package_runs_and_says_what_it_shows():
    """Every module's examples (59 modules had some when this was written), not a chosen few: a module
    left off a list had an example that no longer said what the code did."""
    failed: dict[str, int] = {}
    with_examples = 0
    for name in _modules():
        result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
        with_examples += result.attempted > 0
        if result.failed:
            failed[name] = result.failed
    assert not failed, f"failing examples (module: count): {failed}"
    assert with_examples >= 55
