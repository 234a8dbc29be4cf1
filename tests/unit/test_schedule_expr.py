"""Schedule expressions are checked when ``@job`` is applied, as EventBridge Scheduler checks them."""

from __future__ import annotations

import doctest
import re

import pytest
from pydantic import BaseModel

from jobframework import schedule_expr
from jobframework.errors import ConfigurationError
from jobframework.jobs import JobRegistry, Schedule, job

VALID = [
    "rate(1 minute)",
    "rate(2 minutes)",
    "rate(1 hour)",
    "rate(12 hours)",
    "rate(1 day)",
    "rate(30 days)",
    "cron(0 12 * * ? *)",
    "cron(0/15 * ? * MON-FRI *)",
    "cron(5,35 14 * * ? *)",
    "cron(0 18 ? * MON-FRI *)",
    "cron(0 8 1 * ? *)",
    "cron(0 10 L * ? *)",
    "cron(0 8 15W * ? *)",
    "cron(15 10 ? * 6L 2027-2030)",
    "cron(0 9 ? * 2#1 *)",
    "cron(0 0 ? JAN,jul SUN *)",
    "cron(*/5 8-17 ? * 2-6 */2)",
    " rate(5 minutes) ",
]

INVALID = [
    ("cron(* * * * *)", "six fields"),
    ("cron(0 3 * * ? * *)", "six fields"),
    ("rate(0 minutes)", "at least 1"),
    ("rate(1 minutes)", "singular 'minute'"),
    ("rate(5 minute)", "plural 'minutes'"),
    ("rate(1 days)", "singular 'day'"),
    ("rate(-1 hours)", "whole number"),
    ("rate(1.5 hours)", "whole number"),
    ("rate(2 weeks)", "minute"),
    ("rate(5minutes)", "rate\\(value unit\\)"),
    ("cron(0 12 * * * *)", "exactly one of day-of-month and day-of-week"),
    ("cron(0 12 ? * ? *)", "exactly one of day-of-month and day-of-week"),
    ("cron(60 * * * ? *)", "minutes 60 is outside 0-59"),
    ("cron(0 24 * * ? *)", "hours 24 is outside 0-23"),
    ("cron(0 0 0 * ? *)", "day-of-month 0 is outside 1-31"),
    ("cron(0 0 32 * ? *)", "day-of-month 32 is outside 1-31"),
    ("cron(0 0 ? 13 * *)", "month 13 is outside 1-12"),
    ("cron(0 0 ? * 0 *)", "day-of-week 0 is outside 1-7"),
    ("cron(0 0 ? * FUN *)", "not a number or SUN-SAT"),
    ("cron(0 0 * * ? 1969)", "year 1969 is outside 1970-2199"),
    ("cron(0/0 * * * ? *)", "increment"),
    ("cron(0 9 ? * 2#6 *)", "1-5"),
    ("cron(0 9 1,? * ? *)", "stands alone"),
    ("every day", "not an EventBridge Scheduler expression"),
    ("at(2027-1-31T09:00:00)", "two-digit"),
    ("at(tomorrow)", "at\\(yyyy-mm-ddThh:mm:ss\\)"),
]


class Tick(BaseModel):
    region: str = "eu"


@pytest.mark.parametrize("expression", VALID)
def test_expressions_scheduler_accepts_are_accepted_at_decoration(expression):
    reg = JobRegistry()

    @job("ticks.run", registry=reg, schedule=expression)
    def run(tick: Tick) -> None:
        pass

    assert run.schedule is not None
    assert run.schedule.expression == expression.strip()


@pytest.mark.parametrize(("expression", "message"), INVALID)
def test_expressions_scheduler_refuses_fail_at_decoration_with_one_line(expression, message):
    with pytest.raises(ConfigurationError, match=message) as info:
        job("ticks.run", registry=JobRegistry(), schedule=expression)
    assert "\n" not in str(info.value)
    assert repr(expression.strip()) in str(info.value)


def test_a_one_time_at_is_valid_scheduler_syntax_but_not_a_recurring_job_schedule():
    assert schedule_expr.check_expression("at(2027-01-31T09:00:00)") == "at(2027-01-31T09:00:00)"
    with pytest.raises(ConfigurationError, match=r"enqueue\(\.\.\., delay=\.\.\.\)"):
        Schedule("at(2027-01-31T09:00:00)")


def test_an_unknown_time_zone_is_refused():
    with pytest.raises(ConfigurationError, match="IANA time zone"):
        Schedule("cron(0 3 * * ? *)", timezone="Mars/Olympus")
    assert Schedule("cron(0 3 * * ? *)", timezone="Europe/Paris").timezone == "Europe/Paris"


def test_the_module_examples_run():
    result = doctest.testmod(schedule_expr, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("0 2 * * *", r"\(a crontab's '0 2 \* \* \*' is 'cron\(0 2 \* \* \? \*\)' here\)$"),
        ("0 3 * * MON", r"is 'cron\(0 3 \? \* MON \*\)' here\)$"),
        ("@daily", r"is 'cron\(0 0 \* \* \? \*\)' here\)$"),
        (
            "cron(0 2 * * *)",
            r"takes six fields .* \(a crontab's 'cron\(0 2 \* \* \*\)' is 'cron\(0 2 \* \* \? \*\)' here\)$",
        ),
        ("30 9 * * 1-5", r"is 'cron\(30 9 \? \* <days> \*\)' here, its days of the week by name \(MON-FRI\)"),
    ],
)
def test_a_job_schedule_names_only_recurring_forms_and_translates_a_crontab_line(expression, message):
    """A trial's Celery beat crontab '0 2 * * *' was told to use at(...), which the next check refuses
    for a job's schedule."""
    with pytest.raises(ConfigurationError, match=message) as info:
        job("ticks.run", registry=JobRegistry(), schedule=expression)
    assert "at(" not in str(info.value)
    assert "use 'rate(5 minutes)' or 'cron(0 3 * * ? *)'" in str(info.value) or "six fields" in str(
        info.value
    )
    suggested = re.findall(r"'(cron\([^)]*\))' here", str(info.value))  # the translation
    if suggested and "<days>" not in suggested[-1]:
        assert schedule_expr.check_expression(suggested[-1]) == suggested[-1]


def test_an_unsigned_cron_firing_runs_only_for_a_slot_of_its_schedule_and_an_idempotent_job():
    from datetime import UTC, datetime

    from jobframework.errors import SignatureError
    from jobframework.scheduling import schedule_key, unsigned_firing_key

    now = datetime(2026, 12, 6, 2, 30, tzinfo=UTC)
    nightly = "cron(0 2 * * ? *)"

    def key_of(at: str, *, idempotent: bool = True, timezone: str = "UTC") -> str:
        key = schedule_key("payouts.nightly", at)
        return unsigned_firing_key("payouts.nightly", nightly, timezone, key, idempotent=idempotent, now=now)

    assert key_of("2026-12-06T02:00:00Z").endswith("2026-12-06T02:00:00Z")
    with pytest.raises(SignatureError, match="over 24 h old"):  # (its key's record may be gone)
        key_of("2026-12-05T02:00:00Z")
    with pytest.raises(SignatureError, match="2026-12-06T01:37:00Z is not a time of its schedule"):
        key_of("2026-12-06T01:37:00Z")
    with pytest.raises(SignatureError, match="is not a time"):  # (02:00 in Berlin is 01:00 UTC)
        key_of("2026-12-06T02:00:00Z", timezone="Europe/Berlin")
    assert key_of("2026-12-06T01:00:00Z", timezone="Europe/Berlin").endswith("01:00:00Z")
    with pytest.raises(SignatureError, match="the job is not idempotent"):
        key_of("2026-12-06T02:00:00Z", idempotent=False)
