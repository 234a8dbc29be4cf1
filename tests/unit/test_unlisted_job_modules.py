"""Synth, jf dev and jf worker warn of a module that declares jobs the consumer will not load: which
modules those are (``unlisted_modules.unlisted_job_modules``)."""

from __future__ import annotations

import sys
import types
from pathlib import Path

from jobframework.cli.base import warn_unlisted
from jobframework.unlisted_modules import unlisted_job_modules

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


def test_jf_dev_and_jf_worker_warn_of_them_at_start(tmp_path, monkeypatch, capsys):
    """A trial's `jf dev --jobs invoices.jobs` never said that invoices/reports.py's job would be
    dead-lettered unknown-type (only the synth did)."""
    _write(tmp_path, "invoices/__init__.py", "")
    _write(tmp_path, "invoices/jobs.py", JOB.format(name="invoices.render"))
    _write(tmp_path, "invoices/reports.py", JOB.format(name="invoices.monthly"))
    monkeypatch.chdir(tmp_path)

    warn_unlisted(["invoices.jobs"])  # (what require_jobs does once the modules are imported)

    assert " ".join(capsys.readouterr().err.split()) == (
        "warning: module invoices.reports applies @job but is not among the job modules (invoices.jobs) "
        "nor imported by them: its jobs are dead-lettered unknown-type here and by a consumer deployed "
        "with the same job_modules=; add it (--jobs invoices.jobs,invoices.reports)"
    )
    warn_unlisted(["invoices.jobs", "invoices.reports"])
    assert capsys.readouterr().err == ""


def test_jf_dev_reloads_say_each_once(tmp_path, monkeypatch, capsys):
    """`jf dev --reload`'s workers had said the warning again at every reload."""
    _write(tmp_path, "invoices/__init__.py", "")
    _write(tmp_path, "invoices/jobs.py", JOB.format(name="invoices.render"))
    _write(tmp_path, "invoices/reports.py", JOB.format(name="invoices.monthly"))
    monkeypatch.chdir(tmp_path)
    said = tmp_path / "unlisted.json"

    warn_unlisted(["invoices.jobs"], said=said)
    assert "module invoices.reports applies @job" in capsys.readouterr().err
    warn_unlisted(["invoices.jobs"], said=said)  # a reload
    assert capsys.readouterr().err == ""
    _write(tmp_path, "invoices/refunds.py", JOB.format(name="invoices.refund"))  # a new one, then
    warn_unlisted(["invoices.jobs"], said=said)
    err = capsys.readouterr().err
    assert "module invoices.refunds applies @job" in err and err.count("warning:") == 1, err
