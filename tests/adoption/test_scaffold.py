"""`jf new PATH` as a command: what it writes, and what it refuses (writing nothing)."""

from __future__ import annotations

import importlib.util
import json
import os
import tarfile
import tomllib
from pathlib import Path

from typer.testing import CliRunner

from jobframework.cli import app
from jobframework.cli.errors import EXIT_USAGE
from jobframework.cli.new import framework_requirement


def test_jf_new_writes_a_project_named_after_its_directory(tmp_path):
    result = CliRunner().invoke(app, ["new", str(tmp_path / "billing-service")])
    assert result.exit_code == 0, result.output
    root = tmp_path / "billing-service"
    # where the jobs are, from where jf new ran (it said billing_service/jobs.py: a trial looked there)
    assert f"the jobs are in {root / 'billing_service' / 'jobs.py'}" in result.stdout
    written = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    assert written == [
        ".gitignore",
        "README.md",
        "app.py",
        "billing_service/__init__.py",
        "billing_service/jobs.py",
        "cdk.json",
        "pyproject.toml",
        "tests/__init__.py",
        "tests/conftest.py",
        "tests/test_jobs.py",
    ]
    jobs = (root / "billing_service" / "jobs.py").read_text()
    assert '"billing_service.greet"' in jobs and "key=lambda" in jobs
    assert 'Schedule("cron(0 3 * * ? *)"' in jobs
    # The jobs log through ctx.logger (the job's keys, and `jf dev` shows it), not a module logger.
    assert "ctx.logger.info(" in jobs and "getLogger" not in jobs
    app_py = (root / "app.py").read_text()
    # The job modules are named once, in pyproject.toml: app.py, the tests and jf dev read them there.
    assert "job_modules" not in app_py and 'app_name="billing-service"' in app_py
    assert "jf dev --app billing-service" in (root / "README.md").read_text()
    pyproject = (root / "pyproject.toml").read_text()
    assert f'"{framework_requirement()}",' in pyproject  # this jobframework, from where it was installed
    assert f'"{framework_requirement("[cdk,local]")}", "pytest>=8"' in pyproject
    assert tomllib.loads(pyproject)["tool"]["jobframework"] == {"jobs": ["billing_service.jobs"]}
    conftest = (root / "tests" / "conftest.py").read_text()
    assert "import billing_service" not in conftest
    assert 'pytest_plugins = ["jobframework.testing"]' in conftest
    compile(jobs, "jobs.py", "exec")
    compile(app_py, "app.py", "exec")
    compile(conftest, "conftest.py", "exec")


def test_the_scaffolds_packaging_takes_a_second_package_the_team_adds_and_not_the_tests(tmp_path):
    """`pip install .` of the project (another service that depends on it, a container image) gets every
    package; an include of the first package alone left out a `shared/` the jobs import."""
    from setuptools import find_packages  # type: ignore[import-untyped]

    root = tmp_path / "billing-service"
    assert CliRunner().invoke(app, ["new", str(root)]).exit_code == 0
    (root / "shared").mkdir()
    (root / "shared" / "__init__.py").write_text("")
    found = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    packages = find_packages(
        str(root), include=found.get("include", ("*",)), exclude=found.get("exclude", ())
    )
    assert sorted(packages) == ["billing_service", "shared"]


def _shipped_flags() -> dict[str, object]:
    """The recommended flags in the installed aws-cdk-lib's jsii assembly, read here on their own."""
    spec = importlib.util.find_spec("aws_cdk")  # where it is (importing it would start the jsii runtime)
    assert spec is not None and spec.origin is not None
    [tarball] = (Path(spec.origin).parent / "_jsii").glob("aws-cdk-lib@*.jsii.tgz")
    with tarfile.open(tarball) as archive:
        member = archive.extractfile("package/recommended-feature-flags.json")
        assert member is not None
        return dict(json.load(member))


def test_jf_new_writes_aws_cdk_libs_recommended_feature_flags_into_cdk_json(tmp_path):
    """As `cdk init` does: with the flags set, `cdk synth` does not list each unset one."""
    result = CliRunner().invoke(app, ["new", str(tmp_path / "svc")])
    assert result.exit_code == 0, result.output
    cdk_json = json.loads((tmp_path / "svc" / "cdk.json").read_text())
    assert cdk_json["app"] == "python3 app.py" and cdk_json["watch"] == {"include": ["app.py", "svc/**"]}
    shipped = _shipped_flags()
    assert len(shipped) > 50 and cdk_json["context"] == shipped
    assert cdk_json["context"]["@aws-cdk/core:checkSecretUsage"] is True


def test_jf_new_without_aws_cdk_lib_writes_the_flags_jobframework_ships(tmp_path, monkeypatch):
    """`jf new` from a jf installed without the cdk extra: its copy of the flags (aws-cdk-lib 2.275.0)."""
    from jobframework.cli import feature_flags

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "aws_cdk" else find_spec(name, *a)
    )
    assert feature_flags.recommended_feature_flags()[1] == "jobframework's copy (aws-cdk-lib 2.275.0)"
    result = CliRunner().invoke(app, ["new", str(tmp_path / "svc")])
    assert result.exit_code == 0, result.output
    context = json.loads((tmp_path / "svc" / "cdk.json").read_text())["context"]
    assert context == json.loads(feature_flags.FALLBACK.read_text())
    assert context["@aws-cdk/core:target-partitions"] == ["aws", "aws-cn"] and len(context) == 89


def test_jf_new_refuses_a_non_empty_directory_and_writes_nothing(tmp_path):
    (tmp_path / "svc").mkdir()
    (tmp_path / "svc" / "notes.txt").write_text("mine")
    result = CliRunner().invoke(app, ["new", str(tmp_path / "svc")])
    assert result.exit_code == EXIT_USAGE
    assert "already exists and holds files of its own" in result.output
    assert [p.name for p in (tmp_path / "svc").iterdir()] == ["notes.txt"]


def test_jf_new_writes_into_a_directory_holding_only_its_venv_and_git_keeping_their_files(
    tmp_path, monkeypatch
):
    """`jf new .` from the virtualenv jobframework was installed into, in a fresh repository with the
    README and .gitignore its host made: theirs are kept, the .gitignore gets what it lacks, and the
    next steps use the venv that is there."""
    project = tmp_path / "invoices"
    (project / "venv" / "bin").mkdir(parents=True)
    (project / "venv" / "bin" / "python").write_text("")
    (project / ".git").mkdir()
    (project / ".gitignore").write_text("secrets/\n__pycache__\n")
    (project / "README.md").write_text("# invoices\n")
    monkeypatch.chdir(project)
    result = CliRunner().invoke(app, ["new", "."])
    assert result.exit_code == 0, result.output
    assert (project / "invoices" / "jobs.py").is_file() and (project / "app.py").is_file()
    assert (project / "README.md").read_text() == "# invoices\n"  # the team's own, not written over
    ignored = (project / ".gitignore").read_text().splitlines()
    assert ignored[:2] == ["secrets/", "__pycache__"] and ignored.count("__pycache__/") == 0
    assert {".venv/", "venv/", "cdk.out/", "node_modules/"} <= set(ignored)  # nothing of theirs committed
    assert "cd " not in result.output and "python3 -m venv" not in result.output
    assert 'venv/bin/pip install -e ".[dev]"' in result.output


def test_jf_new_asks_for_a_package_when_the_directory_name_is_not_one(tmp_path):
    result = CliRunner().invoke(app, ["new", str(tmp_path / "2fast")])
    assert result.exit_code == EXIT_USAGE
    assert "pass --package NAME" in result.output
    assert not (tmp_path / "2fast").exists()
    ok = CliRunner().invoke(app, ["new", str(tmp_path / "2fast"), "--package", "fast"])
    assert ok.exit_code == 0, ok.output
    assert (tmp_path / "2fast" / "fast" / "jobs.py").is_file()
    spaced = CliRunner().invoke(app, ["new", str(tmp_path / "my service"), "--package", "my_service"])
    assert spaced.exit_code == 0, spaced.output
    assert f"cd '{tmp_path / 'my service'}'" in spaced.output  # a next step a shell can run as printed


def test_jf_new_refuses_a_package_that_would_shadow_the_library_or_the_standard_library(tmp_path):
    for args, shadowed in (
        (["--package", "jobframework"], "the installed package"),
        (["--package", "pydantic"], "the installed package"),
        ([], "the standard library's module"),  # a directory named email gives the package email
    ):
        target = tmp_path / ("email" if not args else "svc")
        result = CliRunner().invoke(app, ["new", str(target), *args])
        assert result.exit_code == EXIT_USAGE, result.output
        assert f"would shadow {shadowed} of the same name" in result.output
        assert "pass --package NAME with another name" in result.output
        assert not target.exists()


def test_jf_new_takes_a_package_whose_name_is_only_a_directory_on_the_path(tmp_path, monkeypatch):
    """Run from the project's parent with ``python -m``, its empty directory is on the path (a
    namespace package): not an installed package the new one would shadow."""
    (tmp_path / "hooks").mkdir()
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["new", "hooks"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "hooks" / "hooks" / "jobs.py").is_file()


def test_jf_new_says_when_the_project_depends_on_a_local_path(tmp_path, monkeypatch):
    """A path install makes a `file://` requirement, which a teammate or CI cannot install: said on stderr."""
    import jobframework.cli.new as new_module

    monkeypatch.setattr(
        new_module, "framework_requirement", lambda extras="": f"jobframework{extras} @ file:///src"
    )
    result = CliRunner().invoke(app, ["new", str(tmp_path / "svc")])
    assert result.exit_code == 0, result.output
    assert "a teammate or CI needs a git URL or a wheel there instead" in result.stderr
    monkeypatch.setattr(new_module, "framework_requirement", lambda extras="": f"jobframework{extras}>=0.1")
    quiet = CliRunner().invoke(app, ["new", str(tmp_path / "svc2")])
    assert "teammate" not in quiet.stderr


def test_a_new_projects_jobs_and_tests_pass_mypy_strict(tmp_path):
    """A trial's team ran `mypy --strict` on a fresh `jf new` project: four untyped test functions
    (the fixtures' types are in jobframework.testing)."""
    import os
    import subprocess
    import sys

    assert CliRunner().invoke(app, ["new", str(tmp_path / "shop")]).exit_code == 0
    root = tmp_path / "shop"
    repo = Path(__file__).resolve().parents[2]  # (an editable install hides the package from mypy)
    env = {**os.environ, "MYPYPATH": str(repo)}
    # (the package as an installed one is to mypy: its own errors are not the project's to report)
    (tmp_path / "mypy.ini").write_text(
        "[mypy]\nstrict = True\n\n[mypy-jobframework.*]\nignore_errors = True\n"
    )
    checked = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(tmp_path / "mypy.ini"),
            "--no-incremental",
            "shop",
            "tests",
        ],
        check=False,
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_jf_new_says_how_to_hide_jsiis_banner_on_a_node_past_its_end_of_life(tmp_path, monkeypatch):
    """A new user's `python app.py` printed jsii's Node 20 banner (as byte strings), and nothing of
    jf new's had named the variable that hides it."""
    import jobframework.cli.new as new_module

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    node = bin_dir / "node"
    node.write_text("#!/bin/sh\necho v20.20.2\n")
    node.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv(new_module.SILENCE_NODE_EOL, raising=False)
    result = CliRunner().invoke(app, ["new", str(tmp_path / "svc")])
    assert result.exit_code == 0, result.output
    assert "export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 hides it" in result.stderr
    monkeypatch.setenv(new_module.SILENCE_NODE_EOL, "18,20")  # hidden already (jsii takes a list)
    assert "Node.js" not in CliRunner().invoke(app, ["new", str(tmp_path / "svc2")]).stderr
    node.write_text("#!/bin/sh\necho v23.1.0\n")  # an odd release: short-lived, past its end of life
    assert "export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=23" in (
        CliRunner().invoke(app, ["new", str(tmp_path / "svc5")]).stderr
    )
    node.write_text("#!/bin/sh\necho v22.11.0\n")
    monkeypatch.delenv(new_module.SILENCE_NODE_EOL)
    assert "Node.js" not in CliRunner().invoke(app, ["new", str(tmp_path / "svc3")]).stderr
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    missing = CliRunner().invoke(app, ["new", str(tmp_path / "svc4")])
    assert "needs Node.js 22 or 24, and none is on PATH" in missing.stderr
