"""``jf worker``'s start and stop lines: JSON log lines on the Powertools Logger's handler (stdout), of
the service that the jobs' lines name, whatever ``POWERTOOLS_SERVICE_NAME`` and the levels say."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

SCRIPT = """
import logging
logging.basicConfig(level=logging.INFO)  # as jf worker: other libraries' records to stderr
from jobframework.local.console import worker_log
worker_log().info("jf worker: polling %s", "default", extra={"queues": ["default"]})
"""


@pytest.mark.parametrize("service", [None, "orders"])
def test_the_worker_lines_are_json_log_lines_of_the_jobs_service(service):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("POWERTOOLS_", "JF_"))}
    env |= {"POWERTOOLS_LOG_LEVEL": "ERROR", "JF_LOG_LEVEL": "ERROR"}  # the lines print regardless
    if service:
        env["POWERTOOLS_SERVICE_NAME"] = service
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=60, check=True
    )
    (line,) = done.stdout.splitlines()
    record = json.loads(line)
    assert record["message"] == "jf worker: polling default" and record["queues"] == ["default"]
    assert record["service"] == (service or "jobframework") and record["level"] == "INFO"
    assert "polling" not in done.stderr, done.stderr  # not a second, plain copy through the root logger


def test_where_a_job_raised_leaves_out_the_standard_librarys_frames():
    """An ``async def`` job's exception reaches the consumer through ``concurrent.futures``: jf dev's
    "at" lines showed its _base.py frames above the job's own."""
    import logging
    import sys
    from concurrent.futures import ThreadPoolExecutor

    from jobframework.local.console import ReadableFormatter

    def deliver() -> None:
        raise RuntimeError("partner down")

    with ThreadPoolExecutor(1) as pool:
        try:
            pool.submit(deliver).result()
        except RuntimeError:
            exc_info = sys.exc_info()
    record = logging.LogRecord(  # the consumer's line that the outcome line restates: the frames only
        "jobframework.consumer", logging.ERROR, __file__, 1, "job j (t) dead-lettered", (), exc_info
    )
    lines = ReadableFormatter().format(record).splitlines()
    frames = [line for line in lines if line.startswith("    at ")]
    assert frames and all("concurrent/futures" not in line for line in frames), lines
    assert frames[-1].endswith('in deliver: raise RuntimeError("partner down")'), frames


def test_a_held_back_records_line_is_said_by_its_outcome_line_alone():
    """A trial's burst of twenty ordered jobs printed 117 "record ... held back" lines under jf dev
    beside their outcome lines: the line was logged under another logger than the one jf dev drops."""
    import logging

    from jobframework import fifo
    from jobframework.local.console import ReadableFormatter

    record = fifo.log.makeRecord(
        fifo.log.name,
        logging.INFO,
        __file__,
        1,
        "record %s held back: %s of its group %s comes back first",
        ("m-2", "m-1", "g"),
        None,
    )
    assert ReadableFormatter().format(record) == ""
