"""The local scheduler: fires ``@job(schedule=...)`` jobs as EventBridge Scheduler would.

Each firing sends :func:`jobframework.scheduling.scheduled_envelope` (the same body,
id and key as the EventBridge schedule's SQS target: the key holds the slot time, so a
duplicate firing of a slot is a duplicate key) to the job's queue. Like Scheduler's
SQS target it sends the body only, no message attributes.

Expressions use EventBridge syntax:

- ``rate(N minute|minutes|hour|hours|day|days)``: every N units from the scheduler's
  start (the first firing is one interval after the start);
- ``cron(minutes hours day-of-month month day-of-week year)``: six fields, ``?`` in one of
  the day fields, day-of-week 1-7 = SUN-SAT (or ``MON``...), ``L``, ``W`` and ``#`` as in
  EventBridge. The schedule's time zone applies.

Every expression is first checked by :func:`jobframework.schedule_expr.check_expression`, the
same check ``@job`` applies, so what runs here is what EventBridge Scheduler accepts.

A slot missed while the process was busy (or asleep) fires once, late, not once per
missed slot (EventBridge's flexible time window is off).
"""

from __future__ import annotations

import logging
import re
import threading
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from jobframework.envelope import Envelope
from jobframework.errors import ConfigurationError
from jobframework.schedule_expr import check_expression, is_one_time
from jobframework.scheduling import scheduled_envelope
from jobframework.topology import RuntimeConfig, ScheduleSpec

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

log = logging.getLogger(__name__)

_RATE = re.compile(r"^rate\(\s*(\d+)\s+(minute|minutes|hour|hours|day|days)\s*\)$")
_CRON = re.compile(r"^cron\((.+)\)$")
_UNIT_SECONDS = {"minute": 60, "hour": 3600, "day": 86400}
_DOW_NAMES = {"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}


def parse_rate(expression: str) -> timedelta | None:
    """The interval of a ``rate(...)`` expression, or None if it is not one.

    Example:
        >>> parse_rate("rate(5 minutes)")
        datetime.timedelta(seconds=300)
    """
    m = _RATE.match(expression.strip())
    if not m:
        return None
    count, unit = int(m.group(1)), m.group(2).rstrip("s")
    if count < 1:
        raise ConfigurationError(f"{expression!r}: a rate must be at least 1 {unit}")
    if m.group(2) == unit and count != 1:
        raise ConfigurationError(f"{expression!r}: EventBridge wants the plural '{unit}s' for {count}")
    return timedelta(seconds=count * _UNIT_SECONDS[unit])


def _dow_field(value: str) -> str:
    """EventBridge day-of-week (1-7 = SUN-SAT) to cron's (0-6 = SUN-SAT)."""

    def shift(token: str) -> str:
        if token.upper() == "L":
            return "6"  # the last day of the week: Saturday
        if token.upper() in _DOW_NAMES or token == "*":
            return token.upper()
        if token.isdigit():
            n = int(token)
            if not 1 <= n <= 7:
                raise ConfigurationError(f"day-of-week {token} is outside 1-7 (SUN-SAT)")
            return str(n - 1)
        raise ConfigurationError(f"day-of-week {token!r} is not supported")

    out = []
    for part in value.split(","):
        if "#" in part:
            day, nth = part.split("#", 1)
            out.append(f"{shift(day)}#{nth}")
        elif part.endswith("L") and part[:-1]:
            out.append(f"L{shift(part[:-1])}")
        elif "/" in part:
            base, step = part.split("/", 1)
            out.append(f"{'*' if base == '*' else shift(base)}/{step}")
        elif "-" in part:
            lo, hi = part.split("-", 1)
            out.append(f"{shift(lo)}-{shift(hi)}")
        else:
            out.append(shift(part))
    return ",".join(out)


def cron_fields(expression: str) -> tuple[str, str | None]:
    """An EventBridge ``cron(...)`` as a five-field croniter expression and its year field.

    Example:
        >>> cron_fields("cron(0 3 ? * 2-6 *)")
        ('0 3 * * 1-5', None)
        >>> cron_fields("cron(15 10 ? * 6#3 2027)")
        ('15 10 * * 5#3', '2027')
    """
    m = _CRON.match(expression.strip())
    if not m:
        raise ConfigurationError(f"{expression!r} is not a cron(...) expression")
    fields = m.group(1).split()
    if len(fields) != 6:
        raise ConfigurationError(
            f"{expression!r}: EventBridge cron takes six fields (minutes hours day-of-month month "
            f"day-of-week year), got {len(fields)}"
        )
    minute, hour, dom, month, dow, year = fields
    if (dom == "?") == (dow == "?"):
        raise ConfigurationError(f"{expression!r}: exactly one of day-of-month and day-of-week must be '?'")
    dom = "*" if dom == "?" else dom
    dow = "*" if dow == "?" else _dow_field(dow)
    return f"{minute} {hour} {dom} {month} {dow}", (None if year in ("*", "?") else year)


def _year_matches(year: int, field: str) -> bool:
    for token in field.split(","):
        part, step = token, 1
        if "/" in token:
            part, step_text = token.split("/", 1)
            step = int(step_text)
        if part in ("*", "?"):
            lo, hi = 1970, 2199
        elif "-" in part:
            lo_text, hi_text = part.split("-", 1)
            lo, hi = int(lo_text), int(hi_text)
        else:
            lo = int(part)
            hi = lo if step == 1 else 2199
        if lo <= year <= hi and (year - lo) % step == 0:
            return True
    return False


class ScheduleClock:
    """The firing times of one schedule expression."""

    def __init__(self, expression: str, timezone: str = "UTC", start: datetime | None = None) -> None:
        self.expression = expression
        self.tz = ZoneInfo(timezone)
        self.start = (start or datetime.now(UTC)).astimezone(UTC)
        check_expression(expression)
        if is_one_time(expression):
            raise ConfigurationError(f"{expression!r}: the local scheduler fires recurring schedules only")
        self.rate = parse_rate(expression)
        self.cron: str | None = None
        self.year: str | None = None
        if self.rate is None:
            self.cron, self.year = cron_fields(expression)
            from croniter import croniter

            if not croniter.is_valid(self.cron):
                raise ConfigurationError(f"{expression!r} is not a valid cron expression ({self.cron})")

    def next_after(self, moment: datetime) -> datetime | None:
        """The first slot strictly after ``moment`` (UTC), or None if there is none (year past)."""
        moment = moment.astimezone(UTC)
        if self.rate is not None:
            elapsed = (moment - self.start) / self.rate
            n = max(1, int(elapsed) + 1)
            return self.start + n * self.rate
        from croniter import croniter

        assert self.cron is not None
        it = croniter(self.cron, moment.astimezone(self.tz))
        for _ in range(10_000):
            slot: datetime = it.get_next(datetime)
            if self.year is None or _year_matches(slot.year, self.year):
                return slot.astimezone(UTC)
            if slot.year > 2199:
                break
        return None


@dataclass(slots=True)
class _Entry:
    spec: ScheduleSpec
    clock: ScheduleClock
    next_slot: datetime | None


Sender = Callable[[ScheduleSpec, Envelope], None]


def sqs_sender(config: RuntimeConfig, sqs: SQSClient) -> Sender:
    """Send a firing to its lane's queue as Scheduler's SQS target does (the body only): the lane the
    stack's schedule sends to (``high-io`` for a job with a profile), not its priority's plain one."""

    def send(spec: ScheduleSpec, envelope: Envelope) -> None:
        lane = spec.lane or spec.priority.value
        sqs.send_message(QueueUrl=config.endpoints(lane).url, MessageBody=envelope.to_body())

    return send


class LocalScheduler:
    """Fires the topology's schedules on their rate or cron, in a background thread.

    Args:
        schedules: the topology's :class:`ScheduleSpec`\\ s.
        send: what to do with each firing (see :func:`sqs_sender`).
        now: the clock (UTC), injectable for tests.
        tasks: more work for each tick, about once a second (``jf dev`` fires the due one-time
            delay schedules with :func:`jobframework.delays.fire_due`); a failing task is logged.

    Example:
        >>> scheduler = LocalScheduler(topology.schedules, sqs_sender(config, sqs))  # doctest: +SKIP
        >>> scheduler.start()                                                        # doctest: +SKIP
    """

    def __init__(
        self,
        schedules: Iterable[ScheduleSpec],
        send: Sender,
        *,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        tasks: Iterable[Callable[[], object]] = (),
    ) -> None:
        self.send = send
        self.now = now
        self.tasks = list(tasks)
        start = now()
        self.entries = []
        for spec in schedules:
            clock = ScheduleClock(spec.expression, spec.timezone, start)
            self.entries.append(_Entry(spec, clock, clock.next_after(start)))
        self.fired: list[Envelope] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def fire(self, spec: ScheduleSpec, slot: datetime) -> Envelope:
        """Send the firing of ``spec`` for ``slot`` now (what Scheduler does when the slot comes)."""
        envelope = scheduled_envelope(spec, slot, str(uuid.uuid4()))
        self.send(spec, envelope)
        self.fired.append(envelope)
        log.info("schedule %s fired %s job %s for %s", spec.name, spec.job, envelope.id, envelope.key)
        return envelope

    def tick(self) -> list[Envelope]:
        """Fire every schedule whose slot has come (a missed run of slots fires once); run the tasks."""
        for task in self.tasks:
            try:
                task()
            except Exception:
                log.warning("scheduler task %r failed", task, exc_info=True)
        now = self.now()
        fired = []
        for entry in self.entries:
            if entry.next_slot is None or entry.next_slot > now:
                continue
            slot = entry.next_slot
            while True:  # skip to the latest slot due: a long sleep fires once, not once a slot
                following = entry.clock.next_after(slot)
                if following is None or following > now:
                    break
                slot = following
            try:
                fired.append(self.fire(entry.spec, slot))
            except Exception:
                log.warning("schedule %s failed to fire for %s", entry.spec.name, slot, exc_info=True)
            entry.next_slot = entry.clock.next_after(slot)
        return fired

    def seconds_to_next(self) -> float | None:
        slots = [e.next_slot for e in self.entries if e.next_slot is not None]
        if not slots:
            return None
        return max(0.0, (min(slots) - self.now()).total_seconds())

    def _run(self) -> None:
        while not self._stop.is_set():
            self.tick()
            wait = self.seconds_to_next()
            self._stop.wait(1.0 if wait is None else min(max(wait, 0.01), 1.0))

    def start(self) -> LocalScheduler:
        if (self.entries or self.tasks) and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="jf-scheduler", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    def describe(self) -> list[dict[str, Any]]:
        """Each schedule's job, expression and next slot (for ``jf dev``)."""
        return [
            {
                "job": e.spec.job,
                "expression": e.spec.expression,
                "next": e.next_slot.isoformat(timespec="seconds") if e.next_slot else None,
            }
            for e in self.entries
        ]
