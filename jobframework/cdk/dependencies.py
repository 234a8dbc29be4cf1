"""A project's declared runtime dependencies, as the Lambda asset needs them.

The Lambda Python runtime provides boto3 (and botocore, s3transfer, jmespath, urllib3, dateutil, six);
the official Powertools layer provides Powertools, pydantic and pydantic's own dependencies. What they
provide is never copied into the asset, and ``jobframework`` is shipped from the installed distribution
(never fetched from a registry). What remains is installed for the function's platform by
:mod:`jobframework.cdk.bundling`.

>>> runtime_requirements(["jobframework[cdk]>=0.1", "boto3", "email-validator>=2", "Pydantic[email]"])
['email-validator>=2', 'Pydantic[email]']
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Sequence
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from jobframework.errors import ConfigurationError

RUNTIME_PROVIDED: frozenset[str] = frozenset(
    {"boto3", "botocore", "s3transfer", "jmespath", "urllib3", "python-dateutil", "six"}
)
"""Distributions of the Lambda Python runtime."""
LAYER_PROVIDED: frozenset[str] = frozenset(
    {
        "aws-lambda-powertools",
        "pydantic",
        "pydantic-core",
        "annotated-types",
        "typing-extensions",
        "typing-inspection",
        "aws-xray-sdk",
        "wrapt",
        "fastjsonschema",
    }
)
"""Distributions of the Powertools for AWS Lambda (Python) v3 layer that the framework relies on."""
PROVIDED: frozenset[str] = RUNTIME_PROVIDED | LAYER_PROVIDED
FRAMEWORK = "jobframework"
DEPLOY_ONLY: frozenset[str] = frozenset({"aws-cdk-lib", "constructs", "cdk-nag", "jsii", "cfn-lint"})
"""What synthesizes the app: never a runtime dependency of a Lambda function."""
REQUIREMENTS_FILE = "requirements.txt"
PYPROJECT_FILE = "pyproject.toml"


def find_dependency_file(code_root: Path) -> Path | None:
    """``requirements.txt`` in ``code_root`` if there is one, else ``pyproject.toml``, else ``None``."""
    for name in (REQUIREMENTS_FILE, PYPROJECT_FILE):
        candidate = code_root / name
        if candidate.is_file():
            return candidate
    return None


def read_dependency_file(path: Path) -> list[str]:
    """The requirement strings of a ``requirements.txt`` (``-r`` includes followed) or of the
    ``[project] dependencies`` of a ``pyproject.toml``.

    Raises:
        ConfigurationError: the file is missing, declares its dependencies ``dynamic``, or holds a pip
            option the bundler cannot honour (``-e``, ``--index-url``, ...); the message names the file.
    """
    if not path.is_file():
        raise ConfigurationError(f"dependency file {path} does not exist: create it or pass another one")
    if path.name == PYPROJECT_FILE or path.suffix == ".toml":
        return _pyproject_dependencies(path)
    return _requirements_lines(path, seen=set())


def _pyproject_dependencies(path: Path) -> list[str]:
    try:
        project = tomllib.loads(path.read_text(encoding="utf-8")).get("project", {})
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"{path} is not valid TOML: {exc}") from exc
    if "dependencies" in project.get("dynamic", ()):
        raise ConfigurationError(
            f"{path} declares its dependencies dynamic: list them in [project] dependencies or in a "
            f"{REQUIREMENTS_FILE} next to it"
        )
    dependencies = project.get("dependencies", [])
    if not isinstance(dependencies, list) or not all(isinstance(d, str) for d in dependencies):
        raise ConfigurationError(f"{path}: [project] dependencies must be a list of requirement strings")
    return list(dependencies)


def _requirements_lines(path: Path, *, seen: set[Path]) -> list[str]:
    resolved = path.resolve()
    if resolved in seen:
        return []
    seen.add(resolved)
    lines: list[str] = []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith(("-r ", "--requirement ")):
            included = path.parent / line.split(None, 1)[1].strip()
            if not included.is_file():
                raise ConfigurationError(f"{path}:{number}: includes {included}, which does not exist")
            lines += _requirements_lines(included, seen=seen)
        elif line.startswith("-"):
            raise ConfigurationError(
                f"{path}:{number}: {line.split()[0]} is not supported when bundling the Lambda code "
                "(only requirement specifiers and -r includes are): install from the default index, "
                "or pass requirements= to the JobFramework construct"
            )
        else:
            lines.append(line)
    return lines


def runtime_requirements(requirements: Iterable[str], *, source: str = "requirements") -> list[str]:
    """The requirements to install into the asset: without ``jobframework`` (shipped from the installed
    distribution) and without what the runtime and the Powertools layer provide (one asked for with
    extras, ``pydantic[email]``, stays: its extras are installed and the provided part pruned after).

    Raises:
        ConfigurationError: a requirement is not valid, or is a deploy-time package (aws-cdk-lib,
            constructs, cdk-nag, ...) that would bloat every function; the message names it and
            ``source``.
    """
    kept: list[str] = []
    for text in requirements:
        try:
            requirement = Requirement(text)
        except InvalidRequirement as exc:
            raise ConfigurationError(f"{source}: {text!r} is not a valid requirement ({exc})") from exc
        name = canonicalize_name(requirement.name)
        if name in DEPLOY_ONLY:
            raise ConfigurationError(
                f"{source} lists {requirement.name}, which only synthesizes the app: move it to an extra "
                f'(e.g. [project.optional-dependencies] deploy = ["jobframework[cdk]"]) so that it is not '
                "installed into every Lambda function"
            )
        if name == FRAMEWORK or (name in PROVIDED and not requirement.extras):
            continue  # a provided one with extras is installed for its extras, then pruned
        kept.append(text)
    return kept


def provided_names(extra: Sequence[str] = ()) -> frozenset[str]:
    """:data:`PROVIDED` plus ``extra`` distribution names (normalized)."""
    return PROVIDED | {canonicalize_name(n) for n in extra}


def local_requirement_paths(requirements: Sequence[str]) -> list[Path]:
    """The files and directories the requirements install from (``name @ file:///...whl``): their
    content, not their unchanged version, says whether the bundle changed.

    Example:
        >>> local_requirement_paths(["billing-jobs @ file:///tmp/dist/billing_jobs-1.0-py3-none-any.whl", "httpx"])
        [PosixPath('/tmp/dist/billing_jobs-1.0-py3-none-any.whl')]
    """  # noqa: E501
    from urllib.parse import unquote, urlparse

    paths = []
    for text in requirements:
        try:
            url = Requirement(text).url
        except InvalidRequirement:
            continue
        if url and url.startswith("file:"):
            paths.append(Path(unquote(urlparse(url).path)))
    return paths


def check_job_packages(modules: Sequence[str], shipped: Sequence[str], root: Path, *, installs: bool) -> None:
    """Refuse, before anything is built, a job module whose package is not shipped: one under
    ``root`` left out of ``packages=``, or one that no requirement can install (``installs``: there are
    requirements, which the bundle's import check then holds to it)."""
    for module in modules:
        package = module.split(".", 1)[0]
        here = (root / package / "__init__.py").is_file() or (root / f"{package}.py").is_file()
        if package in shipped or not (here or not installs):
            continue
        why = (
            f"it is under code_root {root}: add it to packages="
            if here
            else "and no requirements= installs it (a wheel of it, 'orders-jobs @ file:///...whl')"
        )
        raise ConfigurationError(
            f"job module {module} is not in the Lambda asset: its package {package} is not among "
            f"packages={list(shipped)}; {why}"
        )
