"""A team adopts jobframework (issue 11): the wheel in a fresh venv outside the repository, `jf new`, a job
needing a third-party package, a synth, and the synthesized worker handler run from the asset folder
by a Python holding only boto3, Powertools and pydantic (what the Lambda runtime and layer provide).

Slow (a wheel build, two venvs, a synth, pip downloads of the job's dependency for the Lambda
platform), so it is one test, marked ``adoption`` (``pytest -m adoption`` selects it). The venvs are
made with uv, pinned to this environment's versions, so their installs come from uv's cache.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.adoption

ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).with_name("drive_asset.py")
RUNTIME_PROVIDED = ("boto3", "aws-lambda-powertools", "pydantic")
"""What the runtime venv holds: the Lambda runtime's boto3, the Powertools layer's Powertools and
pydantic (and their own dependencies)."""
SIGNUP_JOB = """

class Signup(BaseModel):
    email: EmailStr  # needs email-validator: the project declares pydantic[email]
    outbox: str


@job("signup.welcome")
def welcome(signup: Signup, ctx: JobContext) -> None:
    from email_validator import validate_email

    normalized = validate_email(signup.email, check_deliverability=False).normalized
    Path(signup.outbox).write_text(f"welcome {normalized} ({ctx.job_id})")
"""


def _uv() -> list[str]:
    """The uv tasks.sh found (on PATH, else the system python's module), else the one it installs into
    the test venv (CI puts no venv on PATH)."""
    found = shutil.which("uv")
    beside = Path(sys.executable).with_name("uv")
    if found:
        return [found]
    system = shutil.which("python3")
    probe = [system, "-m", "uv", "--version"] if system else None
    if probe and subprocess.run(probe, check=False, capture_output=True).returncode == 0:
        return [str(system), "-m", "uv"]
    if beside.exists():
        return [str(beside)]
    return [sys.executable, "-m", "uv"]


def _run(*command: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        [str(c) for c in command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert result.returncode == 0, (
        f"{' '.join(map(str, command))}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    )
    return result.stdout


def _constraints(tmp: Path) -> Path:
    """This environment's versions (not jobframework itself), so that the fresh venvs resolve to them."""
    frozen = _run(*_uv(), "pip", "freeze", "--python", sys.executable)
    pins = [line for line in frozen.splitlines() if "==" in line and not line.startswith("jobframework")]
    path = tmp / "constraints.txt"
    path.write_text("\n".join(pins) + "\n")
    return path


def test_a_project_from_jf_new_deploys_its_jobs_and_their_dependencies(tmp_path):
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "JF_BUNDLE_CACHE": str(tmp_path / "bundles"),  # a real bundle: pip --platform, then the check
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        "JSII_RUNTIME_PACKAGE_CACHE_ROOT": os.environ.get(
            "JSII_RUNTIME_PACKAGE_CACHE_ROOT", str(ROOT / ".jsii-cache")
        ),
    }
    for name in ("VIRTUAL_ENV", "PYTHONPATH", "JF_JOBS"):
        env.pop(name, None)
    uv = _uv()
    constraints = _constraints(tmp_path)

    # The wheel installs jobframework alone, into a fresh venv outside the repository.
    _run(*uv, "build", "--wheel", "--quiet", "--out-dir", tmp_path / "dist", ROOT, env=env)
    [wheel] = (tmp_path / "dist").glob("jobframework-*.whl")
    with zipfile.ZipFile(wheel) as built:  # (a type checker reads an installed package only with it)
        assert "jobframework/py.typed" in built.namelist()
    tools = tmp_path / "tools"
    _run(*uv, "venv", "--quiet", tools, env=env)
    python = tools / "bin" / "python"
    _run(*uv, "pip", "install", "--quiet", "--python", python, "-c", constraints,
         f"{wheel}[cdk,local]", "pytest", "email-validator", env=env)  # fmt: skip
    site = Path(
        _run(
            python,
            "-c",
            "import jobframework, pathlib; print(pathlib.Path(jobframework.__file__).parents[1])",
        )
    )
    assert not (site / "stacks").exists() and not (site / "handlers").exists()

    # jf new, then a job needing a third-party package, declared in the project's dependencies.
    project = tmp_path / "work" / "signup-service"
    _run(tools / "bin" / "jf", "new", project, env=env)
    jobs = project / "signup_service" / "jobs.py"
    source = jobs.read_text().replace(
        "from pydantic import BaseModel",
        "from pathlib import Path\n\nfrom pydantic import BaseModel, EmailStr",
    )
    jobs.write_text(source + SIGNUP_JOB)
    pyproject = project / "pyproject.toml"
    declared = pyproject.read_text()
    assert f'"jobframework @ {wheel.as_uri()}",' in declared  # where this jobframework came from
    pyproject.write_text(
        declared.replace("dependencies = [\n", 'dependencies = [\n    "pydantic[email]>=2.7",\n')
    )

    # The project's own tests pass, and it synthesizes offline (what `cdk synth` runs: cdk.json's app).
    _run(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", cwd=project, env=env)
    app_command = json.loads((project / "cdk.json").read_text())["app"]
    assert app_command == "python3 app.py"
    outdir = tmp_path / "cdk.out"
    _run(python, "app.py", cwd=project, env={**env, "CDK_OUTDIR": str(outdir)})
    [template_path] = outdir.glob("SignupService-dev.template.json")
    # cdk-nag ran over it, as the project's README says (a platform trial found it did not), and passed
    report = json.loads((outdir / "validation-report.json").read_text())
    assert [(r["pluginName"], r["conclusion"]) for r in report["pluginReports"]] == [
        ("AwsSolutions", "success")
    ]
    # The functions' asset (a dev stack also has CDK's auto-delete provider for its payload bucket).
    [asset] = [p for p in outdir.glob("asset.*") if (p / "jobframework").is_dir()]
    top = {p.name for p in asset.iterdir()}
    assert {"signup_service", "jobframework", "email_validator", "dns", "idna"} <= top
    assert not top & {
        "boto3",
        "botocore",
        "pydantic",
        "pydantic_core",
        "aws_lambda_powertools",
        "annotated_types",  # pydantic's own dependencies: the layer has them, pruned with pydantic
        "typing_extensions.py",
        "typing_inspection",
        "stacks",
        "tests",
    }
    assert not [p for p in top if p.startswith(("pydantic-", "pydantic_core-", "boto3-"))]  # no dist-info
    assert not (asset / "jobframework" / "cdk").exists()
    template = json.loads(template_path.read_text())
    workers = [
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function"
        and r["Properties"]["Handler"].endswith("worker.lambda_handler")
    ]
    assert workers and all(w["Environment"]["Variables"]["JF_JOBS"] == "signup_service.jobs" for w in workers)

    # The synthesized handler, from the asset, on a Python with only what Lambda provides: the job runs.
    runtime = tmp_path / "runtime"
    _run(*uv, "venv", "--quiet", runtime, env=env)
    _run(*uv, "pip", "install", "--quiet", "--python", runtime / "bin" / "python", "-c", constraints,
         *RUNTIME_PROVIDED, env=env)  # fmt: skip
    outbox = tmp_path / "outbox.txt"
    line = _run(python, DRIVER, project, template_path, asset, runtime / "bin" / "python", outbox, env=env)
    outcome = json.loads(line.strip().splitlines()[-1])
    assert outcome["returncode"] == 0, outcome["stderr"]
    assert outcome["records"] == 1
    assert outcome["ran"]["response"] == {"batchItemFailures": []}
    assert outcome["status"] == "succeeded"
    assert re.fullmatch(r"welcome Ada@example\.com \(\S+\)", outbox.read_text())
    where = outcome["ran"]["where"]
    assert Path(where["email_validator"]).is_relative_to(asset)  # shipped in the asset
    assert Path(where["jobframework"]).is_relative_to(asset)
    for provided in ("pydantic", "aws_lambda_powertools", "boto3"):  # from the runtime, not the asset
        assert Path(where[provided]).is_relative_to(runtime), provided
