"""Chaos run: thousands of jobs through `jf worker` with failures, duplicates and SIGKILLs.

The real consumer and the event-source-mapping emulator run in `jf worker` subprocesses
against the embedded AWS. The workload (:mod:`tests.e2e.chaos_workload`) fails 20 % of the
jobs transiently on their first one or two attempts and 1 % for good; 5 % of the envelopes
are sent twice (same id, same key), half within the same wave and half a wave later. The
worker is SIGKILLed and restarted at least four times: twice at a random moment while a
batch runs, and twice exactly in the crash window (a job has written its effect, Powertools
has not yet saved the COMPLETED record).

A quarter of the jobs are ``async def``, a third of the transient failures are BaseExceptions
(``KeyboardInterrupt``, ``asyncio.CancelledError``), and every wave an invocation with 1 s left
releases the records it receives (handed back unrun as fresh copies: not attempts).

What the framework guarantees, and what this shows:

* at-least-once: every job ends applied or in its DLQ with a ``jf-reason`` (none lost);
* a job whose idempotency record says COMPLETED never runs again (duplicate deliveries and
  redeliveries after a kill are skipped);
* a job killed between its effect and the COMPLETED record runs again once the in-progress
  record expires (the invocation's remaining time), so an effect that must happen once has to
  detect the replay itself: here a conditional write keyed by the job key.

The accounting asserted at the end: every job's key is in the ledger exactly once or in the
DLQ with reason ``permanent``, never both; the job body reached its effect a second time
only for jobs whose first effect was written by a worker that was then SIGKILLed (each
crash-window kill gives exactly such a replay).

The CI run has 2,000 jobs; ``--run-slow`` adds a 10,000-job run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from jobframework import envelope as wire
from jobframework.consumer import Outcome, RecordOutcome, consumer
from jobframework.envelope import Envelope
from jobframework.jobs import JobRegistry
from jobframework.testing import FakeLambdaContext, consume_once, provision_fresh, receive_all

from . import chaos_workload as workload

REPO = Path(__file__).resolve().parents[2]
JF = str(Path(sys.executable).with_name("jf"))
VISIBILITY_SECONDS = 5
"""Lowered from the topology's 6x the consumer timeout so that a killed batch comes back soon."""
WAVE = 50
LOW_WATER = 40
"""A new wave is sent when fewer than this many jobs are unsettled (moto slows as a queue deepens)."""
STALL_SECONDS = 60
"""No job event for this long fails the run (a crash-window replay waits ~35 s for its in-progress record)."""


@dataclass
class Kill:
    kind: str  # "window" (after an effect, before COMPLETED) or "batch" (a random moment mid-batch)
    pid: int
    at: float
    job: int | None = None
    interrupted: int = 0
    """Jobs the killed worker had started and not finished."""


@dataclass
class Events:
    """Reads the workload's append-only events file as it grows."""

    path: Path
    offset: int = 0
    lines: list[tuple[str, int, int, int]] = field(default_factory=list)
    applied: set[int] = field(default_factory=set)
    failed_for_good: set[int] = field(default_factory=set)
    paused: list[tuple[int, int]] = field(default_factory=list)
    runs: int = 0

    def poll(self) -> list[tuple[str, int, int, int]]:
        with self.path.open("rb") as f:
            f.seek(self.offset)
            data = f.read()
        end = data.rfind(b"\n") + 1
        self.offset += end
        new = []
        for raw in data[:end].decode().splitlines():
            kind, n, attempt, pid = raw.split()
            event = (kind, int(n), int(attempt), int(pid))
            new.append(event)
            if kind in ("effect", "replay"):
                self.applied.add(event[1])
            elif kind == "permanent":
                self.failed_for_good.add(event[1])
            elif kind == "pause":
                self.paused.append((event[1], event[3]))
            elif kind == "run":
                self.runs += 1
        self.lines.extend(new)
        return new

    @property
    def settled(self) -> int:
        return len(self.applied) + len(self.failed_for_good)

    def interrupted(self, pid: int) -> int:
        """Jobs ``pid`` started and did not finish (no terminal event of its own after the run)."""
        open_runs: Counter[int] = Counter()
        for kind, n, _attempt, p in self.lines:
            if p != pid:
                continue
            if kind in ("run", "pause"):  # a paused job is inside the crash window, not finished
                open_runs[n] += 1
            elif kind in ("transient", "permanent", "effect", "replay") and open_runs[n]:
                open_runs[n] -= 1
        return sum(1 for v in open_runs.values() if v)


class Worker:
    """One `jf worker` subprocess on the chaos queue, its output in a log file."""

    def __init__(self, env: dict[str, str], log_dir: Path, number: int) -> None:
        self.log = log_dir / f"worker-{number}.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [
                    JF,
                    "worker",
                    "--queues",
                    "default",
                    "--jobs",
                    "tests.e2e.chaos_jobs",
                    "--drain-timeout",
                    "20",
                ],
                env=env,
                cwd=REPO,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            pytest.fail(f"worker {self.pid} exited with {self.proc.returncode}:\n{self.tail()}")

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=40)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


@dataclass
class ChaosPlan:
    jobs: int
    window_kills: tuple[float, ...]
    """Fractions of the run at which a job pauses after its effect, to be killed there."""
    batch_kills: tuple[float, ...]
    """Fractions of settled jobs at which the worker is killed while it runs a batch."""
    timeout: float
    job_status: bool = False
    """Keep the state table (job status, retry budget) on: two more requests per job."""


def _pause_jobs(plan: ChaosPlan) -> list[int]:
    chosen = []
    for fraction in plan.window_kills:
        n = int(plan.jobs * fraction)
        while (
            workload.is_permanent(n)
            or workload.transient_failures(n)
            or workload.is_duplicated(n)
            or workload.is_async(n)
        ):
            n += 1
        chosen.append(n)
    return chosen


def _send(sqs: Any, url: str, envelopes: list[Envelope]) -> None:
    for start in range(0, len(envelopes), 10):
        chunk = envelopes[start : start + 10]
        response = sqs.send_message_batch(
            QueueUrl=url,
            Entries=[
                {
                    "Id": str(i),
                    "MessageBody": env.to_body(),
                    "MessageAttributes": wire.send_attributes(env, {}),
                }
                for i, env in enumerate(chunk)
            ],
        )
        assert not response.get("Failed"), response["Failed"]


def _queue_empty(sqs: Any, url: str) -> bool:
    """No message in the queue: visible, in flight or delayed.

    Read twice: the embedded AWS counts the visible, the in-flight and the delayed messages each at
    its own instant, so a message whose visibility timeout runs out between the visible count and
    the in-flight one is in none of them (a killed worker's record, settled but not deleted, does
    so once). It cannot do so again in the second read: it is visible then, or received again.
    """
    return _counted_empty(sqs, url) and _counted_empty(sqs, url)


def _counted_empty(sqs: Any, url: str) -> bool:
    attrs = sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=[
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        ],
    )["Attributes"]
    return all(int(v) == 0 for v in attrs.values())


def _read_ledger(ledger: Path) -> dict[str, int]:
    """The applied jobs' keys and the pid that applied each."""
    return {
        workload.key_of(int(entry.name)): int(entry.read_text().split()[0])
        for entry in ledger.iterdir()
        if not entry.name.startswith(".")
    }


def run_chaos(jf_aws: Any, tmp_path: Path, plan: ChaosPlan) -> None:
    started = time.monotonic()
    registry = JobRegistry()
    workload.register(registry)
    _topology, config = provision_fresh(jf_aws.endpoint_url, registry)
    if plan.job_status:  # status writes and the retry budget (20 % transient failures stay under 1.0)
        config = config.model_copy(update={"retry_budget": 1.0})
    else:  # two requests a job fewer to the embedded AWS, the run's bottleneck
        config = config.model_copy(update={"state_table": None})
    sqs = jf_aws.client("sqs")
    queue = config.endpoints("default")
    sqs.set_queue_attributes(QueueUrl=queue.url, Attributes={"VisibilityTimeout": str(VISIBILITY_SECONDS)})
    ledger_dir = tmp_path / "ledger"
    ledger_dir.mkdir()
    events = Events(tmp_path / "events.txt")
    events.path.touch()
    pause_jobs = _pause_jobs(plan)
    env = {k: v for k, v in os.environ.items() if not k.startswith("JF_")}
    env.update(
        config.to_env(),
        POWERTOOLS_METRICS_DISABLED="true",
        POWERTOOLS_LOG_LEVEL="INFO",  # the consumer says "duplicate delivery skipped" at INFO
        **{
            workload.ENV_LEDGER: str(ledger_dir),
            workload.ENV_EVENTS: str(events.path),
            workload.ENV_PAUSE: ",".join(map(str, pause_jobs)),
        },
    )

    # An invocation with 1 s left hands each record of its batch back unrun (released, not an attempt).
    heard: list[RecordOutcome] = []
    releaser = consumer(registry, config=config, sqs_client=sqs, listeners=[heard.append])
    workers = [Worker(env, tmp_path, 0)]
    kills: list[Kill] = []
    batch_kills = list(plan.batch_kills)
    sent = 0
    resend_later: list[Envelope] = []
    duplicates_sent = 0
    last_empty_check = 0.0
    last_progress = started
    deadline = started + plan.timeout
    try:
        while True:
            new = events.poll()
            if new:
                last_progress = time.monotonic()
            worker = workers[-1]
            window = [(n, pid) for n, pid in events.paused if pid == worker.pid]
            # a job of this worker is running right now (its newest event is a start): mid-batch
            fresh_run = bool(new) and new[-1][0] == "run" and new[-1][3] == worker.pid
            kind = None
            if window:
                kind = "window"
            elif (
                batch_kills
                and events.settled >= batch_kills[0] * plan.jobs
                # mid-batch: a start just seen, or a job of this worker started and not finished (a
                # consumer quick enough that a poll rarely ends on a start still gets its kills)
                and (fresh_run or events.interrupted(worker.pid) > 0)
            ):
                kind = "batch"
                batch_kills.pop(0)
            if kind is not None:
                worker.kill()
                events.poll()
                kills.append(
                    Kill(
                        kind,
                        worker.pid,
                        time.monotonic() - started,
                        job=window[0][0] if window else None,
                        interrupted=events.interrupted(worker.pid),
                    )
                )
                workers.append(Worker(env, tmp_path, len(workers)))
                continue

            if sent < plan.jobs and sent - events.settled < LOW_WATER:
                wave = [
                    Envelope.new(workload.job_name(n), {"n": n}, key=workload.key_of(n))
                    for n in range(sent, min(plan.jobs, sent + WAVE))
                ]
                twice = [env for env in wave if workload.is_duplicated(env.payload["n"])]
                _send(sqs, queue.url, resend_later + wave + [e for e in twice if e.payload["n"] % 2 == 0])
                consume_once(releaser, sqs, queue.url, context=FakeLambdaContext(1.0))
                duplicates_sent += len(twice)
                resend_later = [e for e in twice if e.payload["n"] % 2 == 1]
                sent += len(wave)
            elif sent == plan.jobs and resend_later:
                _send(sqs, queue.url, resend_later)
                resend_later = []

            now = time.monotonic()
            if (
                sent == plan.jobs
                and not resend_later
                and events.settled == plan.jobs
                and now - last_empty_check > 0.5
            ):
                last_empty_check = now
                if _queue_empty(sqs, queue.url):
                    break
            worker.check_alive()
            if now > deadline or now - last_progress > STALL_SECONDS:
                missing = sorted(set(range(plan.jobs)) - events.applied - events.failed_for_good)
                pytest.fail(
                    f"not settled after {now - started:.0f}s: {len(missing)} jobs open, e.g. {missing[:10]}; "
                    f"kills {kills}\n{worker.tail()}"
                )
            time.sleep(0.02)
        drained = workers[-1].stop()
    finally:
        for w in workers:
            if w.proc.poll() is None:
                w.proc.kill()
    elapsed = time.monotonic() - started
    assert drained == 0, workers[-1].tail()

    # -- the accounting ------------------------------------------------------------------------------
    ledger = _read_ledger(ledger_dir)
    dead = receive_all(sqs, queue.dlq_url)
    dead_reasons: dict[str, list[str]] = defaultdict(list)
    for message in dead:
        reason = wire.message_attribute(message, wire.ATTR_REASON) or "<no jf-reason>"
        dead_reasons[Envelope.model_validate_json(message["Body"]).key].append(reason)
    keys = {workload.key_of(n) for n in range(plan.jobs)}
    permanent = {workload.key_of(n) for n in range(plan.jobs) if workload.is_permanent(n)}
    effects = Counter(n for kind, n, _a, _p in events.lines if kind == "effect")
    replays = [(n, pid) for kind, n, _a, pid in events.lines if kind == "replay"]
    killed = {k.pid for k in kills}
    logs = "\n".join(w.log.read_text(errors="replace") for w in workers)
    counts: dict[str, Any] = {
        "jobs": plan.jobs,
        "applied": len(ledger),
        "dead-lettered jobs": len(dead_reasons),
        "dead letters by reason": dict(Counter(r for rs in dead_reasons.values() for r in rs)),
        "duplicates sent": duplicates_sent,
        "duplicates suppressed": logs.count("duplicate delivery skipped"),
        "deferred while in progress": logs.count("is running in another delivery"),
        "transient failures": sum(1 for kind, *_ in events.lines if kind == "transient"),
        "BaseException failures": sum(
            1 for kind, n, *_ in events.lines if kind == "transient" and n % 3 == 0
        ),
        "async job runs": sum(1 for kind, n, *_ in events.lines if kind == "run" and workload.is_async(n)),
        "released": sum(1 for o in heard if o.outcome == Outcome.RELEASED),
        "job runs": events.runs,
        "replays after a kill": len(replays),
        "kills": [(k.kind, round(k.at, 1), k.interrupted) for k in kills],
        "workers started": len(workers),
        "elapsed s": round(elapsed, 1),
    }
    print("\nchaos run:", counts)

    assert ledger.keys() | dead_reasons.keys() == keys, "a job was lost"
    assert not ledger.keys() & dead_reasons.keys(), "a job was both applied and dead-lettered"
    assert set(dead_reasons) == permanent
    assert all(reasons and set(reasons) == {"permanent"} for reasons in dead_reasons.values()), dead_reasons
    assert max(effects.values()) == 1  # the conditional write applies each effect once
    for n, _pid in replays:  # the body reached a done effect again only after its applier was killed
        assert ledger[workload.key_of(n)] in killed, f"job {n} replayed without a kill: idempotency failed"
    assert {n for n, _ in replays} >= set(pause_jobs), "a crash-window kill did not replay its job"
    assert len(kills) >= 3 and {k.kind for k in kills} == {"window", "batch"}
    assert all(k.interrupted >= 1 for k in kills if k.kind == "window"), kills  # killed inside a job
    assert counts["duplicates suppressed"] >= 1
    assert counts["released"] >= 1 and counts["async job runs"] >= 1 and counts["BaseException failures"] >= 1
    assert [o for o in heard if o.outcome != Outcome.RELEASED] == []  # the releaser ran nothing
    assert _queue_empty(sqs, queue.url)


def test_chaos_2000_jobs_with_failures_duplicates_and_sigkills(jf_aws, tmp_path):
    run_chaos(
        jf_aws,
        tmp_path,
        ChaosPlan(jobs=2000, window_kills=(0.05, 0.35), batch_kills=(0.2, 0.6), timeout=170),
    )


@pytest.mark.slow
def test_chaos_10000_jobs_with_failures_duplicates_and_sigkills(jf_aws, tmp_path):
    run_chaos(
        jf_aws,
        tmp_path,
        ChaosPlan(
            jobs=10_000,
            window_kills=(0.05, 0.3, 0.55),
            batch_kills=(0.15, 0.4, 0.7, 0.85),
            timeout=900,
            job_status=True,
        ),
    )
