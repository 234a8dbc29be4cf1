"""``JF_LOG_LEVEL``: the level of the framework's own log records (loggers ``jobframework.<module>``)
on the Powertools Logger's handler, apart from the jobs' own records."""

from __future__ import annotations

import logging

import pytest

from jobframework.telemetry import FrameworkLevel, job_logger


def _passes(name: str, level: int) -> bool:
    record = logging.getLogger(name).makeRecord(name, level, __file__, 1, "a line", (), None)
    return FrameworkLevel().filter(record)


def test_the_framework_records_below_jf_log_level_are_dropped_and_the_jobs_kept(monkeypatch):
    monkeypatch.setenv("JF_LOG_LEVEL", "warning")
    assert not _passes("jobframework.consumer", logging.INFO)
    assert not _passes("jobframework.flow.cancel", logging.INFO)
    assert _passes("jobframework.consumer", logging.WARNING)
    assert _passes("jobframework", logging.INFO)  # ctx.logger: the Powertools Logger itself
    assert _passes("jobframework.job", logging.INFO)  # ctx.logger of a job run inline
    assert _passes("myapp.jobs", logging.DEBUG)  # the team's own loggers
    assert _passes("jobframeworks", logging.INFO)


@pytest.mark.parametrize("value", [None, "", "INFO", "not-a-level"])
def test_without_a_level_above_info_the_framework_records_pass(monkeypatch, value):
    if value is None:
        monkeypatch.delenv("JF_LOG_LEVEL", raising=False)
    else:
        monkeypatch.setenv("JF_LOG_LEVEL", value)
    assert _passes("jobframework.consumer", logging.INFO)


def test_a_framework_logger_with_a_level_of_its_own_keeps_it(monkeypatch):
    """As ``jf dev`` sets ``jobframework.outcomes`` to INFO: a child's own level beats its parent's."""
    monkeypatch.setenv("JF_LOG_LEVEL", "ERROR")
    own = logging.getLogger("jobframework.test_own_level")
    child = "jobframework.test_own_level.child"
    monkeypatch.setattr(own, "level", logging.INFO)
    assert _passes(own.name, logging.INFO)
    assert _passes(child, logging.INFO)  # inherited from its framework parent
    monkeypatch.setattr(own, "level", logging.NOTSET)
    assert not _passes(child, logging.INFO)


def test_the_job_loggers_handler_carries_the_filter_once():
    handler = job_logger().registered_handler
    assert sum(isinstance(f, FrameworkLevel) for f in handler.filters) == 1
