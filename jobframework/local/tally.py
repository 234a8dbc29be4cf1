"""What ``jf dev`` and ``jf worker`` say when they stop: the records they ran and how the jobs ended."""

from __future__ import annotations

import json
import os
import threading
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from jobframework.delivery import Outcome

if TYPE_CHECKING:
    from pathlib import Path

    from jobframework.delivery import RecordOutcome
    from jobframework.local.pollers import BatchStats

_SHOWN = (Outcome.SUCCEEDED, Outcome.RETRIED, Outcome.DEAD_LETTERED)
"""Always in the summary; the other outcomes (released, skipped) when they happened."""


class OutcomeTally:
    """A consumer listener that counts the records' outcomes (the consumer's threads share it).

    Example:
        >>> from jobframework.delivery import RecordOutcome
        >>> tally = OutcomeTally()
        >>> tally(RecordOutcome("m-1", Outcome.SUCCEEDED, "a.job", "j-1", "high", 1))
        >>> tally(RecordOutcome("m-2", Outcome.RETRIED, "a.job", "j-2", "high", 1))
        >>> tally(RecordOutcome("m-3", Outcome.RETRIED, "a.job", "j-3", "high", 1, unrun=True))
        >>> tally.text()
        '1 succeeded, 1 retried, 0 dead-lettered, 1 released'
    """

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __call__(self, outcome: RecordOutcome) -> None:
        # A record handed back unrun (it waits for another delivery of its key, a deferred schedule)
        # spent no attempt: counted with the other hand-backs, not as a retry.
        counted = Outcome.RELEASED if outcome.unrun else outcome.outcome
        with self._lock:
            self._counts[counted] += 1

    def counts(self) -> dict[str, int]:
        """Records by outcome (``succeeded``, ``retried``, ``dead_lettered``, ...) so far."""
        with self._lock:
            return dict(self._counts)

    def text(self) -> str:
        """``12 succeeded, 2 retried, 1 dead-lettered`` (and released or skipped, when any were)."""
        return _jobs_text(self.counts())


def _jobs_text(counts: Mapping[str, int]) -> str:
    others = sorted(o for o in counts if o not in _SHOWN)
    return ", ".join(f"{counts.get(o, 0)} {o.replace('_', '-')}" for o in (*_SHOWN, *others))


_RECORD_COUNTS = ("records", "batches", "done", "to_retry")


def add_counts(totals: dict[str, int], counts: Mapping[str, Any]) -> None:
    """Add one stop's :func:`stop_counts` to ``totals`` (``jf dev --reload``'s, over its reloads).

    Example:
        >>> totals: dict[str, int] = {}
        >>> add_counts(totals, {"drained": True, "records": 2, "batches": 1, "succeeded": 2})
        >>> add_counts(totals, {"drained": True, "records": 3, "batches": 2, "succeeded": 1, "released": 2})
        >>> totals_text(totals)
        '5 records in 3 batches, 0 done, 0 handed back; jobs: 3 succeeded, 0 retried, 0 dead-lettered, 2 released'
    """  # noqa: E501
    for name, n in counts.items():
        if isinstance(n, int) and not isinstance(n, bool):
            totals[name] = totals.get(name, 0) + n


def no_counts() -> dict[str, int]:
    """Totals to add stops' counts to: every count a stop line always says, at 0."""
    return dict.fromkeys((*_RECORD_COUNTS, *_SHOWN), 0)


def write_counts(path: Path, counts: Mapping[str, Any]) -> None:
    """Write a stop's :func:`stop_counts` for the process that sums them (whole or not at all)."""
    written = path.with_suffix(".tmp")
    written.write_text(json.dumps(counts))
    os.replace(written, path)


def read_counts(path: Path) -> dict[str, Any] | None:
    """What :func:`write_counts` wrote, or ``None`` (none written: the process did not get to poll)."""
    try:
        counts = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return counts if isinstance(counts, dict) else None


def totals_text(totals: Mapping[str, int]) -> str:
    """``N records in M batches, D done, R handed back; jobs: ...`` of summed :func:`stop_counts`."""
    jobs = {k: v for k, v in totals.items() if k not in _RECORD_COUNTS}
    return (
        f"{_counted(totals.get('records', 0), 'record')} in {_counted(totals.get('batches', 0), 'batch')}, "
        f"{totals.get('done', 0)} done, {totals.get('to_retry', 0)} handed back; jobs: {_jobs_text(jobs)}"
    )


def stop_counts(stats: BatchStats, tally: OutcomeTally, *, drained: bool) -> dict[str, Any]:
    """What a stopped ``jf dev --json`` prints (one JSON line): ``drained``, ``records``, ``batches``,
    ``done`` (deleted), ``to_retry`` (handed back: left in their queue for a retry's back-off or a
    hand-back's delay), and the records by outcome.

    Example:
        >>> from jobframework.local.pollers import BatchStats
        >>> stop_counts(BatchStats(batches=1, records=1, deleted=1), OutcomeTally(), drained=True)
        {'drained': True, 'records': 1, 'batches': 1, 'done': 1, 'to_retry': 0, 'succeeded': 0, 'retried': 0, 'dead_lettered': 0}
    """  # noqa: E501
    counts = tally.counts()
    return {
        "drained": drained,
        "records": stats.records,
        "batches": stats.batches,
        "done": stats.deleted,
        "to_retry": stats.failed,
        **{o: counts.get(o, 0) for o in _SHOWN},
        **{o: n for o, n in sorted(counts.items()) if o not in _SHOWN},
    }


def stop_summary(command: str, stats: BatchStats, tally: OutcomeTally, *, drained: bool) -> str:
    """The line ``jf dev`` and ``jf worker`` print when they stop.

    Example:
        >>> from jobframework.local.pollers import BatchStats
        >>> stop_summary("jf dev", BatchStats(batches=2, records=3, deleted=2, failed=1), OutcomeTally(),
        ...              drained=True)
        'jf dev: stopped (drained); 3 records in 2 batches, 2 done, 1 handed back; jobs: 0 succeeded, 0 retried, 0 dead-lettered'
    """  # noqa: E501
    return (
        f"{command}: stopped ({'drained' if drained else 'drain time ran out'}); "
        f"{_counted(stats.records, 'record')} in {_counted(stats.batches, 'batch')}, {stats.deleted} done, "
        f"{stats.failed} handed back; jobs: {tally.text()}"
    )


def _counted(n: int, word: str) -> str:
    """``1 record``, ``3 records``, ``1 batch``, ``2 batches`` (a trial's stop line read "1 records in
    1 batches")."""
    if n == 1:
        return f"1 {word}"
    return f"{n} {word}{'es' if word.endswith('ch') else 's'}"
