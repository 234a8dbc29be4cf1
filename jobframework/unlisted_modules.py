"""The modules of a project's packages that apply ``@job`` but that a consumer would not load: the synth
warns of them (:mod:`jobframework.cdk.construct`), and so do ``jf dev`` and ``jf worker`` at start."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from pathlib import Path

_APPLIES_JOB = re.compile(r"^[ \t]*@(?:[\w.]+\.)?job\(", re.M)
"""A line that applies ``@job(...)`` (or ``@jobframework.job(...)``)."""


def unlisted_job_modules(root: Path, packages: Iterable[str], listed: Iterable[str]) -> list[str]:
    """Modules of ``packages`` (directories under ``root``) whose source applies ``@job`` but that are
    neither ``listed`` nor imported by them (looked up in ``sys.modules``: call it after the listed
    modules were imported). A consumer that loads only ``listed`` does not know their jobs: it
    dead-letters them ``unknown-type``. Test modules (``test_*.py``, ``*_test.py``, ``conftest.py``,
    anything under a ``tests`` directory) are left out.
    """
    wanted = set(listed)
    found: list[str] = []
    for package in dict.fromkeys(packages):
        base = root / package
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*.py")):
            relative = path.relative_to(root).with_suffix("")
            parts = list(relative.parts)
            if parts[-1] == "__init__":
                parts.pop()
            name = ".".join(parts)
            if name in wanted or name in sys.modules or _is_test_module(relative):
                continue
            try:
                source = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            if _APPLIES_JOB.search(source):
                found.append(name)
    return found


def _is_test_module(relative: Path) -> bool:
    stem = relative.name
    return (
        stem.startswith("test_")
        or stem.endswith("_test")
        or stem == "conftest"
        or any(part in ("tests", "test") for part in relative.parts[:-1])
    )
