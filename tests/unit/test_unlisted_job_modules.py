"""Synth warns of a module that declares jobs the deployed consumer will not load: which modules those
are (``cdk.job_modules.unlisted_job_modules``)."""

from __future__ import annotations

import sys
import types
from pathlib import Path

from jobframework.cdk.job_modules import unlisted_job_modules

JOB = 'from jobframework import job\n\n\n@job("{name}")\ndef run(p) -> None: ...\n'


def _write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_a_module_applying_job_that_is_not_listed_nor_imported_is_named(tmp_path, monkeypatch):
    _write(tmp_path, "relay/__init__.py", "")
    _write(tmp_path, "relay/jobs.py", JOB.format(name="relay.deliver"))
    _write(tmp_path, "relay/reports.py", JOB.format(name="relay.report"))  # forgotten
    _write(tmp_path, "relay/sub/__init__.py", '@jobframework.job("relay.sub")\ndef f(p): ...\n')
    _write(tmp_path, "relay/helpers.py", "def job_helper(): ...\n# @job is applied in jobs.py\n")
    _write(tmp_path, "relay/imported.py", JOB.format(name="relay.imported"))
    _write(tmp_path, "relay/tests/test_jobs.py", JOB.format(name="relay.test"))
    _write(tmp_path, "relay/conftest.py", JOB.format(name="relay.conftest"))
    _write(tmp_path, "other/mod.py", JOB.format(name="other.mod"))  # not a shipped package
    monkeypatch.setitem(sys.modules, "relay.imported", types.ModuleType("relay.imported"))  # by jobs.py

    found = unlisted_job_modules(tmp_path, ["relay"], ["relay.jobs"])

    assert found == ["relay.reports", "relay.sub"]


def test_nothing_is_named_when_every_module_with_jobs_is_listed(tmp_path):
    _write(tmp_path, "relay/__init__.py", "")
    _write(tmp_path, "relay/jobs.py", JOB.format(name="relay.deliver"))
    _write(tmp_path, "relay/reports.py", JOB.format(name="relay.report"))
    assert unlisted_job_modules(tmp_path, ["relay", "missing"], ["relay.jobs", "relay.reports"]) == []
