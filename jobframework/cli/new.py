"""``jf new PATH``: scaffold a service project on jobframework, as ``cdk init`` and ``sam init`` do.

The project holds a package with a jobs module (a plain job, a keyed one and a scheduled one), the CDK
app (``app.py`` and ``cdk.json`` on :class:`jobframework.cdk.JobFrameworkStack`), tests on
:mod:`jobframework.testing`, its dependencies in ``pyproject.toml`` (what the construct bundles into
the Lambda code) and a README. As created it passes its own tests and synthesizes offline.
"""

from __future__ import annotations

import importlib.util
import json
import keyword
import os
import re
import shlex
import shutil
import string
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer

from jobframework.cli.base import app
from jobframework.cli.errors import EXIT_USAGE, CliError
from jobframework.cli.new_templates import FILES, IGNORED

_PACKAGE = re.compile(r"^[a-z][a-z0-9_]*$")
_APP = re.compile(r"^[a-z][a-z0-9-]{0,20}$")


def framework_requirement(extras: str = "") -> str:
    """How the new project depends on jobframework: where this one came from when it was installed
    from a path, a wheel or a repository (PEP 610's ``direct_url.json``), else its version or later.

    Example:
        >>> framework_requirement("[cdk,local]").startswith("jobframework[cdk,local]")
        True
    """
    from importlib import metadata

    try:
        dist = metadata.distribution("jobframework")
    except metadata.PackageNotFoundError:  # run from a source tree that is not installed
        return f"jobframework{extras}"
    try:
        direct = json.loads(dist.read_text("direct_url.json") or "null")
    except ValueError:
        direct = None
    if isinstance(direct, dict) and isinstance(direct.get("url"), str):
        url = direct["url"]
        vcs = direct.get("vcs_info")
        if isinstance(vcs, dict) and vcs.get("vcs") and vcs.get("commit_id"):
            url = f"{vcs['vcs']}+{url}@{vcs['commit_id']}"
        return f"jobframework{extras} @ {url}"
    return f"jobframework{extras}>={dist.version}"


def _shadowed(name: str) -> str | None:
    """What a top-level package ``name`` would hide: a standard library module, or one installed here
    (jobframework, pydantic, boto3...), which the project's tests and its bundle would import in its
    stead; ``None`` when nothing."""
    if name in sys.stdlib_module_names:
        return "the standard library's module"
    try:
        found = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    # (a bare directory on the path, such as the project's own when run from its parent, is a namespace
    # package with no origin: not an installed one)
    return "the installed package" if found is not None and found.origin is not None else None


def project_names(path: Path, package: str | None = None) -> dict[str, str]:
    """The names a new project at ``path`` uses: ``project`` (its directory), ``package`` (its Python
    package), ``prefix`` (of its job names), ``app_name`` (of its AWS resources), ``stack``, and the
    ``framework`` requirement (:func:`framework_requirement`).

    Example:
        >>> project_names(Path("/src/billing-service"))["package"]
        'billing_service'

    Raises:
        CliError: the directory's name gives no valid package (or ``package`` is not one), saying what
            to pass.
    """
    project = path.name
    name = package or re.sub(r"[^a-z0-9_]", "_", project.lower()).strip("_")
    if not _PACKAGE.match(name) or keyword.iskeyword(name):
        raise CliError(
            f"{name!r} is not a valid Python package name: pass --package NAME (lowercase letters, digits "
            "and underscores, starting with a letter)",
            EXIT_USAGE,
        )
    shadowed = _shadowed(name)
    if shadowed:
        raise CliError(
            f"a package named {name!r} would shadow {shadowed} of the same name, which the jobs, the "
            f"Lambda bundle or jf itself import: pass --package NAME with another name (e.g. "
            f"{name}_jobs)",
            EXIT_USAGE,
        )
    app_name = name.replace("_", "-")[:21].rstrip("-")
    if not _APP.match(app_name):
        raise CliError(f"cannot derive an AWS name from {name!r}: pass another --package", EXIT_USAGE)
    stack = "".join(part.capitalize() for part in name.split("_"))
    return {
        "project": project,
        "package": name,
        "prefix": name,
        "app_name": app_name,
        "stack": stack,
        "framework": framework_requirement(),
        "framework_dev": framework_requirement("[cdk,local]"),
    }


ALLOWED_BEFORE = frozenset(
    {".venv", "venv", ".git", ".gitignore", ".python-version", ".idea", ".vscode", ".DS_Store"}
    | {"README.md", "LICENSE", "LICENSE.md", "LICENSE.txt"}
)
"""What a directory may hold already for ``jf new`` to write into it: a virtualenv made to install
jobframework (``jf new .`` from it), a fresh repository (with the README and licence a host may create),
editor settings. A README there is kept; a ``.gitignore`` gets the lines of :data:`IGNORED` it lacks."""


def scaffold(path: Path, package: str | None = None) -> list[Path]:
    """Write a new project into ``path`` (created; it may exist only if empty, or hold only
    :data:`ALLOWED_BEFORE`); returns the files written or added to.

    Raises:
        CliError: ``path`` is a file or a non-empty directory (nothing is written), or the names are
            not valid (see :func:`project_names`).
    """
    path = path.expanduser().resolve()
    present = {p.name for p in path.iterdir()} if path.is_dir() else set()
    if path.exists() and (not path.is_dir() or present - ALLOWED_BEFORE):
        raise CliError(
            f"{path} already exists and holds files of its own: choose a new path, or an empty directory "
            f"(one holding only {', '.join(sorted(ALLOWED_BEFORE))} will do; nothing was written)",
            EXIT_USAGE,
        )
    from jobframework.cli.feature_flags import context_json, recommended_feature_flags

    names = {**project_names(path, package), "context": context_json(recommended_feature_flags()[0])}
    written = []
    for relative, text in FILES.items():
        target = path / string.Template(relative).substitute(names)
        if target.name == ".gitignore" and target.exists():
            if _add_ignored(target):
                written.append(target)
            continue
        if target.exists():  # only what ALLOWED_BEFORE lets through: the team's README
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(string.Template(text).substitute(names), encoding="utf-8")
        written.append(target)
    return written


def _add_ignored(gitignore: Path) -> bool:
    """Append the lines of :data:`IGNORED` that ``gitignore`` lacks; whether it did."""
    text = gitignore.read_text(encoding="utf-8")
    have = {line.strip() for line in text.splitlines()}
    missing = [line for line in IGNORED if line not in have and line.rstrip("/") not in have]
    if missing:
        gitignore.write_text(
            text + ("" if text.endswith("\n") or not text else "\n") + "\n".join(missing) + "\n"
        )
    return bool(missing)


def _next_steps(path: Path, app_name: str) -> list[str]:
    """What to run after ``jf new``: into the directory unless it is this one, into its venv if it has one."""
    resolved = path.expanduser().resolve()
    steps = [] if resolved == Path.cwd().resolve() else [f"cd {shlex.quote(str(path))}"]
    venv = next((name for name in (".venv", "venv") if (resolved / name / "bin" / "python").exists()), None)
    if venv is None:
        venv = ".venv"
        steps.append('python3 -m venv .venv && .venv/bin/pip install -e ".[dev]"')
    else:
        steps.append(f'{venv}/bin/pip install -e ".[dev]"   # into the venv that is there')
    steps.append(f"{venv}/bin/python -m pytest; {venv}/bin/jf dev --app {app_name}")
    steps.append(f"source {venv}/bin/activate && cdk deploy")
    return steps


SILENCE_NODE_EOL = "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"
"""The variable that hides jsii's end-of-life banner for a Node version."""


def node_note() -> str | None:
    """What to know of this machine's Node.js before ``cdk synth`` (the CDK runs on it): none found,
    or one past its end of life, whose jsii banner prints at every synth (``python app.py`` prints it
    as Python byte strings); ``None`` for a supported one or a banner already hidden."""
    node = shutil.which("node")
    if node is None:
        return "the CDK (cdk synth, cdk deploy) needs Node.js 22 or 24, and none is on PATH"
    try:
        version = subprocess.run(
            [node, "--version"], check=False, capture_output=True, text=True, timeout=10
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    major = re.match(r"v(\d+)\.", version.strip())
    silenced = os.environ.get(SILENCE_NODE_EOL, "").replace(" ", "").split(",")
    # (an odd release is short-lived, past its end of life within months: jsii says so of it too)
    if major is None or (int(major[1]) >= 22 and int(major[1]) % 2 == 0) or major[1] in silenced:
        return None
    return (
        f"Node.js {version.strip()} is past its end of life: jsii prints a banner saying so at every "
        f"synth; export {SILENCE_NODE_EOL}={major[1]} hides it (Node 22 or 24 needs nothing)"
    )


@app.command()
def new(
    path: Annotated[
        Path,
        typer.Argument(
            help="Directory of the new project (created; an existing one must be empty or hold only a "
            "virtualenv, .git, a README, a licence or editor settings: `jf new .` from the venv you "
            "installed jf into)."
        ),
    ],
    package: Annotated[
        str | None, typer.Option(help="Its Python package (default: the directory's name, as an identifier).")
    ] = None,
) -> None:
    """Create a service project: jobs, a CDK app on the JobFramework construct, tests, a README."""
    written = scaffold(path, package)
    names = project_names(path.expanduser().resolve(), package)
    typer.echo(
        f"created {path} ({len(written)} files): the jobs are in {path / names['package'] / 'jobs.py'}"
    )
    for n, step in enumerate(_next_steps(path, names["app_name"])):
        typer.echo(f"{'next:' if n == 0 else '':6} {step}")
    node = node_note()
    if node is not None:
        typer.echo(f"note:  {node}", err=True)
    if "file://" in names["framework"]:
        typer.echo(
            f"note:  pyproject.toml depends on {names['framework']} (where this jf came from): a "
            "teammate or CI needs a git URL or a wheel there instead",
            err=True,
        )
