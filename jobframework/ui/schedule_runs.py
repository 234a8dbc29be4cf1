"""A schedule's recent runs, its heartbeat and its missed runs, read from the job status records.

Each firing of ``@job(schedule=...)`` is a job whose key is ``schedule:<job>:<slot time>``
(:func:`jobframework.scheduling.schedule_key`), so the status records of keys with that prefix are the
schedule's runs. The heartbeat is the last run that succeeded (the consumer emits the ``Heartbeat``
metric for the same runs). A missed run is a slot of the schedule's expression, between the first
run recorded in the window and now, for which no run was recorded (with no run recorded at all
nothing is called missed: the page says that no run was seen); a ``rate(...)`` schedule's slots
count from its scheduler's start, so they are anchored on the latest recorded slot. Status records
expire after seven days (:data:`jobframework.state.STATUS_TTL_SECONDS`), which bounds the window.

The next slot is known for a cron schedule only: a ``rate(...)`` schedule fires at its interval
counted from when EventBridge Scheduler created it (or ``jf dev`` started), which the runs do not
tell (an "Enqueue now" run has a slot of its own), so its next time is not guessed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from jobframework.local.scheduler import ScheduleClock, parse_rate
from jobframework.scheduling import SCHEDULE_KEY_PREFIX, schedule_key
from jobframework.state import JobState, JobStatus, StateStore
from jobframework.topology import ScheduleSpec
from jobframework.ui.records import find_jobs

if TYPE_CHECKING:
    from jobframework.client import JobClient
    from jobframework.outgoing import EnqueueResult

WINDOW = timedelta(hours=24)
GRACE = timedelta(minutes=2)
"""A slot younger than this is not called missed yet (its run may still be on its way)."""
MAX_SLOTS = 2000


@dataclass
class ScheduleRuns:
    spec: ScheduleSpec
    next_slot: datetime | None
    """A cron schedule's next slot; ``None`` for a rate schedule (see :attr:`every`) or an ended cron."""
    every: str | None = None
    """A rate schedule's interval (``every 1 minute``): its next time is not known."""
    runs: list[JobStatus] = field(default_factory=list)
    """Newest first."""
    expected: int = 0
    """Slots in the window that should have run by now."""
    missed: list[datetime] = field(default_factory=list)
    complete: bool = True

    @property
    def last_run(self) -> JobStatus | None:
        return self.runs[0] if self.runs else None

    @property
    def heartbeat(self) -> JobStatus | None:
        """The last run that succeeded."""
        return next((r for r in self.runs if r.status is JobState.SUCCEEDED), None)


def interval(expression: str) -> str | None:
    """A ``rate(...)`` expression as its interval; ``None`` for any other expression.

    Example:
        >>> interval("rate(1 minute)"), interval("rate(5 hours)"), interval("cron(0 * * * ? *)")
        ('every 1 minute', 'every 5 hours', None)
    """
    if parse_rate(expression) is None:
        return None
    return "every " + " ".join(expression.strip().removeprefix("rate(").removesuffix(")").split())


def slot_of(job: JobStatus) -> datetime | None:
    """The slot time in a scheduled run's key (``schedule:<job>:2026-12-02T13:00:00Z``)."""
    if not job.key or not job.key.startswith(SCHEDULE_KEY_PREFIX):
        return None
    stamp = job.key.rsplit(":", 3)[-3:]
    try:
        return datetime.fromisoformat(":".join(stamp).replace("Z", "+00:00"))
    except ValueError:
        return None


def _expected_slots(clock: ScheduleClock, start: datetime, end: datetime, anchor: datetime) -> list[datetime]:
    slots: list[datetime] = []
    if clock.rate is not None:
        step = clock.rate
        moment = anchor - ((anchor - start) // step) * step
        while moment <= end and len(slots) < MAX_SLOTS:
            slots.append(moment)
            moment += step
        return slots
    moment = start - timedelta(microseconds=1)
    while len(slots) < MAX_SLOTS:
        slot = clock.next_after(moment)
        if slot is None or slot > end:
            break
        slots.append(slot)
        moment = slot
    return slots


def schedule_runs(
    store: StateStore, spec: ScheduleSpec, *, now: datetime | None = None, window: timedelta = WINDOW
) -> ScheduleRuns:
    """The runs of ``spec`` recorded in the last ``window``, and the slots without a run."""
    now = (now or datetime.now(UTC)).astimezone(UTC)
    clock = ScheduleClock(spec.expression, spec.timezone, start=now)
    found = find_jobs(store, key_prefix=schedule_key(spec.job, ""), limit=None)
    runs = sorted(found.jobs, key=lambda j: slot_of(j) or datetime.min.replace(tzinfo=UTC), reverse=True)
    view = ScheduleRuns(
        spec=spec,
        next_slot=clock.next_after(now) if clock.rate is None else None,
        every=interval(spec.expression),
        runs=runs,
        complete=found.complete,
    )
    seen = {s for s in (slot_of(r) for r in runs) if s is not None}
    if not seen:
        return view
    start, end = max(now - window, min(seen)), now - GRACE
    anchor = max(seen)
    expected = _expected_slots(clock, start, end, anchor)
    view.expected = len(expected)
    if clock.rate is not None:
        # Slots of a rate schedule drift with its scheduler's restarts: a run within half a period counts.
        half = clock.rate / 2
        view.missed = [s for s in expected if not any(abs(s - r) < half for r in seen)]
    else:
        view.missed = [s for s in expected if s not in seen]
    return view


def slot_stamp(moment: datetime) -> str:
    """A slot time as Scheduler writes it into the key (``2026-12-02T13:00:00Z``)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def manual_stamp(moment: datetime) -> str:
    """The slot of a run enqueued by hand (``jf schedules --run``, the console's "Enqueue now"): to
    the millisecond, so that it is neither a scheduled slot's (whole seconds: that run would be skipped
    as its duplicate) nor another run's by hand in the same second.

    Example:
        >>> manual_stamp(datetime(2026, 12, 2, 13, 0, 0, 123456, tzinfo=UTC))
        '2026-12-02T13:00:00.123Z'
    """
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def enqueue_by_hand(client: JobClient, spec: ScheduleSpec) -> EnqueueResult:
    """One run of ``spec``'s schedule now (``jf schedules --run``, the console's "Enqueue now"): its
    payload, keyed by a slot of its own (:func:`manual_stamp`), so it counts among the schedule's runs."""
    return client.enqueue(spec.job, spec.payload, key=schedule_key(spec.job, manual_stamp(datetime.now(UTC))))
