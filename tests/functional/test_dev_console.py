"""`jf dev`'s readable console: each outcome line, and under it where that job raised."""

from __future__ import annotations

import io
import logging
import os
import re
from typing import Any

from jobframework.consumer import consumer
from jobframework.local.console import install
from jobframework.telemetry import job_logger
from jobframework.testing import consume_once

from .jobs_under_test import Work, declined, registry


def test_each_dead_letter_line_shows_where_its_own_job_raised(rt: Any, monkeypatch: Any) -> None:
    """A batch's outcome lines come together when it settles: the frames of each job must follow its
    own line (they were kept per thread, so a batch showed one job's frames, under another's line)."""
    handler = job_logger().registered_handler
    assert isinstance(handler, logging.StreamHandler)
    saved = (handler.formatter, list(handler.filters), handler.stream)
    out = io.StringIO()
    monkeypatch.delenv("JF_METRICS_DISABLED", raising=False)  # restored after: install() sets it
    try:
        listener = install(json_logs=False)
        handler.setStream(out)
        handle = consumer(registry, config=rt.config, sqs_client=rt.sqs, listeners=[listener])
        results = rt.client.enqueue_many([declined.request(Work(name=f"n-{i}")) for i in range(3)])
        records, _ = consume_once(handle, rt.sqs, rt.url("high"))
        assert len(records) == 3
    finally:
        handler.setFormatter(saved[0])
        handler.filters[:] = saved[1]
        handler.setStream(saved[2])
    lines = out.getvalue().splitlines()
    for result in results:
        (at,) = [i for i, line in enumerate(lines) if result.id in line and "dead-lettered" in line]
        where = lines[at + 1]
        assert re.match(r"    at tests/functional/jobs_under_test\.py:\d+ in declined: raise", where), lines


def test_jf_dev_turns_off_the_consumers_metrics_not_the_jobs_own(monkeypatch: Any) -> None:
    """A team's job that emits a Powertools metric still prints it under jf dev and jf worker."""
    from aws_lambda_powertools.metrics.functions import is_metrics_disabled

    handler = job_logger().registered_handler
    saved = (handler.formatter, list(handler.filters))
    monkeypatch.delenv("JF_METRICS_DISABLED", raising=False)
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    monkeypatch.delenv("POWERTOOLS_DEV", raising=False)
    try:
        install(json_logs=False)
    finally:
        handler.setFormatter(saved[0])
        handler.filters[:] = saved[1]
    assert os.environ["JF_METRICS_DISABLED"] == "true" and not is_metrics_disabled()
