"""Outage simulation: what retries do to a downstream that is down, with and without jitter and budget.

Time-compressed and deterministic (seeded). ``jobs`` jobs arrive uniformly over
``arrival_seconds`` from t=0 (0 = a burst when the outage starts) on one queue; every call to the
downstream fails with ``ConnectionError`` from ``outage_start`` for ``outage_seconds``, and
succeeds otherwise. Simulated time advances in steps of ``step`` seconds; the due jobs of a
step are processed in batches of ``batch_size`` as the consumer does:

* a first attempt is counted with :meth:`jobframework.budget.BatchBudget.first_attempt`;
* a failure is classified by the framework's :func:`jobframework.classification.classify` with a real
  :class:`jobframework.retry.RetryPolicy` (so the delay is the framework's
  :func:`jobframework.retry.compute_backoff`, jitter drawn from a seeded ``random.Random``);
* with the budget on, a retry must pass :meth:`BatchBudget.allow_retry` (the framework's
  :func:`jobframework.budget.retries_allowed` over an :class:`InMemoryBudgetCounter` on the
  simulated clock); ``False`` dead-letters the job with reason ``budget``;
* the delay is rounded up to whole seconds (``ChangeMessageVisibility`` takes integers), and
  the budget is flushed once per batch.

Nothing here re-implements backoff or budget arithmetic. Optionally ``capacity`` limits the
downstream calls the consumers make per second (the event source mapping's maximum
concurrency); the rest wait in the queue. By default it is unlimited, so the peak shows the
herd that the retries themselves form.

Six scenarios: {no jitter, proportional, full} x {budget off, budget on}. Per scenario: peak
downstream request rate (1-second resolution), mean load during the outage, time to drain
after recovery (until the last job succeeds or is dead-lettered), dead letters by reason,
total downstream calls. Draws the downstream load over time into ``docs/outage.png``.

Two workloads by default: the jobs arrive in a burst when the outage starts, and spread over
300 s. Run:

    python bench/outage.py [--jobs 5000] [--arrival-seconds 0 --arrival-seconds 300]
                           [--outage-seconds 600] [--capacity N] [--seed 7]
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from collections import defaultdict, deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jobframework import budget as budget_mod
from jobframework import classification
from jobframework.classification import Action, Reason
from jobframework.retry import Jitter, RetryPolicy

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PNG = ROOT / "docs" / "outage.png"
QUEUE = "default"
JITTERS = (Jitter.NONE, Jitter.PROPORTIONAL, Jitter.FULL)
JITTER_NAMES = {
    Jitter.NONE: "no jitter",
    Jitter.PROPORTIONAL: "proportional jitter",
    Jitter.FULL: "full jitter",
}
COLOURS = {
    Jitter.NONE.value: "tab:red",
    Jitter.PROPORTIONAL.value: "tab:blue",
    Jitter.FULL.value: "tab:green",
}
PLOT_BIN_SECONDS = 5
MAX_SIMULATED_SECONDS = 2 * 86_400


class DownstreamUnavailable(ConnectionError):
    """What the downstream raises while it is down (transient: the framework retries it)."""


@dataclass(slots=True)
class SimJob:
    id: int
    attempt: int = 1


@dataclass
class SimClock:
    """The simulated clock handed to :class:`BatchBudget` (seconds)."""

    now: float = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass
class ScenarioResult:
    """One scenario's outcome; ``calls`` is downstream calls per step."""

    name: str
    jitter: str
    budget: bool
    step: float
    outage_start: float
    outage_end: float
    jobs: int
    calls: list[int] = field(repr=False)
    retry_calls: list[int] = field(repr=False)
    succeeded: int = 0
    dead_letters: dict[str, int] = field(default_factory=dict)
    last_resolved: float = 0.0
    retries_during_outage: int = 0

    @property
    def downstream_calls(self) -> int:
        return sum(self.calls)

    def _peak(self, series: list[int], since: float = 0.0) -> float:
        per_second: dict[int, int] = defaultdict(int)
        for i, n in enumerate(series):
            if i * self.step >= since:
                per_second[int(i * self.step)] += n
        return float(max(per_second.values(), default=0))

    @property
    def peak_rps(self) -> float:
        """Highest downstream request rate over any one second (first attempts and retries)."""
        return self._peak(self.calls)

    @property
    def peak_retry_rps(self) -> float:
        """Highest rate of retries alone over any one second: the herd that backoff forms."""
        return self._peak(self.retry_calls)

    @property
    def peak_rps_after_recovery(self) -> float:
        """Highest request rate over any one second once the downstream is back (the herd it meets)."""
        return self._peak(self.calls, since=self.outage_end)

    @property
    def mean_rps_outage(self) -> float:
        first, last = int(self.outage_start / self.step), int(self.outage_end / self.step)
        seconds = self.outage_end - self.outage_start
        return sum(self.calls[first:last]) / seconds if seconds > 0 else 0.0

    @property
    def drain_seconds(self) -> float:
        """Seconds from recovery until no job is left in the queue."""
        return max(0.0, self.last_resolved - self.outage_end)

    def summary(self) -> dict[str, Any]:
        return {
            "scenario": self.name,
            "jitter": self.jitter,
            "budget": self.budget,
            "peak_rps": self.peak_rps,
            "peak_retry_rps": self.peak_retry_rps,
            "peak_rps_after_recovery": self.peak_rps_after_recovery,
            "mean_rps_outage": round(self.mean_rps_outage, 2),
            "drain_seconds": self.drain_seconds,
            "dlq_exhausted": self.dead_letters.get(Reason.EXHAUSTED.value, 0),
            "dlq_budget": self.dead_letters.get(Reason.BUDGET.value, 0),
            "succeeded": self.succeeded,
            "downstream_calls": self.downstream_calls,
            "calls_per_job": round(self.downstream_calls / max(1, self.jobs), 2),
            "retries_during_outage": self.retries_during_outage,
        }


@dataclass(frozen=True)
class OutageParams:
    """The workload and the outage; durations in seconds."""

    jobs: int = 5000
    arrival_seconds: float = 300.0
    outage_start: float = 60.0
    outage_seconds: float = 600.0
    max_attempts: int | None = None
    """Attempts per job; default: ``RetryPolicy.spanning(outage_seconds).max_attempts``."""
    base_delay: float = 1.0
    max_delay: float = 300.0
    budget_fraction: float = 0.2
    batch_size: int = 10
    step: float = 1.0
    capacity: float | None = None
    """Downstream calls per second the consumers can make; ``None``: unlimited."""
    seed: int = 7

    @property
    def outage_end(self) -> float:
        return self.outage_start + self.outage_seconds

    def attempts(self) -> int:
        if self.max_attempts is not None:
            return self.max_attempts
        return RetryPolicy.spanning(
            self.outage_seconds, base_delay=self.base_delay, max_delay=self.max_delay
        ).max_attempts


def simulate(params: OutageParams, jitter: Jitter, budget_on: bool) -> ScenarioResult:
    """Run one scenario through the framework's classification, backoff and retry budget."""
    policy = RetryPolicy(
        max_attempts=params.attempts(),
        base_delay=params.base_delay,
        max_delay=params.max_delay,
        jitter=jitter,
        random=random.Random(params.seed).random,
    )
    clock = SimClock()
    batch_budget = (
        budget_mod.BatchBudget(
            budget_mod.RetryBudget(fraction=params.budget_fraction),
            budget_mod.InMemoryBudgetCounter(),
            clock=clock,
        )
        if budget_on
        else None
    )
    step = params.step
    due: dict[int, list[SimJob]] = defaultdict(list)
    start_step = int(params.outage_start / step) if params.arrival_seconds <= 0 else 0
    for i in range(params.jobs):
        arrives = (
            params.outage_start if params.arrival_seconds <= 0 else i * params.arrival_seconds / params.jobs
        )
        due[max(start_step, int(arrives / step))].append(SimJob(i))

    result = ScenarioResult(
        name=f"{JITTER_NAMES[jitter]}, budget {'on' if budget_on else 'off'}",
        jitter=jitter.value,
        budget=budget_on,
        step=step,
        outage_start=params.outage_start,
        outage_end=params.outage_end,
        jobs=params.jobs,
        calls=[],
        retry_calls=[],
    )
    dead: dict[str, int] = defaultdict(int)
    ready: deque[SimJob] = deque()
    per_step = (
        params.jobs * params.attempts() if params.capacity is None else max(1, int(params.capacity * step))
    )
    pending = params.jobs
    current = 0
    while pending:
        if current * step > MAX_SIMULATED_SECONDS:
            raise RuntimeError(f"simulation did not drain within {MAX_SIMULATED_SECONDS}s")
        clock.now = current * step
        ready.extend(due.pop(current, ()))
        down = params.outage_start <= clock.now < params.outage_end
        calls = retries = 0
        while ready and calls < per_step:
            batch = [ready.popleft() for _ in range(min(params.batch_size, len(ready), per_step - calls))]
            for sim_job in batch:
                calls += 1
                retries += sim_job.attempt > 1
                if batch_budget is not None and sim_job.attempt == 1:
                    batch_budget.first_attempt(QUEUE)
                if down and sim_job.attempt > 1:
                    result.retries_during_outage += 1
                if not down:
                    result.succeeded += 1
                    pending -= 1
                    result.last_resolved = clock.now
                    continue
                decision = classification.classify(
                    DownstreamUnavailable("downstream is down"), attempt=sim_job.attempt, policy=policy
                )
                if (
                    decision.action is Action.RETRY
                    and batch_budget is not None
                    and not batch_budget.allow_retry(QUEUE)
                ):
                    dead[Reason.BUDGET.value] += 1
                elif decision.action is Action.RETRY:
                    # The consumer rounds up: ChangeMessageVisibility takes whole seconds.
                    visible_at = clock.now + math.ceil(decision.delay)
                    sim_job.attempt += 1
                    due[max(current + 1, int(visible_at / step))].append(sim_job)
                    continue
                else:
                    dead[(decision.reason or Reason.EXHAUSTED).value] += 1
                pending -= 1
                result.last_resolved = clock.now
            if batch_budget is not None:
                batch_budget.flush()
        result.calls.append(calls)
        result.retry_calls.append(retries)
        current += 1
    result.dead_letters = dict(dead)
    return result


def run_scenarios(params: OutageParams) -> list[ScenarioResult]:
    return [simulate(params, jitter, budget_on) for budget_on in (False, True) for jitter in JITTERS]


def plot(panels: list[tuple[OutageParams, list[ScenarioResult]]], path: Path) -> Path:
    """Downstream load over time: one panel per workload, one line per scenario, the outage shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(panels), 1, figsize=(11, 4.6 * len(panels)), dpi=110, squeeze=False)
    for ax, (params, results) in zip(axes[:, 0], panels, strict=True):
        ax.axvspan(params.outage_start / 60, params.outage_end / 60, color="0.85", label="outage")
        for r in results:
            per_bin: dict[int, int] = defaultdict(int)
            for i, n in enumerate(r.calls):
                per_bin[int(i * r.step // PLOT_BIN_SECONDS)] += n
            last = max(per_bin, default=0)
            ax.plot(
                [b * PLOT_BIN_SECONDS / 60 for b in range(last + 1)],
                [per_bin.get(b, 0) / PLOT_BIN_SECONDS for b in range(last + 1)],
                color=COLOURS[r.jitter],
                linestyle="--" if r.budget else "-",
                linewidth=1.8 if r.budget else 1.1,
                alpha=0.9,
                label=r.name,
            )
        ax.set_xlabel("simulated time (minutes)")
        ax.set_ylabel(f"downstream requests/s ({PLOT_BIN_SECONDS} s mean)")
        ax.set_yscale("symlog", linthresh=10)
        arrival = (
            "in a burst when it starts"
            if params.arrival_seconds <= 0
            else f"over {params.arrival_seconds:g} s"
        )
        ax.set_title(
            f"{params.jobs:,} jobs arriving {arrival}; downstream down for "
            f"{params.outage_seconds / 60:g} min; {params.attempts()} attempts, "
            f"retry budget {params.budget_fraction:.0%}",
            fontsize=10,
        )
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, ncol=2, loc="upper right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


COLUMNS = (
    ("scenario", "scenario"),
    ("peak_rps", "peak req/s"),
    ("peak_retry_rps", "peak retry req/s"),
    ("peak_rps_after_recovery", "peak req/s after recovery"),
    ("mean_rps_outage", "mean req/s in outage"),
    ("drain_seconds", "drain after recovery (s)"),
    ("dlq_exhausted", "DLQ exhausted"),
    ("dlq_budget", "DLQ budget"),
    ("succeeded", "succeeded"),
    ("downstream_calls", "downstream calls"),
    ("calls_per_job", "calls per job"),
)


def markdown_table(summaries: list[dict[str, Any]]) -> str:
    """The scenarios as a Markdown table (also what the terminal shows)."""
    lines = [
        "| " + " | ".join(title for _, title in COLUMNS) + " |",
        "|---|" + "---:|" * (len(COLUMNS) - 1),
    ]
    for s in summaries:
        cells = [str(s["scenario"])]
        for key, _ in COLUMNS[1:]:
            value = s[key]
            cells.append(f"{value:,.1f}" if isinstance(value, float) else f"{value:,}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


WORKLOADS: dict[str, float] = {"burst": 0.0, "spread": 300.0}
"""The default workloads: name -> seconds over which the jobs arrive (0: all when the outage starts)."""


def measure(
    *,
    jobs: int = 5000,
    workloads: dict[str, float] | None = None,
    outage_start: float = 60.0,
    outage_seconds: float = 600.0,
    max_attempts: int | None = None,
    capacity: float | None = None,
    seed: int = 7,
    png: Path | str | None = DEFAULT_PNG,
) -> dict[str, Any]:
    """Run the six scenarios for each workload; return parameters and summaries, and draw the PNG.

    ``workloads`` maps a name to the seconds over which the jobs arrive (default: a burst
    and 300 s). Returns ``{"workloads": [{"name", "parameters", "scenarios"}], "png"}``.
    """
    runs: list[tuple[str, OutageParams, list[ScenarioResult]]] = []
    for name, arrival_seconds in (workloads or WORKLOADS).items():
        params = OutageParams(
            jobs=jobs,
            arrival_seconds=arrival_seconds,
            outage_start=outage_start,
            outage_seconds=outage_seconds,
            max_attempts=max_attempts,
            capacity=capacity,
            seed=seed,
        )
        runs.append((name, params, run_scenarios(params)))
    drawn = plot([(params, results) for _, params, results in runs], Path(png)) if png is not None else None
    return {
        "workloads": [
            {
                "name": name,
                "parameters": {
                    **asdict(params),
                    "attempts": params.attempts(),
                    "outage_end": params.outage_end,
                },
                "scenarios": [r.summary() for r in results],
            }
            for name, params, results in runs
        ],
        "png": str(drawn) if drawn is not None else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument(
        "--arrival-seconds",
        type=float,
        action="append",
        help="seconds over which the jobs arrive, 0 for a burst; repeatable (default: 0 and 300)",
    )
    parser.add_argument("--outage-start", type=float, default=60.0)
    parser.add_argument("--outage-seconds", type=float, default=600.0)
    parser.add_argument("--max-attempts", type=int, default=None, help="default: spans the outage")
    parser.add_argument("--capacity", type=float, default=None, help="downstream calls/s (default unlimited)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--png", default=str(DEFAULT_PNG), help="where to draw the load chart ('' for none)")
    args = parser.parse_args(argv)
    workloads = (
        {("burst" if a <= 0 else f"over {a:g} s"): a for a in args.arrival_seconds}
        if args.arrival_seconds
        else None
    )
    r = measure(
        jobs=args.jobs,
        workloads=workloads,
        outage_start=args.outage_start,
        outage_seconds=args.outage_seconds,
        max_attempts=args.max_attempts,
        capacity=args.capacity,
        seed=args.seed,
        png=args.png or None,
    )
    for w in r["workloads"]:
        p = w["parameters"]
        arrival = (
            "in a burst at the outage" if p["arrival_seconds"] <= 0 else f"over {p['arrival_seconds']:g} s"
        )
        print(
            f"\n{w['name']}: {p['jobs']} jobs arriving {arrival}; downstream down from "
            f"{p['outage_start']:g} s for {p['outage_seconds']:g} s; {p['attempts']} attempts; "
            f"budget {p['budget_fraction']:.0%}; "
            f"seed {p['seed']}\n"
        )
        print(markdown_table(w["scenarios"]))
    if r["png"]:
        print(f"\nchart: {r['png']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
