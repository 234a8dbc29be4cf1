"""What `jf dev --reload` watches: the .py files under the project and the job packages, polled."""

from __future__ import annotations

import os
from pathlib import Path

from jobframework.local.reload import DEFAULT_EXCLUDES, SourceWatch, child_command, source_roots


def _touch(path: Path, text: str = "x = 1\n") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    existed = path.exists()
    before = path.stat().st_mtime_ns if existed else 0
    path.write_text(text)
    if existed:  # a modification time the last one cannot share, whatever the file system's resolution
        os.utime(path, ns=(before + 2_000_000_000, before + 2_000_000_000))


def test_it_names_the_py_files_added_changed_and_removed(tmp_path):
    _touch(tmp_path / "app" / "jobs.py")
    _touch(tmp_path / "app" / "mail.py")
    _touch(tmp_path / "README.md", "# not code\n")
    watch = SourceWatch([tmp_path])
    assert len(watch) == 2
    assert watch.changed() == []

    _touch(tmp_path / "app" / "jobs.py", "x = 2\n")
    _touch(tmp_path / "app" / "new.py")
    (tmp_path / "app" / "mail.py").unlink()
    _touch(tmp_path / "README.md", "# still not code\n")
    assert watch.changed() == [str(tmp_path / "app" / p) for p in ("jobs.py", "mail.py", "new.py")]
    assert watch.changed() == []


def test_it_skips_environments_caches_and_build_output(tmp_path):
    (tmp_path / "venv").mkdir()
    (tmp_path / "venv" / "pyvenv.cfg").write_text("home = /usr\n")
    for skipped in (
        "venv/lib/x.py",
        ".venv/x.py",
        "node_modules/x.py",
        "cdk.out/asset/x.py",
        "app/__pycache__/x.py",
    ):
        _touch(tmp_path / skipped)
    _touch(tmp_path / "app" / "jobs.py")
    assert len(SourceWatch([tmp_path])) == 1


def test_a_job_package_outside_the_project_is_watched_too(tmp_path, monkeypatch):
    project, elsewhere = tmp_path / "service", tmp_path / "shared"
    _touch(project / "main.py")
    _touch(elsewhere / "billingjobs" / "__init__.py")
    monkeypatch.syspath_prepend(str(elsewhere))
    roots = source_roots(["billingjobs.invoices", "main"], project)
    assert roots == [project.resolve(), (elsewhere / "billingjobs").resolve()]


def test_the_child_runs_the_same_jf_dev_on_the_port_without_reload():
    command = child_command(["dev", "--reload", "--port=0", "--jobs", "app.jobs", "--json"], 4566)
    assert command(2)[1:] == [
        "-m", "jobframework.cli", "dev", "--jobs", "app.jobs", "--json",
        "--port", "4566", "--attached", "--reloaded", "2",
    ]  # fmt: skip


def test_tests_and_excluded_patterns_reload_nothing(tmp_path):
    """A trial's test saved under the project restarted the workers: tests are left out by default,
    and --reload-exclude leaves out more (or, given '', none by default)."""
    for name in ("app/jobs.py", "tests/test_jobs.py", "tests/helpers.py", "app/test_mail.py", "conftest.py"):
        _touch(tmp_path / name)
    _touch(tmp_path / "scripts" / "seed.py")
    watch = SourceWatch([tmp_path])
    assert len(watch) == 2  # app/jobs.py and scripts/seed.py
    _touch(tmp_path / "tests" / "test_jobs.py", "x = 3\n")
    _touch(tmp_path / "conftest.py", "x = 3\n")
    assert watch.changed() == []
    _touch(tmp_path / "app" / "jobs.py", "x = 3\n")
    assert watch.changed() == [str(tmp_path / "app" / "jobs.py")]

    assert len(SourceWatch([tmp_path], [*DEFAULT_EXCLUDES, "scripts/*"])) == 1
    assert len(SourceWatch([tmp_path], [])) == 6


def test_the_child_gets_no_reload_exclude():
    command = child_command(["dev", "--reload", "--reload-exclude", "scripts/*", "--jobs", "app.jobs"], 4566)
    assert "--reload-exclude" not in command(0) and "scripts/*" not in command(0)


def test_a_project_under_a_directory_named_tests_is_still_watched(tmp_path):
    project = tmp_path / "tests" / "service"
    _touch(project / "app" / "jobs.py")
    assert len(SourceWatch([project])) == 1


def test_a_job_module_under_tests_is_watched_and_a_directory_pattern_takes_its_subtree(tmp_path):
    """A job module named by --jobs is watched whatever the excludes say; 'scripts/' is every file
    under a scripts directory; a root of / still has its directories matched (relative paths)."""
    _touch(tmp_path / "tests" / "e2e" / "jobs.py")
    _touch(tmp_path / "tests" / "test_x.py")
    _touch(tmp_path / "scripts" / "deep" / "seed.py")
    _touch(tmp_path / "app.py")
    watch = SourceWatch([tmp_path], [*DEFAULT_EXCLUDES, "scripts/"], keep=["tests.e2e.jobs"])
    assert len(watch) == 2  # tests/e2e/jobs.py and app.py
    _touch(tmp_path / "tests" / "e2e" / "jobs.py", "x = 9\n")
    assert watch.changed() == [str(tmp_path / "tests" / "e2e" / "jobs.py")]
    at_root = SourceWatch([], ["tests/*"])  # (not scanned: a container's working directory is /)
    at_root.roots = [Path("/")]
    assert at_root._excluded(at_root._relative("/srv/app/tests/x.py"))
