"""Layering (issue 13, item 5): ``jobframework.core`` is the bottom layer and imports nothing of the
package, and the names it holds keep their public homes."""

from __future__ import annotations

import ast
from pathlib import Path

import jobframework
from jobframework import core, errors, jobs

PACKAGE = Path(jobframework.__file__).parent


def _imported_modules(path: Path) -> set[str]:
    """Every module a file imports, at any depth (``if TYPE_CHECKING:`` and function bodies too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.add("." * node.level + (node.module or ""))
    return found


def test_core_imports_nothing_of_the_package() -> None:
    ours = {m for m in _imported_modules(PACKAGE / "core.py") if m.startswith(("jobframework", "."))}
    assert not ours, ours


def test_the_names_core_holds_keep_their_public_homes() -> None:
    assert jobs.Priority is core.Priority and jobs.lane_name is core.lane_name
    assert errors.ConfigurationError is core.ConfigurationError
    assert jobframework.ConfigurationError is core.ConfigurationError
    assert issubclass(errors.DuplicateJobError, core.ConfigurationError)
    # Tracebacks and reprs name the class where users import it from.
    assert errors.ConfigurationError.__module__ == "jobframework.errors"
