"""The job modules a project names once, in its ``pyproject.toml``::

    [tool.jobframework]
    jobs = ["billing.jobs", "billing.reports"]

The CLI (``jf dev``, ``jf worker``, ``jf ui``, ...) reads it when neither ``--jobs`` nor ``JF_JOBS``
names them, the ``JobFramework`` construct when it is given no ``job_modules=``, and the pytest plugin
(``pytest_plugins = ["jobframework.testing"]``) imports them before the tests run: one list where a
project named its modules in three places (``app.py``, ``conftest.py`` and ``jf dev --jobs``).
The nearest ``pyproject.toml`` at or above a directory is the project's (a parent's is not read past it).
"""

from __future__ import annotations

import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from jobframework.errors import ConfigurationError

PROJECT_FILE = "pyproject.toml"
EXAMPLE = '[tool.jobframework]\njobs = ["mysvc.jobs"]'


@dataclass(frozen=True, slots=True)
class ProjectJobs:
    """The job modules of a project file, and the file (for messages saying where they came from)."""

    modules: list[str]
    path: Path

    def importable(self) -> None:
        """Put the project's directory (the file's) on ``sys.path``, where its packages are: ``jf`` run
        from a subdirectory, pytest from anywhere."""
        if str(self.path.parent) not in sys.path:
            sys.path.insert(0, str(self.path.parent))


def project_file(start: Path) -> Path | None:
    """The nearest ``pyproject.toml`` at or above ``start``, or None."""
    for directory in (start, *start.parents):
        candidate = directory / PROJECT_FILE
        if candidate.is_file():
            return candidate
    return None


def project_jobs(start: Path | None = None) -> ProjectJobs | None:
    """The ``[tool.jobframework] jobs`` of the project file at or above ``start`` (default the current
    directory), or None when the file or the list is not there.

    Raises:
        ConfigurationError: the file is not TOML, or ``jobs`` is not a list of module names (the
            message names the file and shows the form).
    """
    path = project_file((start or Path.cwd()).resolve())
    if path is None:
        return None
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigurationError(
            f"{path} is not valid TOML ({exc}); jobframework reads its job modules there"
        ) from None
    table = data.get("tool", {}).get("jobframework")
    if table is None:
        return None
    unknown = sorted(set(table) - {"jobs"}) if isinstance(table, dict) else ["(not a table)"]
    if unknown:
        raise ConfigurationError(
            f"{path}: [tool.jobframework] takes jobs (a list of job modules), not {', '.join(unknown)}; "
            f"e.g.\n{EXAMPLE}"
        )
    if "jobs" not in table:
        return None
    jobs = table["jobs"]
    names = [jobs] if isinstance(jobs, str) else jobs
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ConfigurationError(
            f"{path}: [tool.jobframework] jobs must be a list of module names, got {jobs!r}; e.g.\n{EXAMPLE}"
        )
    from jobframework.modules import parse_job_modules  # (it reads this module's list: not at import)

    modules = parse_job_modules(",".join(names))
    bad = [m for m in modules if not all(part.isidentifier() for part in m.split("."))]
    if bad:
        raise ConfigurationError(
            f"{path}: [tool.jobframework] jobs names {', '.join(map(repr, bad))}, not a module name "
            f"(dotted, as you would import it); e.g.\n{EXAMPLE}"
        )
    if not modules:
        raise ConfigurationError(
            f"{path}: [tool.jobframework] jobs is empty; name your job modules, e.g.\n{EXAMPLE}"
        )
    return ProjectJobs(modules, path)
