"""Job modules: named by JF_JOBS or --jobs, with errors that say what to set or install."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from jobframework.cli.base import require_jobs
from jobframework.cli.errors import CliError
from jobframework.errors import ConfigurationError
from jobframework.jobs import JobRegistry
from jobframework.modules import (
    configured_job_modules,
    import_job_modules,
    packages_hint,
    parse_job_modules,
)


def test_jf_jobs_is_a_comma_separated_list():
    assert configured_job_modules({"JF_JOBS": "a.jobs, b.jobs,,"}) == ["a.jobs", "b.jobs"]
    assert parse_job_modules("") == []


@pytest.mark.parametrize("environ", [{}, {"JF_JOBS": " , "}])
def test_no_job_modules_says_what_to_set(environ):
    with pytest.raises(ConfigurationError, match=r"set JF_JOBS.*--jobs"):
        configured_job_modules(environ)


def test_a_missing_module_is_named(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigurationError, match=r"job module 'nosuchsvc\.jobs' not found"):
        import_job_modules(["nosuchsvc.jobs"], cwd_importable=True)


def _package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, **modules: str) -> None:
    """A package ``name`` in ``tmp_path`` with ``modules`` (module name -> source), in the current
    directory (``sys.path`` restored after the test)."""
    package = tmp_path / name
    package.mkdir()
    (package / "__init__.py").write_text("")
    for module, source in modules.items():
        (package / f"{module}.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))


def test_a_missing_dependency_of_a_job_module_is_named(tmp_path, monkeypatch):
    _package(tmp_path, monkeypatch, "depsvc", jobs="import not_installed_dependency_xyz\n")
    missing = "imports 'not_installed_dependency_xyz', which is not installed"
    with pytest.raises(ConfigurationError, match=missing):
        import_job_modules(["depsvc.jobs"], cwd_importable=True)


def test_a_job_module_whose_code_raises_on_import_says_which_and_where(tmp_path, monkeypatch):
    """A trial's ``{}["STRIPE_KEY"]`` in a helper module printed only ``KeyError: 'STRIPE_KEY'``."""
    _package(
        tmp_path,
        monkeypatch,
        "cfgsvc",
        settings="import os\n\nKEY = os.environ['JF_NO_SUCH_SETTING_XYZ']\n",
        jobs="from cfgsvc import settings\n",
    )
    at = r"importing job module 'cfgsvc\.jobs' failed at cfgsvc/settings\.py:3: KeyError: 'JF_NO_SUCH"
    with pytest.raises(ConfigurationError, match=at):  # the project's line, not os.py's
        import_job_modules(["cfgsvc.jobs"], cwd_importable=True)


def test_the_current_directory_is_importable_when_asked(tmp_path, monkeypatch):
    _package(tmp_path, monkeypatch, "cwdsvc", jobs="LOADED = True\n")
    assert import_job_modules(["cwdsvc.jobs"], cwd_importable=True) == ["cwdsvc.jobs"]
    assert sys.modules["cwdsvc.jobs"].LOADED


def test_a_job_module_that_registers_no_job_is_warned_about(tmp_path, monkeypatch, caplog):
    """`--jobs opsapp` (the package, not `opsapp.jobs`) started a worker with no job at all: every
    message would be dead-lettered as an unknown type, and nothing said why."""
    _package(
        tmp_path,
        monkeypatch,
        "pkgsvc",
        jobs="from pydantic import BaseModel\nfrom jobframework import JobRegistry, job\n"
        "class P(BaseModel):\n    n: int\n"
        "@job('pkgsvc.run', registry=JobRegistry())\ndef run(p: P) -> None:\n    pass\n",
    )
    with caplog.at_level("WARNING", logger="jobframework.modules"):
        import_job_modules(["pkgsvc"], cwd_importable=True)
    assert [r.getMessage() for r in caplog.records] == [
        "job module 'pkgsvc' registered no @job (it is a package; its modules: pkgsvc.jobs): name the "
        "module that defines the jobs (a package's modules are not imported with it)"
    ]
    caplog.clear()
    with caplog.at_level("WARNING", logger="jobframework.modules"):
        import_job_modules(["pkgsvc.jobs"], cwd_importable=True)  # a job (of a registry of its own)
    assert caplog.records == []


def test_a_saga_module_whose_jobs_are_imported_already_is_not_warned_about(tmp_path, monkeypatch, caplog):
    _package(
        tmp_path,
        monkeypatch,
        "sagasvc",
        jobs="from pydantic import BaseModel\nfrom jobframework import JobRegistry, job\n"
        "registry = JobRegistry()\nclass P(BaseModel):\n    n: int\n"
        "@job('sagasvc.a', registry=registry)\ndef a(p: P) -> None:\n    pass\n",
        sagas="from jobframework.saga import saga, step\nfrom sagasvc import jobs\n"
        "flow = saga('sagasvc.flow', steps=[step(jobs.a)], registry=jobs.registry)\n",
    )
    with caplog.at_level("WARNING", logger="jobframework.modules"):
        import_job_modules(["sagasvc.jobs", "sagasvc.sagas"], cwd_importable=True)
    assert caplog.records == []


def test_the_synth_error_for_a_package_that_registered_no_job_names_its_modules(tmp_path, monkeypatch):
    """`job_modules=["invoices"]` failed the synth with "decorate your job functions with @job" where
    `jf dev --jobs invoices` named the package's modules."""
    _package(tmp_path, monkeypatch, "invsvc", jobs="X = 1\n", reports="Y = 2\n")
    import_job_modules(["invsvc", "invsvc.jobs"], cwd_importable=True)
    assert packages_hint(["invsvc", "invsvc.jobs", "never.imported"]) == (
        "; name the modules that define the jobs: invsvc (it is a package; its modules: invsvc.jobs, "
        "invsvc.reports)"
    )
    assert packages_hint(["invsvc.jobs"]) == ""


def test_jf_dev_says_once_that_a_package_registered_no_job(tmp_path, monkeypatch, caplog):
    """`jf dev --jobs invoices` printed a WARNING and then an error saying the same."""
    import jobframework.jobs

    _package(tmp_path, monkeypatch, "oncesvc", jobs="X = 1\n")
    monkeypatch.setattr(jobframework.jobs, "registry", JobRegistry())  # (no job of other tests)
    with pytest.raises(CliError, match=r"it is a package; its modules: oncesvc\.jobs"):
        require_jobs(["oncesvc"])
    assert "registered no @job" not in caplog.text


def test_consumer_is_the_function_whatever_was_imported_first(tmp_path: Path):
    """`from jobframework import consumer` is callable even after `import jobframework.consumer`."""
    script = (
        "import jobframework.consumer\n"
        "from jobframework import consumer\n"
        "assert callable(consumer), type(consumer)\n"
        "import jobframework\n"
        "assert callable(jobframework.consumer)\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, cwd=tmp_path)


def test_the_worker_entry_point_without_jf_jobs_fails_at_init_saying_what_to_set(tmp_path: Path):
    env = {"PATH": "/usr/bin:/bin", "AWS_DEFAULT_REGION": "us-east-1", "POWERTOOLS_METRICS_DISABLED": "true"}
    proc = subprocess.run(
        [sys.executable, "-c", "import jobframework.entrypoints.worker"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode != 0
    assert "ConfigurationError: no job modules named: set JF_JOBS" in proc.stderr


def test_jobs_takes_a_comma_separated_list_as_jf_jobs_does(tmp_path, monkeypatch):
    """`jf dev --jobs a,b` (the form `jf dev` prints as JF_JOBS) and `--jobs a --jobs b` load both."""
    from jobframework.cli.base import load_jobs

    _package(tmp_path, monkeypatch, "twosvc", jobs="", more="")
    assert load_jobs(["twosvc.jobs,twosvc.more"]) == ["twosvc.jobs", "twosvc.more"]
    assert load_jobs(["twosvc.jobs", "twosvc.more"]) == ["twosvc.jobs", "twosvc.more"]


@pytest.mark.parametrize("command", [["dev"], ["worker", "--queues", "default"]])
def test_jf_dev_and_jf_worker_refuse_job_modules_that_register_no_job(tmp_path, command):
    """`jf dev --jobs pkgsvc` (the package, its jobs in pkgsvc.jobs) ran with no job at all."""

    (tmp_path / "pkgsvc").mkdir()
    (tmp_path / "pkgsvc" / "__init__.py").write_text("")
    (tmp_path / "pkgsvc" / "jobs.py").write_text("RAN = True\n")
    ran = subprocess.run(
        [sys.executable, "-m", "jobframework.cli", *command, "--jobs", "pkgsvc"],
        cwd=tmp_path,
        env={**os.environ, "COLUMNS": "200", "JF_JOBS": ""},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert (
        "the job modules pkgsvc registered no @job (it is a package; its modules: pkgsvc.jobs)" in ran.stderr
    )
