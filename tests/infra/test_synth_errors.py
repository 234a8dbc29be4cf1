"""Under the CDK CLI (``CDK_OUTDIR`` set), a construct's configuration error prints as its message, not
under thirty lines of jsii traceback; ``JF_TRACEBACK=1`` and a plain ``python app.py`` keep the traceback,
and any other exception keeps it too."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

APP = """
import sys
from aws_cdk import App, Stack
from jobframework.cdk import JobFramework

app = App()
if sys.argv[1] == "config":
    JobFramework(Stack(app, "Shop"), "Jobs", job_modules=[])
if sys.argv[1] == "settings":
    from jobframework.topology import TopologySettings

    TopologySettings(app_name="shop", batch_size=20000)
raise RuntimeError("a bug of the app's own")
"""


def _synth(tmp_path: Path, kind: str, **env: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "app.py").write_text(APP)
    environ = {k: v for k, v in os.environ.items() if k not in ("CDK_OUTDIR", "JF_TRACEBACK")}
    return subprocess.run(
        [sys.executable, "app.py", kind],
        cwd=tmp_path,
        env={**environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_under_the_cdk_cli_a_configuration_error_prints_as_its_message(tmp_path):
    ran = _synth(tmp_path, "config", CDK_OUTDIR=str(tmp_path / "cdk.out"))
    assert ran.returncode == 1
    assert "Traceback" not in ran.stderr, ran.stderr
    assert ran.stderr.startswith("jobframework: JobFramework needs job_modules"), ran.stderr
    assert "JF_TRACEBACK=1" in ran.stderr


def test_a_bad_setting_prints_as_one_line_naming_each_field(tmp_path):
    """A platform trial's TopologySettings(batch_size=20000) ended in pydantic's traceback, where the
    docs promise one line; TopologySettings(app_name=...) had been ignored."""
    ran = _synth(tmp_path, "settings", CDK_OUTDIR=str(tmp_path / "cdk.out"))
    assert ran.returncode == 1
    assert "Traceback" not in ran.stderr, ran.stderr
    assert ran.stderr.splitlines()[0] == (
        "jobframework: TopologySettings: batch_size: Input should be less than or equal to 10000 (got 20000);"
        " app_name: takes no such field (did you mean app?)"
    ), ran.stderr


@pytest.mark.parametrize(
    ("kind", "env"),
    [
        ("config", {"JF_TRACEBACK": "1"}),  # asked for
        ("config", {}),  # not run by the CDK CLI
        ("bug", {}),  # not a configuration error
    ],
    ids=["asked", "plain-python", "other-error"],
)
def test_the_traceback_stays_where_it_is_asked_for_or_the_error_is_not_ours(tmp_path, kind, env):
    if kind == "bug" or env:
        env = {**env, "CDK_OUTDIR": str(tmp_path / "cdk.out")}
    ran = _synth(tmp_path, kind, **env)
    assert ran.returncode == 1
    assert "Traceback (most recent call last)" in ran.stderr, ran.stderr
