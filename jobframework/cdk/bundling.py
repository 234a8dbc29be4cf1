"""The Lambda code of a project, built without Docker through CDK's local bundling.

The asset holds the project's packages (copied from its code root), ``jobframework`` (copied from the
installed distribution, without its ``cdk`` subpackage) and the project's declared runtime dependencies,
installed for the function's platform and Python::

    pip install --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 --only-binary=:all:
        --implementation cp --python-version 3.14 --target <bundle> <requirements>

What the Lambda runtime and the Powertools layer provide (:mod:`jobframework.cdk.dependencies`) is pruned
after the install. Bundles are cached by content: the key (also the asset hash) is a SHA-256 of the
packages' files, the requirements, jobframework's files and version, the platform and the Python
version, never of paths, times or the machine. Unpinned requirements resolve once per key: pin them
for reproducible assets. The cache lives in ``$JF_BUNDLE_CACHE`` (default
``~/.cache/jobframework/lambda``); deleting it is always safe.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import AssetHashType, BundlingOptions, DockerImage, ILocalBundling
from aws_cdk import aws_lambda as lambda_

import jobframework
from jobframework.cdk.dependencies import local_requirement_paths, provided_names
from jobframework.errors import ConfigurationError

FORMAT = "jf-bundle-1"
"""Part of every key: bump it when the layout of a bundle changes."""
ENV_CACHE = "JF_BUNDLE_CACHE"
IGNORED_DIRS = frozenset({"__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache"})
IGNORED_SUFFIXES = (".pyc", ".pyo")
FRAMEWORK_EXCLUDED = frozenset({"cdk", "cli", "local", "ui", "testing.py"})
"""Parts of jobframework left out of the Lambda asset: ``cdk`` imports aws_cdk, absent in Lambda; the
``jf`` CLI, the embedded AWS, the web console and the test helpers never run there (about 0.5 MB;
the container workers' image installs the whole package, ``jf worker`` included)."""
PLATFORMS: dict[str, tuple[str, ...]] = {
    "x86_64": ("manylinux2014_x86_64", "manylinux_2_28_x86_64"),
    "arm64": ("manylinux2014_aarch64", "manylinux_2_28_aarch64"),
}
"""pip ``--platform`` tags per Lambda architecture (Amazon Linux 2023 has glibc 2.34)."""
PIP_TIMEOUT = 600
CHECK_TIMEOUT = 120


@dataclass(frozen=True)
class BundleSpec:
    """What goes into one Lambda bundle.

    Attributes:
        code_root: the directory holding the project's top-level packages.
        packages: top-level packages (directories with ``__init__.py``) or modules (``name.py``) of
            ``code_root`` to ship.
        requirements: what to pip-install (already without jobframework and what is provided).
        python_version: the runtime's, e.g. ``"3.14"``.
        architecture: ``x86_64`` or ``arm64``.
        job_modules: imported from the bundle at synth (a module that cannot be fails the synth).
        provided: distributions pruned after the install (default the runtime's and the layer's).
    """

    code_root: Path
    packages: tuple[str, ...]
    requirements: tuple[str, ...]
    python_version: str
    architecture: str = "x86_64"
    job_modules: tuple[str, ...] = ()
    provided: frozenset[str] = field(default_factory=provided_names)

    def key(self) -> str:
        """The content hash of the bundle (its cache key and its CDK asset hash)."""
        digest = hashlib.sha256()
        header = {
            "format": FORMAT,
            "python": self.python_version,
            "platforms": PLATFORMS[self.architecture],
            "requirements": sorted(self.requirements),
            "provided": sorted(self.provided),
            "job_modules": list(self.job_modules),
            "framework": _framework_version(),
        }
        digest.update(json.dumps(header, sort_keys=True).encode())
        for path in local_requirement_paths(self.requirements):  # (a wheel rebuilt at the same version)
            if path.is_dir():
                _hash_tree(digest, f"req/{path.name}", path)
            elif path.is_file():
                digest.update(f"req/{path.name}".encode())
                digest.update(hashlib.sha256(path.read_bytes()).digest())
        for package in self.packages:
            _hash_tree(digest, f"pkg/{package}", _package_path(self.code_root, package))
        _hash_tree(digest, "jobframework", _framework_dir(), skip_top=FRAMEWORK_EXCLUDED)
        return digest.hexdigest()


def cache_root() -> Path:
    """``$JF_BUNDLE_CACHE``, else ``$XDG_CACHE_HOME/jobframework/lambda``, else ``~/.cache/...``."""
    if os.environ.get(ENV_CACHE):
        return Path(os.environ[ENV_CACHE])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "jobframework" / "lambda"


def build_bundle(spec: BundleSpec, cache: Path | None = None) -> Path:
    """The bundle directory of ``spec``, built once per key and then reused; its job modules checked.

    Raises:
        ConfigurationError: a package is missing from the code root, pip cannot install a requirement
            for the platform, or a job module cannot be imported from the bundle (naming it).
    """
    cache = cache or cache_root()
    key = spec.key()
    bundle = cache / key
    if not (cache / f"{key}.ok").is_file():
        if not bundle.is_dir():
            _build_into(spec, bundle)
        check_job_modules(bundle, spec.job_modules, python_version=spec.python_version)
        (cache / f"{key}.ok").write_text("import check passed\n")
    return bundle


def python_code(spec: BundleSpec, cache: Path | None = None) -> lambda_.Code:
    """The Lambda code of ``spec`` as a CDK asset, bundled locally (never with Docker)."""
    bundle = build_bundle(spec, cache)
    return lambda_.Code.from_asset(
        str(spec.code_root),
        asset_hash=spec.key(),
        asset_hash_type=AssetHashType.CUSTOM,
        bundling=BundlingOptions(
            image=DockerImage.from_registry("public.ecr.aws/sam/build-python" + spec.python_version),
            local=_CopyBundle(bundle),
        ),
    )


@jsii.implements(ILocalBundling)
class _CopyBundle:
    """CDK's local bundling: copy the prepared bundle into the asset's output directory."""

    def __init__(self, bundle: Path) -> None:
        self._bundle = bundle

    def try_bundle(self, output_dir: str, *_args: Any, **_options: Any) -> bool:
        ignore = shutil.ignore_patterns(*IGNORED_DIRS, *(f"*{s}" for s in IGNORED_SUFFIXES))
        shutil.copytree(self._bundle, output_dir, dirs_exist_ok=True, symlinks=False, ignore=ignore)
        return True


def _build_into(spec: BundleSpec, bundle: Path) -> None:
    bundle.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{bundle.name[:12]}-", dir=bundle.parent))
    try:
        if spec.requirements:
            _pip_install(spec, work)
            _prune(work, spec.provided)
        for package in spec.packages:
            _copy(_package_path(spec.code_root, package), work / _package_path(spec.code_root, package).name)
        _copy(_framework_dir(), work / "jobframework", skip_top=FRAMEWORK_EXCLUDED)
        try:
            work.rename(bundle)
        except OSError:
            if not bundle.is_dir():  # another process finished the same key first: theirs is identical
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _pip_install(spec: BundleSpec, target: Path) -> None:
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    command += ["--no-input", "--target", str(target), "--implementation", "cp"]
    command += ["--python-version", spec.python_version, "--only-binary=:all:", "--upgrade"]
    for platform in PLATFORMS[spec.architecture]:
        command += ["--platform", platform]
    result = subprocess.run(
        [*command, *spec.requirements], capture_output=True, text=True, timeout=PIP_TIMEOUT, check=False
    )
    if result.returncode != 0:
        said = (result.stderr or result.stdout).strip().splitlines()[-6:]
        raise ConfigurationError(
            f"could not install the Lambda dependencies {', '.join(spec.requirements)} for "
            f"{PLATFORMS[spec.architecture][0]}, CPython {spec.python_version}: each must be available "
            f"as a wheel for that platform (no source builds without Docker). pip said: {' | '.join(said)}"
        )


def _prune(target: Path, provided: frozenset[str]) -> None:
    """Remove the provided distributions (by their RECORD), scripts and byte code from ``target``."""
    from packaging.utils import canonicalize_name

    for dist_info in sorted(target.glob("*.dist-info")):
        dist = metadata.Distribution.at(dist_info)
        if canonicalize_name(dist.metadata["Name"] or "") not in provided:
            continue
        for file in dist.files or ():
            path = (target / str(file)).resolve()
            if path.is_relative_to(target.resolve()) and path.is_file():
                path.unlink()
        shutil.rmtree(dist_info, ignore_errors=True)
    shutil.rmtree(target / "bin", ignore_errors=True)
    for directory in sorted((p for p in target.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        if directory.name in IGNORED_DIRS:
            shutil.rmtree(directory, ignore_errors=True)
        elif directory.exists() and not any(directory.iterdir()):
            directory.rmdir()


def check_job_modules(bundle: Path, job_modules: Sequence[str], *, python_version: str) -> None:
    """Import each job module from ``bundle`` in a fresh interpreter that sees only the bundle, the
    standard library and the provided distributions (as the function would).

    With another Python here than the runtime's, a compiled extension built for the runtime cannot
    load here: a package of the bundle that fails so (a missing module whose extension file is in the
    package, or a syntax error in one of its files) is stood in for by a stub, and the check goes on;
    a module that is simply absent still fails, wherever it comes in the job modules.

    Raises:
        ConfigurationError: a job module is not in the bundle or cannot be imported from it.
    """
    if not job_modules:
        return
    same_python = f"{sys.version_info.major}.{sys.version_info.minor}" == python_version
    with tempfile.TemporaryDirectory(prefix="jf-provided-") as view:
        _link_provided(Path(view))
        other_python = "0" if same_python else "1"
        result = subprocess.run(
            [
                sys.executable,
                "-I",
                "-S",
                "-B",
                "-c",
                _CHECK_SCRIPT,
                str(bundle),
                view,
                other_python,
                *job_modules,
            ],
            capture_output=True,
            text=True,
            timeout=CHECK_TIMEOUT,
            check=False,
            env={"PATH": os.environ.get("PATH", ""), "AWS_DEFAULT_REGION": "us-east-1"},
        )
    try:
        outcome = json.loads(result.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        outcome = {"module": job_modules[0], "error": "ImportError", "message": result.stderr.strip()[-500:]}
    if outcome.get("ok"):
        return
    where = f" (at {outcome['where']})" if outcome.get("where") else ""
    raise ConfigurationError(
        f"job module {outcome['module']} cannot be imported from the Lambda asset ({bundle}): "
        f"{outcome['error']}: {outcome['message']}{where}. Ship its package (packages=, code_root=) or "
        "install it (requirements=), and declare what it imports in the project's dependencies"
    )


_CHECK_SCRIPT = """
import importlib, json, os, sys, types
bundle, view, other_python, modules = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4:]
sys.path[:0] = [bundle, view]


class Stub(types.ModuleType):
    # A package built for the runtime's Python: whatever the job module takes from it.
    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return Stub(self.__name__ + "." + attr)

    def __call__(self, *args, **kwargs):
        return self


def runtime_only(exc):
    # The top-level package of the bundle that cannot load on this Python, if that is why.
    if not other_python:
        return None
    if isinstance(exc, SyntaxError) and exc.filename and exc.filename.startswith(bundle + os.sep):
        return os.path.relpath(exc.filename, bundle).split(os.sep)[0].removesuffix(".py")
    missing = getattr(exc, "name", None) if isinstance(exc, ImportError) else None
    if not missing:
        return None
    top = missing.split(".")[0]
    package = os.path.join(bundle, top)
    stem = missing.rsplit(".", 1)[-1] + "."
    for root, _, files in os.walk(package):
        if any(f.startswith(stem) and f.endswith(".so") for f in files):
            return top
    return None


for name in ["jobframework.consumer", *modules]:
    while True:
        try:
            importlib.import_module(name)
            break
        except BaseException as exc:
            top = runtime_only(exc)
            if top and not isinstance(sys.modules.get(top), Stub):
                for loaded in [m for m in sys.modules if m == top or m.startswith(top + ".")]:
                    del sys.modules[loaded]
                sys.modules[top] = Stub(top)
                continue
            missing = getattr(exc, "name", None) if isinstance(exc, ImportError) else None
            where, tb = None, exc.__traceback__  # the last line of the team's code it went through
            ours = os.path.join(bundle, "jobframework") + os.sep
            while tb is not None:
                path = tb.tb_frame.f_code.co_filename
                if path.startswith(bundle + os.sep) and not path.startswith(ours):
                    where = os.path.relpath(path, bundle) + ":" + str(tb.tb_lineno)
                tb = tb.tb_next
            print(json.dumps({"module": name, "error": type(exc).__name__, "message": str(exc),
                              "missing": missing, "where": where}))
            sys.exit(0)
print(json.dumps({"ok": True}))
"""


def _link_provided(view: Path) -> None:
    """Symlink the top-level entries of the installed provided distributions into ``view``."""
    for name in sorted(provided_names()):
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        for top in {Path(str(f)).parts[0] for f in dist.files or () if not str(f).startswith("..")}:
            source = Path(str(dist.locate_file(top)))
            if top not in IGNORED_DIRS and top != "bin" and source.exists() and not (view / top).exists():
                (view / top).symlink_to(source)


def _framework_dir() -> Path:
    return Path(jobframework.__file__).resolve().parent


def _framework_version() -> str:
    try:
        return metadata.version("jobframework")
    except metadata.PackageNotFoundError:
        return "unknown"


def _package_path(code_root: Path, package: str) -> Path:
    directory, module = code_root / package, code_root / f"{package}.py"
    if (directory / "__init__.py").is_file():
        return directory
    if module.is_file():
        return module
    raise ConfigurationError(
        f"package {package} is not under the code root {code_root} (no {package}/__init__.py and no "
        f"{package}.py): set code_root= to the directory that holds it (e.g. src/), or fix packages="
    )


def _files(root: Path, skip_top: Iterable[str] = ()) -> list[Path]:
    if root.is_file():
        return [root]
    skipped = set(skip_top)
    found = []
    for path in root.rglob("*"):
        relative = path.relative_to(root).parts
        if relative[0] in skipped or any(part in IGNORED_DIRS for part in relative):
            continue
        if path.is_file() and not path.name.endswith(IGNORED_SUFFIXES):
            found.append(path)
    return sorted(found)


def _hash_tree(digest: Any, label: str, root: Path, skip_top: Iterable[str] = ()) -> None:
    for path in _files(root, skip_top):
        relative = path.name if root.is_file() else path.relative_to(root).as_posix()
        digest.update(f"\0{label}/{relative}\0".encode())
        digest.update(path.read_bytes())


def _copy(source: Path, destination: Path, skip_top: Iterable[str] = ()) -> None:
    if source.is_file():
        shutil.copy2(source, destination)
        return
    for path in _files(source, skip_top):
        target = destination / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
