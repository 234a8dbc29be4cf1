"""The local scheduler: EventBridge rate/cron expressions, and firings with Scheduler's envelope and key."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import BaseModel

from jobframework.errors import ConfigurationError
from jobframework.local.scheduler import LocalScheduler, ScheduleClock, cron_fields, parse_rate, sqs_sender
from jobframework.scheduling import schedule_key
from jobframework.testing import receive_all
from jobframework.topology import ScheduleSpec
from tests.functional.conftest_local import jf_aws, jf_config, sqs

__all__ = ["jf_aws", "jf_config", "sqs"]

T0 = datetime(2026, 3, 2, 12, 0, 30, tzinfo=UTC)  # a Monday


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("cron(0 3 * * ? *)", ("0 3 * * *", None)),
        ("cron(0/15 9-17 ? * MON-FRI *)", ("0/15 9-17 * * MON-FRI", None)),
        ("cron(0 8 ? * 2-6 *)", ("0 8 * * 1-5", None)),
        ("cron(0 10 ? * 6#3 2027)", ("0 10 * * 5#3", "2027")),
        ("cron(0 0 L * ? *)", ("0 0 L * *", None)),
    ],
)
def test_eventbridge_cron_becomes_croniter(expression, expected):
    assert cron_fields(expression) == expected


@pytest.mark.parametrize(
    "bad",
    ["cron(0 3 * * *)", "cron(0 3 * * * *)", "cron(0 3 ? * ? *)", "rate(5 minute)", "rate(1 minutes)"],
)
def test_bad_expressions_are_refused(bad):
    with pytest.raises(ConfigurationError):
        ScheduleClock(bad)


def test_the_nearest_weekday_and_the_last_saturday_fire_as_eventbridge_says():
    start = datetime(2026, 11, 1, tzinfo=UTC)  # 15 November 2026 is a Sunday
    assert ScheduleClock("cron(0 8 15W * ? *)", start=start).next_after(start) == datetime(
        2026, 11, 16, 8, tzinfo=UTC
    )
    assert ScheduleClock("cron(0 8 ? * 7L *)", start=start).next_after(start) == datetime(
        2026, 11, 28, 8, tzinfo=UTC
    )


def test_next_slots_of_rate_and_cron():
    assert parse_rate("rate(1 hour)") == timedelta(hours=1)
    rate = ScheduleClock("rate(5 minutes)", start=T0)
    assert rate.next_after(T0) == T0 + timedelta(minutes=5)
    assert rate.next_after(T0 + timedelta(minutes=7)) == T0 + timedelta(minutes=10)
    weekdays = ScheduleClock("cron(0 8 ? * 2-6 *)")  # MON-FRI 08:00 UTC
    assert weekdays.next_after(datetime(2026, 3, 6, 9, tzinfo=UTC)) == datetime(2026, 3, 9, 8, tzinfo=UTC)
    berlin = ScheduleClock("cron(0 8 * * ? *)", timezone="Europe/Berlin")
    assert berlin.next_after(T0) == datetime(2026, 3, 3, 7, tzinfo=UTC)
    yearly = ScheduleClock("cron(0 0 1 1 ? 2028)")
    assert yearly.next_after(T0) == datetime(2028, 1, 1, tzinfo=UTC)


def test_tick_fires_each_due_slot_once_with_schedulers_envelope(sqs, jf_config):
    spec = ScheduleSpec(
        job="maintenance.cleanup",
        name="jf-t-maintenance-cleanup",
        expression="cron(* * * * ? *)",
        timezone="UTC",
        payload={"older_than_days": 7},
        priority="low",
    )
    clock = {"now": T0}
    scheduler = LocalScheduler([spec], sqs_sender(jf_config, sqs), now=lambda: clock["now"])
    assert scheduler.tick() == []  # 12:00:30: the next slot is 12:01
    clock["now"] = T0 + timedelta(seconds=31)
    first = scheduler.tick()
    assert [e.key for e in first] == [schedule_key("maintenance.cleanup", "2026-03-02T12:01:00Z")]
    assert scheduler.tick() == []  # the same slot never fires twice
    clock["now"] = T0 + timedelta(minutes=10)  # asleep for nine slots: one late firing
    late = scheduler.tick()
    assert [e.key for e in late] == [schedule_key("maintenance.cleanup", "2026-03-02T12:10:00Z")]

    bodies = [json.loads(m["Body"]) for m in receive_all(sqs, jf_config.endpoints("low").url)]
    assert sorted(b["key"] for b in bodies) == sorted(e.key for e in first + late)
    assert all(b["type"] == "maintenance.cleanup" and b["payload"] == {"older_than_days": 7} for b in bodies)
    assert {b["id"] for b in bodies} == {e.id for e in first + late}


def test_background_thread_fires_a_rate_schedule(sqs, jf_config):
    spec = ScheduleSpec(
        job="maintenance.cleanup",
        name="x",
        expression="rate(1 minute)",
        timezone="UTC",
        payload={},
        priority="low",
    )
    shift = {"by": timedelta(0)}
    scheduler = LocalScheduler(
        [spec], sqs_sender(jf_config, sqs), now=lambda: datetime.now(UTC) + shift["by"]
    )
    shift["by"] = timedelta(seconds=59.5)  # the first slot (start + 1 minute) is half a second away
    scheduler.start()
    try:
        deadline = time.monotonic() + 3
        while not scheduler.fired and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        scheduler.stop()
    assert len(scheduler.fired) == 1
    assert scheduler.fired[0].key.startswith("schedule:maintenance.cleanup:")


class _Export(BaseModel):
    dataset: str = "billing"


def test_a_firing_goes_to_its_lane_a_profiled_jobs_not_its_prioritys(jf_aws, sqs):
    """A trial's nightly export (profile="io", as a warning had advised) was sent by jf dev to the
    plain default queue, whose consumer released it unstarted some 70 times a second."""
    from jobframework.jobs import JobRegistry, Schedule, job
    from jobframework.scheduling import scheduled_envelope
    from jobframework.testing import provision_fresh

    registry = JobRegistry()

    @job("exports.nightly", registry=registry, profile="io", schedule=Schedule("rate(1 minute)"))
    def nightly(req: _Export) -> None: ...

    topology, config = provision_fresh(jf_aws.endpoint_url, registry)
    [spec] = topology.schedules
    assert spec.lane == "default-io"
    sqs_sender(config, sqs)(spec, scheduled_envelope(spec, T0, "firing-1"))
    assert receive_all(sqs, config.endpoints("default").url) == []
    [message] = receive_all(sqs, config.endpoints("default-io").url)
    assert json.loads(message["Body"])["type"] == "exports.nightly"
