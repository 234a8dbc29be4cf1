"""Purging a queue: deleting the jobs that wait in it (all, or those a selection takes), as Celery's
``purge``, BullMQ's ``drain`` and Sidekiq's ``Queue#clear``: a backfill called off, a flood of jobs
that must not run.

One pass over the queue (:class:`~jobframework.dlq.reader.HeldScan`): each visible message sent
before the pass started is held, and deleted when the selection takes it. What it held and did not
delete goes back as a fresh copy (as every hand-back, :mod:`jobframework.attempts`: its executions
so far carried in ``jf-executions``), and the original is deleted: a receive counts toward the
queue's ``maxReceiveCount`` and toward the job's attempts, and six passes (dry runs too) had moved
every job left to the DLQ. It never sees a message in flight (a job running, a retry waiting out its
delay) nor a delayed one (``delay=``, a hand-back over a rate or concurrency limit, a throttle); a
consumer polling the queue meanwhile takes some of the rest first. So pause the lane first
(``jf queue pause``), and purge again for what came back. A deleted job that is tracked is cancelled
(:func:`~jobframework.flow.cancel.cancel`: its status reads ``cancelled``, its dedup key is free
again), so that no status says ``queued`` for a job that is gone. A FIFO (ordered) lane is refused:
its copies would go behind the rest of their groups.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jobframework.core import ConfigurationError
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
    not_found: list[str] = field(default_factory=list)
    """Ids given that no message it saw carries."""
    put_back: int = 0
    """Messages it held and did not delete, sent back as fresh copies."""


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
    if url.endswith(".fifo"):
        raise ConfigurationError(
            "an ordered (FIFO) lane is not purged job by job: what a pass holds would go back behind the "
            "rest of its group; cancel tracked ordered jobs with `jf cancel`, or empty the whole queue "
            "with SQS's PurgeQueue (the SQS console's Purge)"
        )
    result = QueuePurge()
    unseen = set(selection.ids or ())
    with HeldScan(sqs, url, hold=hold, from_start=True) as scan:
        for batch in scan:
            read = [(m, DeadLetter.of(m)) for m in batch]
            for _, letter in read:
                unseen -= selection.named(letter)
            chosen = [(m, letter) for m, letter in read if selection.matches(letter)]
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
        result.not_found = sorted(unseen)
        result.put_back = _put_back(sqs, url, scan)
    return result


def _put_back(sqs: Any, url: str, scan: HeldScan) -> int:
    """Send what ``scan`` holds back as fresh copies and delete the originals (a copy that could not
    be sent leaves its original to the scan's release: visible again, one receive spent)."""
    from jobframework.attempts import executions_before, receive_count
    from jobframework.envelope import lambda_record
    from jobframework.handback import copy_message

    held = list(scan.held.values())
    if not held:
        return 0
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sent: list[dict[str, Any]] = []
    for start in range(0, len(held), 10):
        chunk = held[start : start + 10]
        entries = []
        for n, message in enumerate(chunk):
            record = lambda_record(message, queue_arn=arn)
            # (its receives before this pass's were the consumers': executions, as a retry's are)
            executions = executions_before(record) + max(0, (receive_count(record) or 1) - 1)
            entries.append({"Id": str(n), **copy_message(record, delay=0, executions=executions)})
        try:
            response = sqs.send_message_batch(QueueUrl=url, Entries=entries)
        except Exception as exc:
            log.warning("putting back %d messages of %s as copies failed: %s", len(chunk), url, exc)
            continue
        sent += [chunk[int(ok["Id"])] for ok in response.get("Successful", [])]
    return len(scan.delete(sent))


def _cancel(store: StateStore, job_id: str, result: QueuePurge) -> None:
    from jobframework.flow.cancel import cancel

    try:
        cancel(store, job_id)
        result.cancelled += 1
    except Exception as exc:  # (its message is gone: only its status is left behind)
        log.warning("job %s was purged, but cancelling its status failed: %s", job_id, exc)
        result.uncancelled.append(job_id)
