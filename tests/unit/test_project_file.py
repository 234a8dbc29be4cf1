"""The job modules named once in a project's pyproject.toml (``[tool.jobframework] jobs``), where a
trial named them in three places (app.py's job_modules=, the conftest's imports and jf dev --jobs)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from jobframework.cli.base import require_jobs
from jobframework.errors import ConfigurationError
from jobframework.jobs import JobRegistry
from jobframework.modules import configured_job_modules
from jobframework.project_file import project_jobs

PYPROJECT = '[project]\nname = "svc"\n\n[tool.jobframework]\njobs = {jobs}\n'


def _project(root: Path, jobs: str | None = None, package: str = "projsvc") -> Path:
    (root / package).mkdir(parents=True)
    (root / package / "__init__.py").write_text("")
    (root / package / "jobs.py").write_text(
        "from pydantic import BaseModel\nfrom jobframework import job\n"
        "class P(BaseModel):\n    n: int\n"
        f"@job('{package}.run')\ndef run(p: P) -> int:\n    return p.n + 1\n"
    )
    (root / "pyproject.toml").write_text(PYPROJECT.format(jobs=jobs or f'["{package}.jobs"]'))
    return root


def test_the_nearest_project_file_at_or_above_a_directory_names_the_modules(tmp_path):
    _project(tmp_path, '["a.jobs", "b.reports, b.sagas"]')
    (tmp_path / "src" / "deep").mkdir(parents=True)
    found = project_jobs(tmp_path / "src" / "deep")
    assert found is not None and found.modules == ["a.jobs", "b.reports", "b.sagas"]
    assert found.path == tmp_path / "pyproject.toml"
    # A project file of its own below it is the project's: the parent's list is not read past it.
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "pyproject.toml").write_text('[project]\nname = "other"\n')
    assert project_jobs(tmp_path / "other") is None


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('[tool.jobframework]\njobs = "a.jobs"\n', None),  # (one module as a string is taken)
        ("[tool.jobframework]\njobs = 3\n", r"jobs must be a list of module names, got 3; e\.g\."),
        ("[tool.jobframework]\njobs = []\n", r"jobs is empty; name your job modules"),
        ('[tool.jobframework]\njob = ["a.jobs"]\n', r"takes jobs \(a list of job modules\), not job;"),
        ("[tool.jobframework\n", r"is not valid TOML"),
        ('[tool.jobframework]\njobs = ["my svc.jobs"]\n', r"names 'my svc\.jobs', not a module name"),
    ],
)
def test_a_bad_project_file_says_what_to_write(tmp_path, text, said):
    (tmp_path / "pyproject.toml").write_text(text)
    if said is None:
        found = project_jobs(tmp_path)
        assert found is not None and found.modules == ["a.jobs"]
        return
    with pytest.raises(ConfigurationError, match=said) as raised:
        project_jobs(tmp_path)
    assert str(tmp_path / "pyproject.toml") in str(raised.value)


def test_jf_jobs_wins_over_the_project_file_and_none_says_where_to_name_them(tmp_path):
    _project(tmp_path)
    assert configured_job_modules({}, project_dir=tmp_path) == ["projsvc.jobs"]
    assert configured_job_modules({"JF_JOBS": "x.jobs"}, project_dir=tmp_path) == ["x.jobs"]
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "svc"\n')
    with pytest.raises(ConfigurationError, match=r"pyproject\.toml \(\[tool\.jobframework\] jobs = "):
        configured_job_modules({}, project_dir=tmp_path)
    with pytest.raises(ConfigurationError):  # a Lambda's handler reads JF_JOBS only (the stack sets it)
        configured_job_modules({})


def test_jf_loads_the_project_files_modules_without_jobs(tmp_path, monkeypatch):
    import jobframework.jobs

    _project(tmp_path, package="clisvc")
    (tmp_path / "deploy").mkdir()
    monkeypatch.chdir(tmp_path / "deploy")  # (a subdirectory of the project: its modules import still)
    monkeypatch.delenv("JF_JOBS", raising=False)
    monkeypatch.setattr(jobframework.jobs, "registry", JobRegistry())  # (no job of other tests)
    monkeypatch.setattr(sys, "path", list(sys.path))
    assert require_jobs(None) == ["clisvc.jobs"]
    assert [j.name for j in jobframework.jobs.registry] == ["clisvc.run"]


def test_the_pytest_plugin_imports_the_project_files_modules_for_a_test_run_alone(tmp_path):
    """A test that runs a job by name needs it registered: the conftest imported it by hand."""
    _project(tmp_path, package="plugsvc")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "conftest.py").write_text('pytest_plugins = ["jobframework.testing"]\n')
    (tmp_path / "tests" / "test_by_name.py").write_text(
        "from jobframework.jobs import registry\nfrom jobframework.testing import run_inline\n\n"
        "def test_by_name():\n    found = registry.find('plugsvc.run')\n"
        "    assert found is not None and run_inline(found, {'n': 1}) == 2\n"
    )
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "tests"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    # A module the list names that does not import stops the session with the reason, not a traceback.
    (tmp_path / "pyproject.toml").write_text(PYPROJECT.format(jobs='["plugsvc.nosuch"]'))
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode != 0
    assert "jobframework.testing: job module 'plugsvc.nosuch' not found" in ran.stderr, (
        ran.stdout + ran.stderr
    )
    assert "Traceback" not in ran.stderr
