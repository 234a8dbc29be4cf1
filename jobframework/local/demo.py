"""``jf demo``: the whole job lifecycle on the embedded AWS, in well under a minute.

It starts the embedded AWS, provisions the example jobs' topology (:mod:`handlers.jobs`),
runs the event-source-mapping emulator with the real consumer, and enqueues a mixed
workload on all four priorities: jobs that succeed, webhooks that fail transiently and
then succeed, a declined payment (permanent), a poison-pill report (exhausted), a
malformed message, CRM syncs that fail while the CRM is "broken", and the scheduled
cleanup (fired once by the local scheduler), and two ``order.place`` sagas: one that
succeeds, one whose reservation fails so that the charge is refunded. When every job has
settled it "fixes" the CRM, redrives the CRM dead letters and shows them succeed, then
prints a summary.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from jobframework.consumer import Outcome, RecordOutcome
from jobframework.jobs import Priority

DEMO_STAGE = "demo"
CRM = "crm"


def percentile(values: list[float], q: float) -> float | None:
    """The nearest-rank ``q`` percentile (0..100) of ``values``, None when empty.

    Example:
        >>> percentile([1.0, 2.0, 3.0, 4.0], 50)
        2.0
    """
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[min(len(ordered), int(rank)) - 1]


@dataclass
class Tally:
    """Counts the consumer's record outcomes (a consumer listener; thread-safe)."""

    succeeded: Counter[str] = field(default_factory=Counter)  # by priority
    dead: Counter[str] = field(default_factory=Counter)  # by priority
    retried: Counter[str] = field(default_factory=Counter)  # by priority
    reasons: Counter[str] = field(default_factory=Counter)
    succeeded_types: Counter[str] = field(default_factory=Counter)
    retried_then_succeeded: int = 0
    queue_wait_ms: list[float] = field(default_factory=list)
    processing_ms: list[float] = field(default_factory=list)
    retried_ids: set[str] = field(default_factory=set)
    timing: bool = True
    """Record queue waits (off during the redrive phase: a redriven job's wait spans its DLQ stay)."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __call__(self, outcome: RecordOutcome) -> None:
        prio = outcome.priority or "?"
        with self._lock:
            if outcome.outcome == Outcome.SUCCEEDED:
                self.succeeded[prio] += 1
                self.succeeded_types[outcome.job_type or "?"] += 1
                if outcome.job_id in self.retried_ids:
                    self.retried_then_succeeded += 1
                if outcome.queue_wait_ms is not None and self.timing:
                    self.queue_wait_ms.append(outcome.queue_wait_ms)
                if outcome.processing_ms is not None:
                    self.processing_ms.append(outcome.processing_ms)
            elif outcome.outcome in (Outcome.DEAD_LETTERED, Outcome.FAILED):  # (FAILED: a saga's step)
                self.dead[prio] += 1
                if outcome.outcome == Outcome.DEAD_LETTERED:  # (its saga took the other: no letter)
                    self.reasons[str(outcome.reason)] += 1
            elif outcome.outcome == Outcome.RETRIED and not outcome.unrun:  # (a wait is no retry)
                self.retried[prio] += 1
                if outcome.job_id:
                    self.retried_ids.add(outcome.job_id)

    def settled(self, prio: str | None = None) -> int:
        with self._lock:
            if prio is None:
                return sum(self.succeeded.values()) + sum(self.dead.values())
            return self.succeeded[prio] + self.dead[prio]


@dataclass
class DemoReport:
    """What the demo did; ``jf demo --json`` prints :meth:`as_dict`."""

    enqueued: dict[str, int]
    succeeded: int
    retries: int
    retried_then_succeeded: int
    dead_lettered: dict[str, int]
    queue_wait_ms: dict[str, float | None]
    processing_ms: dict[str, float | None]
    redriven: int
    redriven_succeeded: int
    left_in_dlqs: dict[str, int]
    scheduled: list[str]
    elapsed_seconds: float
    settled: bool
    sagas: list[dict[str, Any]] = field(default_factory=list)
    """Each order saga: order, id, status, reason, and the steps that were compensated."""
    phases: dict[str, float] = field(default_factory=dict)
    """Seconds of each phase: ``start`` (embedded AWS, topology, workers), ``workload`` (until every
    job settled), ``redrive`` (the CRM dead letters, until they succeeded), ``stop``; they add up to
    ``elapsed_seconds``."""

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _workload() -> list[tuple[str, dict[str, Any]]]:
    jobs: list[tuple[str, dict[str, Any]]] = []
    jobs += [
        ("auth.password_reset", {"user_id": f"u-{i}", "email": f"user{i}@example.com"}) for i in range(5)
    ]
    jobs += [("emails.send", {"to": f"c{i}@example.com", "subject": f"Order {i} shipped"}) for i in range(8)]
    jobs += [
        ("payments.capture", {"order_id": "o-1", "amount_cents": 1999, "card_token": "tok_visa"}),
        ("payments.capture", {"order_id": "o-2", "amount_cents": 4500, "card_token": "tok_mc"}),
        ("payments.capture", {"order_id": "o-3", "amount_cents": 999, "card_token": "declined_insufficient"}),
    ]
    jobs += [
        (
            "webhooks.deliver",
            {"url": f"https://hooks.example.com/{i}", "event": "order.paid", "fail_times": f},
        )
        for i, f in enumerate((0, 0, 2, 2))
    ]
    jobs += [("crm.sync", {"account_id": f"acct-{i}"}) for i in range(3)]
    jobs += [("reports.generate", {"report_id": f"r-{i}", "rows": 10 * i}) for i in range(6)]
    jobs += [("reports.generate", {"report_id": "poison"})]
    return jobs


DEMO_ORDERS: tuple[dict[str, Any], ...] = (
    {"order_id": "o-100", "amount_cents": 2599, "sku": "sku-blue-mug"},
    {"order_id": "o-101", "amount_cents": 4200, "sku": "sku-sold-out"},
)
"""Order sagas: the first succeeds; the second's reservation fails and its charge is refunded."""
SAGA_JOBS = 6
"""Jobs the two order sagas run: charge, reserve, confirm; charge, reserve (fails), refund."""


def _saga_outcome(record: Any, order_id: str) -> dict[str, Any]:
    return {
        "order_id": order_id,
        "id": record.id if record else None,
        "status": record.status.value if record else "unknown",
        "reason": record.reason if record else None,
        "compensated": [
            s.name
            for s in (record.steps if record else [])
            if s.compensation_state is not None and s.compensation_state.value == "compensated"
        ],
    }


MALFORMED_BODY = '{"v": 1, "type": "emails.send", "payload": "not an object"'


def run_demo(
    *,
    console: Any = None,
    live: bool = True,
    port: int = 0,
    timeout: float = 120.0,
    verbose: bool = False,
) -> DemoReport:
    """Run the demo; returns its report (``settled`` is False if it did not finish in ``timeout`` s)."""
    os.environ.setdefault("JF_METRICS_DISABLED", "true")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING" if not verbose else "INFO")
    from jobframework.telemetry import job_logger

    job_logger()  # Powertools' Logger is the "jobframework" logger; create it before quieting it
    fw_logger = logging.getLogger("jobframework")
    old_level = fw_logger.level
    if not verbose:
        fw_logger.setLevel(logging.CRITICAL)
    started = time.monotonic()
    try:
        return _run(console=console, live=live, port=port, timeout=timeout, started=started)
    finally:
        fw_logger.setLevel(old_level)


DEMO_JOBS = "handlers.jobs"
"""The example jobs the demo runs: ``handlers/jobs.py`` of a jobframework checkout (not installed)."""


def example_jobs() -> Any:
    import importlib

    from jobframework.errors import ConfigurationError
    from jobframework.modules import import_job_modules

    try:
        import_job_modules([DEMO_JOBS], cwd_importable=True)
    except ConfigurationError as exc:
        raise ConfigurationError(
            "jf demo runs the example jobs of a jobframework checkout (handlers/jobs.py): run it from "
            "the clone's root (./tasks.sh demo); for your own jobs use jf dev --jobs yourpkg.jobs"
        ) from exc
    return importlib.import_module(DEMO_JOBS)


def _run(*, console: Any, live: bool, port: int, timeout: float, started: float) -> DemoReport:
    example = example_jobs()
    from jobframework.client import EnqueueRequest, JobClient
    from jobframework.consumer import consumer
    from jobframework.dlq import DeadLetters
    from jobframework.jobs import registry
    from jobframework.local.aws import EmbeddedAWS
    from jobframework.local.emulator import Emulator, pollers_for
    from jobframework.local.scheduler import LocalScheduler, sqs_sender
    from jobframework.topology import Topology, TopologySettings

    marks: dict[str, float] = {}
    tally = Tally()
    example.BROKEN_DOWNSTREAMS.add(CRM)
    aws = EmbeddedAWS(port).start()
    emulator: Emulator | None = None
    try:
        topology = Topology.from_registry(registry, TopologySettings(stage=DEMO_STAGE))
        config = aws.provision(topology)
        sqs = aws.client("sqs")
        handler = consumer(registry, config=config, sqs_client=sqs, listeners=[tally])
        emulator = Emulator(
            pollers_for(config, topology), handler, sqs, idle_seconds=0.02, max_idle_seconds=0.05
        ).start()
        marks["start"] = time.monotonic()

        expected: Counter[str] = Counter()
        client = JobClient(config, registry=registry, sqs_client=sqs)
        requests = [EnqueueRequest(name, payload) for name, payload in _workload()]
        for result in client.enqueue_many(requests):
            if not result.ok:
                raise RuntimeError(f"enqueue failed: {result.error}")
            expected[result.priority.value] += 1
        saga_ids: dict[str, str] = {
            str(order["order_id"]): example.order_saga.start(order, client=client) for order in DEMO_ORDERS
        }
        expected[Priority.HIGH.value] += SAGA_JOBS

        def sagas_ended() -> bool:
            records = [client.saga_status(sid) for sid in saga_ids.values()]
            return all(r is not None and r.status.terminal for r in records)

        sqs.send_message(QueueUrl=config.endpoints(Priority.DEFAULT).url, MessageBody=MALFORMED_BODY)
        expected[Priority.DEFAULT.value] += 1
        scheduler = LocalScheduler(topology.schedules, sqs_sender(config, sqs))
        scheduled = []
        slot = datetime.now(UTC).replace(second=0, microsecond=0)
        for spec in topology.schedules:  # fire each schedule's current slot now
            scheduled.append(scheduler.fire(spec, slot).key)
            expected[spec.priority.value] += 1

        total = sum(expected.values())
        settled = _wait(
            lambda: tally.settled() >= total and sagas_ended(),
            started + timeout,
            console=console if live else None,
            tally=tally,
            expected=expected,
            title="running the workload",
        )

        marks["workload"] = time.monotonic()
        # The operator fixes the CRM and redrives its dead letters; they now succeed.
        example.BROKEN_DOWNSTREAMS.discard(CRM)
        tally.timing = False
        crm_before = tally.succeeded_types["crm.sync"]
        dead_letters = DeadLetters(config, sqs)
        redrive = dead_letters.redrive(Priority.DEFAULT, job_type="crm.sync")
        expected[Priority.DEFAULT.value] += redrive.moved
        settled = (
            _wait(
                lambda: tally.succeeded_types["crm.sync"] - crm_before >= redrive.moved,
                started + timeout,
                console=console if live else None,
                tally=tally,
                expected=expected,
                title=f"redriving {redrive.moved} crm.sync dead letters (CRM fixed)",
            )
            and settled
        )
        marks["redrive"] = time.monotonic()
        emulator.stop(drain_timeout=5)
        emulator = None
        left = {d.priority: d.depth for d in dead_letters.depths(sample=0)}
        sagas = [_saga_outcome(client.saga_status(sid), order) for order, sid in saga_ids.items()]
    finally:
        if emulator is not None:
            emulator.stop(drain_timeout=2)
        example.BROKEN_DOWNSTREAMS.discard(CRM)
        aws.stop()
    ended = time.monotonic()
    phases, previous = {}, started
    for name, mark in (*marks.items(), ("stop", ended)):
        phases[name], previous = round(mark - previous, 2), mark

    return DemoReport(
        enqueued=dict(expected - Counter({Priority.DEFAULT.value: redrive.moved})),
        succeeded=sum(tally.succeeded.values()),
        retries=sum(tally.retried.values()),
        retried_then_succeeded=tally.retried_then_succeeded,
        dead_lettered=dict(tally.reasons),
        queue_wait_ms={
            "p50": percentile(tally.queue_wait_ms, 50),
            "p95": percentile(tally.queue_wait_ms, 95),
        },
        processing_ms={
            "p50": percentile(tally.processing_ms, 50),
            "p95": percentile(tally.processing_ms, 95),
        },
        redriven=redrive.moved,
        redriven_succeeded=tally.succeeded_types["crm.sync"] - crm_before,
        left_in_dlqs=left,
        scheduled=scheduled,
        elapsed_seconds=round(ended - started, 2),
        settled=settled,
        sagas=sagas,
        phases=phases,
    )


def _wait(
    done: Callable[[], bool],
    deadline: float,
    *,
    console: Any,
    tally: Tally,
    expected: Counter[str],
    title: str,
) -> bool:
    """Wait until ``done()`` or the deadline, showing live progress when a console is given."""
    if console is None:
        while not done() and time.monotonic() < deadline:
            time.sleep(0.05)
        return done()
    from rich.live import Live

    from jobframework.local.demo_summary import progress_table

    with Live(progress_table(tally, expected, title), console=console, refresh_per_second=10) as view:
        while not done() and time.monotonic() < deadline:
            time.sleep(0.1)
            view.update(progress_table(tally, expected, title))
        view.update(progress_table(tally, expected, title))
    console.line()
    return done()
