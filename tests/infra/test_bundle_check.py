"""The synth's import check of the job modules from the Lambda asset, when the runtime's Python is not
this one: a compiled extension built for the runtime is stood in for, and the check goes on."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobframework.cdk.bundling import check_job_modules
from jobframework.errors import ConfigurationError

RUNTIME = "3.14"  # the Lambda runtime's Python: not this one, so runtime-built extensions cannot load here


def _bundle(root: Path, jobs: str) -> Path:
    """An asset with the framework, a package whose compiled core is built for the runtime only, and a
    job module ``app.jobs`` of ``jobs``."""
    import shutil

    import jobframework

    bundle = root / "asset"
    shutil.copytree(Path(jobframework.__file__).parent, bundle / "jobframework")
    (bundle / "fastjson").mkdir()
    (bundle / "fastjson" / "__init__.py").write_text("from .core import dumps\n")
    (bundle / "fastjson" / "core.cpython-314-x86_64-linux-gnu.so").write_bytes(b"\x7fELF")
    (bundle / "app").mkdir()
    (bundle / "app" / "__init__.py").write_text("")
    (bundle / "app" / "jobs.py").write_text(jobs)
    return bundle


def test_a_runtime_built_extension_does_not_fail_the_check(tmp_path):
    bundle = _bundle(tmp_path, "import fastjson\nfrom fastjson import dumps\nVALUE = dumps({})\n")
    check_job_modules(bundle, ["app.jobs"], python_version=RUNTIME)


def test_a_module_missing_after_a_runtime_built_extension_still_fails_the_check(tmp_path):
    """The check stopped at the extension it could not load and passed: an undeclared package imported
    after it shipped a function that could not start."""
    bundle = _bundle(tmp_path, "import fastjson\nimport yaml_not_shipped\n")
    with pytest.raises(ConfigurationError, match=r"app\.jobs cannot be imported .*yaml_not_shipped"):
        check_job_modules(bundle, ["app.jobs"], python_version=RUNTIME)
