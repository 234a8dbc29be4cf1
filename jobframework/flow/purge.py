"""Purging a queue: deleting the jobs that wait in it (all, or those a selection takes), as Celery's
``purge``, BullMQ's ``drain`` and Sidekiq's ``Queue#clear``: a backfill called off, a flood of jobs
that must not run.

One pass over the queue (:class:`~jobframework.dlq.reader.HeldScan`): each visible message sent
before the pass started is held, deleted when the selection takes it, made visible again otherwise.
It never sees a message in flight (a job running, a retry waiting out its delay) nor one delayed by
``DelaySeconds``; a consumer polling the queue meanwhile takes some of the rest first. So pause the
lane first (``jf queue pause``), and purge again for what came back. A deleted job that is tracked is
cancelled (:func:`~jobframework.flow.cancel.cancel`: its status reads ``cancelled``, its dedup key is
free again), so that no status says ``queued`` for a job that is gone.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jobframework.dlq.letter import UNTYPED, DeadLetter, Selection
from jobframework.dlq.reader import HeldScan

if TYPE_CHECKING:
    from jobframework.state import StateStore

log = logging.getLogger(__name__)

HOLD_SECONDS = 30
"""How long the pass first holds each message it receives (extended while it goes on)."""


@dataclass
class QueuePurge:
    """What a purge deleted (or, dry, would delete)."""

    deleted: int = 0
    by_type: Counter[str] = field(default_factory=Counter)
    cancelled: int = 0
    """Tracked jobs among them whose status now reads ``cancelled``."""
    uncancelled: list[str] = field(default_factory=list)
    """Tracked jobs among them whose cancel failed (their status still reads as before)."""
    later: int = 0
    """Messages sent after the pass started: left alone."""
    complete: bool = True
    """Whether the pass saw every visible message (a FIFO queue's groups can hide some)."""


def purge_queue(
    sqs: Any,
    url: str,
    selection: Selection,
    *,
    store: StateStore | None,
    dry_run: bool = False,
    hold: int = HOLD_SECONDS,
) -> QueuePurge:
    """Delete the messages of ``url`` that ``selection`` takes (``dry_run``: count them, delete none);
    cancel the tracked jobs among those deleted when there is a ``store``."""
    result = QueuePurge()
    with HeldScan(sqs, url, hold=hold, from_start=True) as scan:
        for batch in scan:
            chosen = [(m, letter) for m in batch if selection.matches(letter := DeadLetter.of(m))]
            if dry_run:
                result.deleted += len(chosen)
                result.by_type.update(letter.job_type or UNTYPED for _, letter in chosen)
                continue
            gone = {str(m.get("MessageId")) for m in scan.delete([m for m, _ in chosen])}
            for message, letter in chosen:
                if str(message.get("MessageId")) not in gone:
                    continue
                result.deleted += 1
                result.by_type[letter.job_type or UNTYPED] += 1
                if letter.tracked and letter.job_id and store is not None:
                    _cancel(store, letter.job_id, result)
        result.later = scan.later
        result.complete = scan.saw_everything()
    return result


def _cancel(store: StateStore, job_id: str, result: QueuePurge) -> None:
    from jobframework.flow.cancel import cancel

    try:
        cancel(store, job_id)
        result.cancelled += 1
    except Exception as exc:  # (its message is gone: only its status is left behind)
        log.warning("job %s was purged, but cancelling its status failed: %s", job_id, exc)
        result.uncancelled.append(job_id)
