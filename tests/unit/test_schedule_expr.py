"""Schedule expressions are checked when ``@job`` is applied, as EventBridge Scheduler checks them."""

from __future__ import annotations

import doctest
import re
from typing import Any

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


def test_an_unsigned_firing_runs_only_under_its_slots_one_key_while_that_key_keeps_copies_out():
    """What a forger who can send to the queue can make run, under signing: a fintech trial's five
    made-up firings of a nightly payout all ran; a review then found unpadded times (one slot, many
    keys), a slot taken 5 minutes early and again a day later, and daylight saving's repeated hour."""
    from datetime import UTC, datetime, timedelta

    from jobframework.errors import SignatureError
    from jobframework.scheduling import schedule_key, unsigned_firing_key

    now = datetime(2026, 12, 6, 2, 30, tzinfo=UTC)

    def key_of(at: str, expression: str = "cron(0 2 * * ? *)", **kw: Any) -> str:
        options = {"idempotent": True, "now": now, **kw}
        zone = options.pop("timezone", "UTC")
        return unsigned_firing_key(
            "pay.nightly", expression, zone, schedule_key("pay.nightly", at), **options
        )

    assert key_of("2026-12-06T02:00:00Z") == "schedule:pay.nightly:2026-12-06T02:00:00Z"
    for unpadded in ("2026-12-06T2:00:00Z", "2026-12-6T02:00:00Z", "2026-12-06T02:0:00Z"):
        with pytest.raises(SignatureError, match="is no slot of its schedule"):
            key_of(unpadded)
    with pytest.raises(SignatureError, match="2026-12-06T01:37:00Z is not a time of its schedule"):
        key_of("2026-12-06T01:37:00Z")
    with pytest.raises(SignatureError, match="is not a time"):  # (02:00 in Berlin is 01:00 UTC)
        key_of("2026-12-06T02:00:00Z", timezone="Europe/Berlin")
    assert key_of("2026-12-06T01:00:00Z", timezone="Europe/Berlin").endswith("01:00:00Z")
    with pytest.raises(SignatureError, match="no key record to keep a second copy"):
        key_of("2026-12-06T02:00:00Z", idempotent=False)
    # Taken 5 minutes early, its record lapses 5 minutes before a day after its slot: no later firing
    # of that slot is taken then.
    early = now.replace(hour=1, minute=55)
    assert key_of("2026-12-06T02:00:00Z", now=early).endswith("02:00:00Z")
    with pytest.raises(SignatureError, match="too old"):
        key_of("2026-12-06T02:00:00Z", now=early + timedelta(hours=23, minutes=59))
    with pytest.raises(SignatureError, match="ahead"):
        key_of("2026-12-07T02:00:00Z")
    # A rate's made-up time is its period's slot, taken within a day less the period; a day-long rate
    # cannot be checked at all.
    hourly = key_of("2026-12-06T02:07:13Z", "rate(1 hour)")
    assert hourly == "schedule:pay.nightly:2026-12-06T02:00:00Z"
    with pytest.raises(SignatureError, match="too old"):
        key_of("2026-12-05T03:30:00Z", "rate(1 hour)")  # (23 h: over a day less the hour)
    with pytest.raises(SignatureError, match="a schedule over 12 hours is a cron expression"):
        key_of("2026-12-06T02:07:13Z", "rate(1 day)")
    # New York's 01:30 comes twice on 2026-11-01: one key, the first's.
    fall = dict(timezone="America/New_York", now=datetime(2026, 11, 1, 7, 0, tzinfo=UTC))
    first = key_of("2026-11-01T05:30:00Z", "cron(30 1 * * ? *)", **fall)
    assert key_of("2026-11-01T06:30:00Z", "cron(30 1 * * ? *)", **fall) == first
    # Its 02:30 never comes on 2026-03-08: no UTC time is that slot.
    spring = dict(timezone="America/New_York", now=datetime(2026, 3, 8, 8, 0, tzinfo=UTC))
    for at in ("2026-03-08T06:30:00Z", "2026-03-08T07:00:00Z", "2026-03-08T07:30:00Z"):
        with pytest.raises(SignatureError, match="is not a time"):
            key_of(at, "cron(30 2 * * ? *)", **spring)


@pytest.mark.parametrize(
    "expression",
    [
        "cron(0 2 * * ? *)",
        "cron(*/15 9-17 ? * MON-FRI *)",
        "cron(30 1 1,15 * ? *)",
        "cron(0 0 L * ? *)",
        "cron(0 12 ? * 6#3 *)",
        "cron(5/20 22-2 ? * SAT-MON *)",
        "cron(0 8 ? JAN,JUL 2-6 2026)",
    ],
)
def test_cron_matches_says_what_croniter_says(expression: str) -> None:
    """The consumer's matcher (the Lambda bundle has no croniter) against croniter's times over four
    months: each of them matches, and so does no other minute of a sample."""
    import random
    from datetime import datetime, timedelta

    from croniter import croniter

    from jobframework.local.scheduler import cron_fields
    from jobframework.schedule_expr import cron_matches

    five, year = cron_fields(expression)
    start, end = datetime(2026, 1, 1), datetime(2026, 5, 1)
    it, times = croniter(five, start - timedelta(minutes=1)), set()
    while (at := it.get_next(datetime)) < end:
        if year is None or str(at.year) == year:
            times.add(at)
    assert times and all(cron_matches(expression, at) for at in times)
    sample = random.Random(expression).sample(range(int((end - start).total_seconds() // 60)), 4000)
    for minutes in sample:
        moment = start + timedelta(minutes=minutes)
        assert cron_matches(expression, moment) == (moment in times), (expression, moment)


def test_cron_matches_the_weekday_nearest_a_day():
    from datetime import datetime

    from jobframework.schedule_expr import cron_matches

    nearest_15 = "cron(0 9 15W * ? *)"
    assert cron_matches(nearest_15, datetime(2026, 8, 14, 9))  # the 15th is a Saturday: Friday
    assert not cron_matches(nearest_15, datetime(2026, 8, 15, 9))
    assert cron_matches(nearest_15, datetime(2026, 3, 16, 9))  # a Sunday: Monday
    assert cron_matches("cron(0 9 1W * ? *)", datetime(2026, 8, 3, 9))  # Sat the 1st: Monday the 3rd


def test_the_slot_check_needs_nothing_the_lambda_bundle_leaves_out():
    """The bundle carries neither croniter nor jobframework.local (a review found the first version of
    the check importing both: every unsigned firing would have failed in Lambda)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "for name in ('croniter', 'jobframework.local', 'jobframework.cli'):\n"
        "    sys.modules[name] = None\n"
        "from datetime import UTC, datetime\n"
        "from jobframework.scheduling import schedule_key, unsigned_firing_key\n"
        "now = datetime(2026, 12, 6, 2, 30, tzinfo=UTC)\n"
        "for expression in ('cron(0 2 * * ? *)', 'rate(1 hour)'):\n"
        "    key = schedule_key('a.b', '2026-12-06T02:00:00Z')\n"
        "    print(unsigned_firing_key('a.b', expression, 'UTC', key, idempotent=True, now=now))\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["schedule:a.b:2026-12-06T02:00:00Z"] * 2


def test_a_day_long_rate_schedule_is_refused_before_it_runs_under_signing():
    from jobframework.scheduling import check_signed_schedules
    from jobframework.topology import Topology

    registry = JobRegistry()

    @job("exports.nightly", registry=registry, schedule=Schedule("rate(1 day)"))
    def nightly(req: _Nightly) -> None: ...

    schedules = Topology.from_registry(registry).schedules
    with pytest.raises(
        ConfigurationError, match=r"job exports.nightly: its schedule rate\(1 day\) runs unsigned"
    ):
        check_signed_schedules(schedules)
    check_signed_schedules(())  # (nothing to refuse)


class _Nightly(BaseModel):
    dataset: str = "billing"
