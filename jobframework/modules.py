"""Which job modules a process loads: ``--jobs`` / ``JF_JOBS``, imported with the current directory
importable (as celery and uvicorn do), and a clear error when none is named.

>>> parse_job_modules(" mysvc.jobs, mysvc.reports ,")
['mysvc.jobs', 'mysvc.reports']
"""

from __future__ import annotations

import importlib
import logging
import os
import pkgutil
import sys
import sysconfig
import traceback
from collections.abc import Iterable, Mapping
from pathlib import Path

from jobframework.config import ENV_JOBS
from jobframework.errors import ConfigurationError

log = logging.getLogger(__name__)

NO_JOB_MODULES = (
    "no job modules named: set JF_JOBS to the module(s) that define your @job functions "
    "(comma-separated, e.g. JF_JOBS=mysvc.jobs; the stack sets it from job_modules=), or list them in "
    "your project's pyproject.toml ([tool.jobframework] jobs = [\"mysvc.jobs\"]: jf, the tests' plugin "
    "and the JobFramework construct read it), or give them to the command with --jobs (e.g. jf dev "
    "--jobs mysvc.jobs, jf worker --jobs mysvc.jobs, jf saga signal ID NAME --jobs mysvc.jobs)"
)


def parse_job_modules(spec: str) -> list[str]:
    """The module names of a comma-separated ``spec``, blanks dropped."""
    return [name.strip() for name in spec.split(",") if name.strip()]


def configured_job_modules(
    environ: Mapping[str, str] | None = None, *, project_dir: Path | None = None
) -> list[str]:
    """The job modules named by ``JF_JOBS``, else (given ``project_dir``, as the CLI gives its
    current directory; a Lambda's is its bundle, where the stack sets ``JF_JOBS``) by the
    ``[tool.jobframework] jobs`` of the project's ``pyproject.toml``, whose directory is then put on
    ``sys.path`` (its packages import from a subdirectory too).

    Raises:
        ConfigurationError: neither names any (the message says what to set), or the project file's
            list is not one of module names.
    """
    modules = parse_job_modules((os.environ if environ is None else environ).get(ENV_JOBS, ""))
    if not modules and project_dir is not None:
        from jobframework.project_file import project_jobs

        found = project_jobs(project_dir)
        if found is not None:
            found.importable()
            modules = found.modules
    if not modules:
        raise ConfigurationError(NO_JOB_MODULES)
    return modules


def import_job_modules(modules: Iterable[str], *, cwd_importable: bool = False) -> list[str]:
    """Import the modules that register jobs; returns their names.

    Args:
        cwd_importable: put the current directory first on ``sys.path`` (the CLI does; Lambda's task
            root is already on it).

    Raises:
        ConfigurationError: a module cannot be imported (names it, and the module that was missing).
    """
    names = [name.strip() for name in modules if name.strip()]
    if cwd_importable and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    for name in names:
        try:
            first = name not in sys.modules
            registered = _registered()
            module = importlib.import_module(name)
            if first and _registered() == registered and not _defines_jobs(module):
                log.warning(
                    "job module %r registered no @job%s: name the module that defines the jobs (a "
                    "package's modules are not imported with it)",
                    name,
                    _submodules_hint(module),
                )
        except ModuleNotFoundError as exc:
            if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
                raise ConfigurationError(
                    f"job module {name!r} not found (sys.path starts {sys.path[:3]}): check the module "
                    f"names ({ENV_JOBS}, --jobs, pyproject.toml's [tool.jobframework] jobs or the "
                    "construct's job_modules=), and that its package is installed or in the current "
                    "directory"
                ) from exc
            raise ConfigurationError(
                f"job module {name!r} imports {exc.name!r}, which is not installed: add it to your "
                "project's dependencies"
            ) from exc
        except ConfigurationError:
            raise  # a decorator's own message names the job and the fix
        except Exception as exc:  # the module's code raised as it was imported: say where
            raise ConfigurationError(
                f"importing job module {name!r} failed at {_where(exc)}: {type(exc).__name__}: {exc}"
            ) from exc
    return names


def _where(exc: BaseException) -> str:
    """``file:line`` of the innermost frame of ``exc`` in the importing project's code (not the
    standard library's, nor an installed package's, nor importlib's), relative to the current
    directory when under it."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return _shown(exc.filename, exc.lineno or 0)
    library = tuple(
        os.path.realpath(p) for p in {sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"]}
    )
    frames = traceback.extract_tb(exc.__traceback__)
    own = [f for f in frames if not f.filename.startswith("<") and not f.filename.startswith(library)]
    chosen = own or frames
    return _shown(chosen[-1].filename, chosen[-1].lineno or 0) if chosen else "?"


def _shown(filename: str, line: int) -> str:
    try:
        relative = os.path.relpath(filename)
    except ValueError:  # another drive
        relative = filename
    return f"{filename if relative.startswith('..') else relative}:{line}"


def _registered() -> int:
    from jobframework.jobs import JobRegistry

    return JobRegistry.registrations


def _defines_jobs(module: object) -> bool:
    """``module`` holds a job or a saga, its own or imported (a saga module that imports its jobs)."""
    from jobframework.jobs import Job

    kinds: tuple[type, ...] = (Job,)
    definition = sys.modules.get("jobframework.saga.definition")  # (no saga without it loaded)
    if definition is not None:
        kinds = (Job, definition.Saga)
    return any(isinstance(v, kinds) for v in vars(module).values())


def no_jobs_message(names: Iterable[str]) -> str:
    """What to say when the job modules ``names`` (imported) registered no job at all."""
    hints = "".join(_submodules_hint(sys.modules.get(name)) for name in names)
    return (
        f"the job modules {', '.join(names) or '(none)'} registered no @job{hints}: name the module(s) "
        "that define your jobs (--jobs mysvc.jobs, or JF_JOBS); a package's modules are not imported with it"
    )


def packages_hint(names: Iterable[str]) -> str:
    """For modules that registered no job: which of them are packages, and their modules (a package's
    modules are not imported with it), or ``""``."""
    packages = [sys.modules[n] for n in names if hasattr(sys.modules.get(n), "__path__")]
    hints = [f"{package.__name__}{_submodules_hint(package)}" for package in packages]
    return f"; name the modules that define the jobs: {'; '.join(hints)}" if hints else ""


def _submodules_hint(module: object) -> str:
    path = getattr(module, "__path__", None)
    if path is None:
        return ""
    found = sorted(f"{module.__name__}.{m.name}" for m in pkgutil.iter_modules(path))  # type: ignore[attr-defined]
    return f" (it is a package; its modules: {', '.join(found[:8])})" if found else ""
