"""What ``jf dev`` prints: outcome lines a person reads at a glance, and each schedule's next firing."""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime

from jobframework.jobs import Priority
from jobframework.local.console import ReadableFormatter, outcome_text
from jobframework.local.scheduler import LocalScheduler
from jobframework.topology import ScheduleSpec


def test_a_batched_items_share_of_a_quick_call_is_not_printed_as_0_ms():
    """A batched job's items each get their call's time over their number: ten items of a 2 ms call
    printed "0 ms" each, as if the job had not run."""
    line = outcome_text(
        {
            "outcome": "succeeded",
            "job_type": "mail.bulk",
            "job_id": "j-1",
            "priority": "default",
            "attempt": 1,
            "duration_ms": 0.2,
        }
    )
    assert line.endswith("attempt 1  0.2 ms"), line
    tiny = outcome_text(
        {"outcome": "succeeded", "job_type": "mail.bulk", "job_id": "j-2", "duration_ms": 0.0}
    )
    assert tiny.endswith("<0.1 ms"), tiny


def test_a_schedules_next_firing_is_shown_to_the_second():
    """The banner's "next" of a rate schedule carried jf dev's start time's microseconds."""
    spec = ScheduleSpec(
        job="reports.daily",
        name="reports-daily",
        expression="rate(5 minutes)",
        timezone="UTC",
        payload={},
        priority=Priority.DEFAULT,
    )
    started = datetime(2026, 12, 5, 12, 0, 0, 123456, tzinfo=UTC)
    scheduler = LocalScheduler([spec], lambda spec, envelope: None, now=lambda: started)
    assert scheduler.describe() == [
        {"job": "reports.daily", "expression": "rate(5 minutes)", "next": "2026-12-05T12:05:00+00:00"}
    ]


def test_what_a_job_gives_its_logger_beside_the_message_is_shown():
    """A trial's ``ctx.logger.info("rendered", extra={"pages": 3})`` printed only "rendered"."""
    formatter = ReadableFormatter()
    record = logging.makeLogRecord(
        {"msg": "rendered %s", "args": ("inv-1",), "levelname": "INFO", "levelno": 20, "pages": 3}
    )
    record.job_id, record.job_type, record.job_key, record.trace_id = "j-1", "invoices.render", "k", "t"
    line = formatter.format(record)
    assert line.endswith("INFO    [invoices.render j-1] rendered inv-1  pages=3"), line
    plain = logging.makeLogRecord({"msg": "plain", "levelname": "INFO", "levelno": 20})
    assert formatter.format(plain).endswith("INFO    plain")


def test_a_retry_that_did_not_time_its_run_still_reads_as_a_retry():
    """A record whose key ring or payload store could not be read is retried as an attempt (it has no
    duration): "retry in", not "back in ... not run", which is for records handed back unrun."""
    from jobframework.local.console import outcome_text

    line = outcome_text(
        {
            "outcome": "retried",
            "job_type": "a.b",
            "job_id": "j",
            "priority": "default",
            "attempt": 2,
            "delay": 30,
            "error": "payload store unavailable",
        }
    )
    assert line.startswith("retry in 30s") and "attempt 2" in line and "not run" not in line


def test_a_record_handed_back_unrun_is_not_counted_as_a_retry_when_jf_dev_stops():
    """A trial's jf dev stop line said "2 retried" for deliveries that only waited for another delivery
    of their key (``back in 1m ... not run``): no attempt was spent, so they are ``released``."""
    from jobframework.delivery import Outcome, RecordOutcome
    from jobframework.local.pollers import BatchStats
    from jobframework.local.tally import OutcomeTally, stop_counts

    tally = OutcomeTally()
    tally(RecordOutcome("m-1", Outcome.SUCCEEDED, "a.job", "j-1", "default", 1))
    tally(RecordOutcome("m-2", Outcome.RETRIED, "a.job", "j-2", "default", 1, delay=61, unrun=True))
    tally(RecordOutcome("m-3", Outcome.RETRIED, "a.job", "j-3", "default", 1, delay=2, error="boom"))
    counts = stop_counts(BatchStats(batches=1, records=3, deleted=1, failed=2), tally, drained=True)
    assert (counts["succeeded"], counts["retried"], counts["released"]) == (1, 1, 1)
    assert tally.text() == "1 succeeded, 1 retried, 0 dead-lettered, 1 released"


def test_outcome_lines_keep_their_columns_for_a_long_job_name():
    """A trial's jf dev lines lost their columns once a job's name was longer than 16 characters: the
    job type's column is as wide as the longest name seen (up to 40)."""
    from jobframework.delivery import RecordOutcome
    from jobframework.local.console import outcome_keys

    formatter = ReadableFormatter()

    def line(job_type: str, job_id: str) -> str:
        keys = outcome_keys(RecordOutcome("m", "succeeded", job_type, job_id, "default", 1, processing_ms=3))
        record = logging.makeLogRecord({"msg": "done", "levelname": "INFO", "levelno": 20, **keys})
        return str(formatter.format(record))

    long_name = "billing.reconcile_partner_ledgers"
    first, second = line(long_name, "j-long"), line("a.b", "j-short")
    assert first.index("j-long") == second.index("j-short"), (first, second)
    huge = line("x" * 60, "j-huge")  # its own line shifts; the others widen to 40 at most
    after = line("a.b", "j-2")
    assert huge.index("j-huge") > after.index("j-2") == first.index("j-long") + (40 - len(long_name))


def test_an_outcome_line_is_stamped_when_its_job_ended_not_when_its_batch_settled():
    """A batch's outcome lines are told when it settles: six capped runs a second apart all read the
    settle's time (an operator's trial)."""
    from jobframework.delivery import RecordOutcome
    from jobframework.local.console import OUTCOMES_LOGGER, outcome_listener

    seen: list[logging.LogRecord] = []
    capture = logging.Handler()
    capture.emit = seen.append  # type: ignore[method-assign]
    log = logging.getLogger(OUTCOMES_LOGGER)
    log.addHandler(capture)
    try:
        listener = outcome_listener()
        ran = RecordOutcome("m-1", "succeeded", "crm.sync", "j-1", "default", 1)
        ran.started_at, ran.processing_ms = 1_000_000.0, 1250.0  # ended at 1,000,001.25
        listener(ran)
        unrun = RecordOutcome("m-2", "released", "crm.sync", "j-2", "default", 1, delay=3)
        told = time.time()
        listener(unrun)  # (no run: stamped when told)
    finally:
        log.removeHandler(capture)
    assert seen[0].created == 1_000_001.25 and round(seen[0].msecs) == 250
    line = ReadableFormatter().format(seen[0])
    assert line.startswith(datetime.fromtimestamp(1_000_001.25).strftime("%H:%M:%S.250 succeeded"))
    assert told <= seen[1].created <= time.time()
    assert seen[0].funcName == "emit" and seen[0].pathname.endswith("console.py")  # (its JSON "location")
