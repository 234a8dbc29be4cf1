"""Redrive: send dead letters back to their source queue, in batches sized by bytes.

A letter goes back with its body byte for byte (id, key) and its kept attributes (trace, type,
signature), without the reason attributes, as a new message (attempts start again at 1). A batch holds
at most ten entries and at most 1 MiB of body and attributes (SQS's ``SendMessageBatch`` limits); a
letter is deleted from the DLQ only after its send succeeded, so an interrupted redrive loses nothing
(at worst a letter sent just before the interruption is redriven twice; its key dedups it). An
offloaded payload is refreshed before its letter moves (see :func:`jobframework.payloads.refresh`); a
letter whose payload is gone stays in the DLQ and is reported.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from jobframework import envelope as wire
from jobframework.dead_letter import KEPT_ATTRIBUTES
from jobframework.delivery import arn_queue_name
from jobframework.dlq.letter import UNTYPED, DeadLetter, Selection
from jobframework.dlq.reader import BATCH, HeldScan
from jobframework.envelope import PayloadRef
from jobframework.errors import PayloadMissingError
from jobframework.topology import RuntimeConfig

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sqs import SQSClient

    from jobframework.stores.job_records import JobRecords

log = logging.getLogger(__name__)

T = TypeVar("T")
Progress = Callable[[int], None]
"""Called after each batch read with how many letters it considered (each letter once)."""


@dataclass(slots=True)
class RedriveResult:
    """What a redrive did (or, with ``dry_run``, would do)."""

    priority: str
    dry_run: bool
    moved: int = 0
    matched: int = 0
    skipped: int = 0
    failed: int = 0
    payload_missing: int = 0
    """Letters left in the DLQ because their offloaded payload is gone (export them, then purge)."""
    requeued: int = 0
    """Tracked jobs moved whose status went from ``dead`` back to ``queued`` (with the redrive as its
    reason), so that ``jf status`` and a cancel see them waiting again."""
    later: int = 0
    """Letters dead-lettered after the redrive started (a redriven job failing again, say): left for
    the next redrive."""
    limited: bool = False
    """The ``limit`` was reached: letters past it were not looked at (more may match); those skipped
    count only letters that did not match."""
    not_found: list[str] = field(default_factory=list)
    """Ids given (``message_ids``) that no letter in the DLQ carries (a typo, or redriven already);
    empty when the ``limit`` stopped the read first, and on a FIFO DLQ (a group's letters past ten held
    unselected are not seen)."""
    by_type: dict[str, int] = field(default_factory=dict)
    by_reason: dict[str, int] = field(default_factory=dict)
    """Letters moved (or that would move) by their dead-letter reason (``-``: none recorded)."""
    by_source: dict[str, int] = field(default_factory=dict)
    job_ids: list[str] = field(default_factory=list)
    tracked_job_ids: list[str] = field(default_factory=list)
    """Of ``job_ids``, those whose jobs have a status record (``jf status`` and the console show them)."""
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def count(self, letter: DeadLetter, source: str) -> None:
        kind = letter.job_type or UNTYPED
        self.by_type[kind] = self.by_type.get(kind, 0) + 1
        reason = letter.reason or "-"
        self.by_reason[reason] = self.by_reason.get(reason, 0) + 1
        if source:
            self.by_source[source] = self.by_source.get(source, 0) + 1
        if letter.job_id:
            self.job_ids.append(letter.job_id)
            if letter.tracked:
                self.tracked_job_ids.append(letter.job_id)


def batches_by_bytes(
    items: Iterable[T], size: Callable[[T], int], *, limit: int = wire.SQS_MAX_MESSAGE_BYTES
) -> Iterator[list[T]]:
    """Groups of at most ten items and at most ``limit`` bytes together (an item over ``limit`` alone).

    Example:
        >>> [len(b) for b in batches_by_bytes([150_000] * 8, lambda n: n)]
        [6, 2]
    """
    batch: list[T] = []
    total = 0
    for item in items:
        n = size(item)
        if batch and (len(batch) == BATCH or total + n > limit):
            yield batch
            batch, total = [], 0
        batch.append(item)
        total += n
    if batch:
        yield batch


def queue_name(url: str) -> str:
    """``.../123456789012/jf-dev-high`` -> ``jf-dev-high``."""
    return url.rstrip("/").rsplit("/", 1)[-1]


def _sent_since(letter: DeadLetter, start_ms: int | None) -> bool:
    """``letter`` reached the DLQ at or after ``start_ms`` (SQS's clock; ``None``: no start known)."""
    sent = letter.sent_at
    return start_ms is not None and sent is not None and sent.timestamp() * 1000 >= start_ms


def redrive_entry(letter: DeadLetter, entry_id: str, *, redrives: int | None = None) -> dict[str, Any]:
    """The ``SendMessageBatch`` entry that puts ``letter`` back: same body, kept attributes, X-Ray;
    ``redrives``: the job's redrives so far when the letter had no room to carry them."""
    entry: dict[str, Any] = {
        "Id": entry_id,
        "MessageBody": letter.body,
        "MessageAttributes": {
            name: wire.string_attribute(value)
            for name, value in letter.attributes.items()
            if name in KEPT_ATTRIBUTES
        },
    }
    before = letter.redrives if redrives is None else redrives
    entry["MessageAttributes"][wire.ATTR_REDRIVES] = wire.string_attribute(str(before + 1))
    xray = letter.system_attributes.get("AWSTraceHeader")
    if xray:
        entry["MessageSystemAttributes"] = {"AWSTraceHeader": wire.string_attribute(xray)}
    group = letter.system_attributes.get("MessageGroupId")
    if group:  # its tenant (a standard queue's group), or its FIFO group: back under the same one
        entry["MessageGroupId"] = group
        if letter.fifo:  # from a FIFO DLQ back to its FIFO source: deduplicated per dead letter
            entry["MessageDeduplicationId"] = letter.message_id[:128]
    return entry


def _entry_size(item: tuple[dict[str, Any], DeadLetter]) -> int:
    letter = item[1]
    return wire.message_size(letter.body, redrive_entry(letter, "0")["MessageAttributes"])


class Redrive:
    """One redrive of one DLQ (see :meth:`jobframework.dlq.DeadLetters.redrive`)."""

    def __init__(
        self,
        config: RuntimeConfig,
        sqs: SQSClient,
        s3: Callable[[], S3Client | None] | None,
        result: RedriveResult,
        jobs: Callable[[], JobRecords | None] | None = None,
    ) -> None:
        self.config = config
        self.sqs = sqs
        self._s3 = s3
        """Gives the S3 client that refreshes offloaded payloads (asked only when a letter has one)."""
        self._jobs = jobs
        """Gives the job records whose status a moved tracked letter sets back to ``queued``."""
        self.result = result
        self._warned_s3 = False
        self._warned_jobs = False

    def default_source(self) -> str:
        """The DLQ's source queue: the one its redrive allow policy names, else the topology's."""
        ep = self.config.endpoints(self.result.priority)
        try:
            attrs = self.sqs.get_queue_attributes(QueueUrl=ep.dlq_url, AttributeNames=["RedriveAllowPolicy"])
            policy = json.loads(attrs.get("Attributes", {}).get("RedriveAllowPolicy", "{}"))
            arns = policy.get("sourceQueueArns") or []
            if len(arns) == 1:
                name = arn_queue_name(arns[0])
                if name == ep.name:
                    return ep.url
                return self.sqs.get_queue_url(QueueName=name)["QueueUrl"]
        except Exception:
            log.debug("no usable RedriveAllowPolicy on %s", ep.dlq_url, exc_info=True)
        return ep.url

    def source_url(self, letter: DeadLetter, default: str) -> str:
        if letter.source and letter.source != "-":
            found = self.config.by_queue_name(letter.source)
            if found and found[1].name == letter.source:
                return found[1].url
            try:
                return self.sqs.get_queue_url(QueueName=letter.source)["QueueUrl"]
            except Exception:
                log.warning(
                    "source queue %s of %s not found; using %s", letter.source, letter.job_id, default
                )
        return default

    def run(
        self,
        scan: HeldScan,
        selection: Selection,
        *,
        limit: int | None,
        rate: float | None,
        progress: Progress | None,
    ) -> None:
        """Consider each letter of ``scan`` once; move (or, in a dry run, count) those selected."""
        result = self.result
        wanted = set(selection.ids) if selection.ids is not None else None
        unseen = set(selection.ids or ())
        """Ids no letter carried yet, whether it matched the rest of the selection or not."""
        default = self.default_source()
        started = time.monotonic()
        now = datetime.now(UTC)
        taken: set[str] = set()
        """Job ids this run took: a letter of one sent since the scan started is its job failing again."""
        for batch in scan:
            chosen: list[tuple[dict[str, Any], DeadLetter]] = []
            considered = len(batch)
            for message in batch:
                letter = DeadLetter.of(message)
                unseen -= selection.named(letter)
                if letter.job_id in taken and _sent_since(letter, scan.start):
                    result.later += 1  # (the scan's cutoff is to the second: this one came in it)
                    considered -= 1  # (not one of the letters there at the start, which progress counts)
                    continue
                if limit is not None and result.matched + len(chosen) >= limit:
                    result.limited = True  # (not "not matching": left by the limit)
                    continue
                if not selection.matches(letter, now):
                    result.skipped += 1
                    continue
                chosen.append((message, letter))
                if letter.job_id:
                    taken.add(letter.job_id)
                if wanted is not None:  # (a job id stays wanted: every letter of that job is taken)
                    wanted.discard(letter.message_id)
            result.matched += len(chosen)
            if result.dry_run:
                for _, letter in chosen:
                    result.count(letter, "")
            else:
                self._move(scan, chosen, default)
            if progress:
                progress(considered)
            if rate:
                ahead = (result.matched if result.dry_run else result.moved) / rate - (
                    time.monotonic() - started
                )
                if ahead > 0:
                    time.sleep(ahead)
            if limit is not None and result.matched >= limit:
                # (the letters after it are left by the limit, matching or not: a limit reached at the
                # end of a batch had said nothing of them)
                result.limited = True
                break
            if wanted == set():
                break
        result.later += scan.later
        read_all = not result.limited and (limit is None or result.matched < limit)
        result.not_found = sorted(unseen) if unseen and read_all and scan.saw_everything() else []

    def _move(self, scan: HeldScan, chosen: list[tuple[dict[str, Any], DeadLetter]], default: str) -> int:
        by_source: dict[str, list[tuple[dict[str, Any], DeadLetter]]] = {}
        for message, letter in chosen:
            if self._payload_gone(letter):
                continue
            by_source.setdefault(self.source_url(letter, default), []).append((message, letter))
        moved = 0
        for source_url, items in by_source.items():
            for batch in batches_by_bytes(items, _entry_size):
                moved += self._send(scan, source_url, batch)
        return moved

    def _send(self, scan: HeldScan, source_url: str, items: list[tuple[dict[str, Any], DeadLetter]]) -> int:
        result = self.result
        # (only a letter whose id is the job's: a forged one's names another job, maybe running)
        self._lapse_claims(
            [letter for _, letter in items if letter.tracked and letter.job_id and letter.verified]
        )
        counts = self._uncarried_redrives([letter for _, letter in items])
        entries: list[Any] = [
            redrive_entry(letter, str(i), redrives=counts.get(letter.message_id))
            for i, (_, letter) in enumerate(items)
        ]
        try:
            response = self.sqs.send_message_batch(QueueUrl=source_url, Entries=entries)
        except Exception as exc:
            result.failed += len(items)
            result.errors.append(f"SendMessageBatch to {source_url} failed: {exc}")
            return 0
        sent = [items[int(ok["Id"])] for ok in response.get("Successful", [])]
        for bad in response.get("Failed", []):
            _, letter = items[int(bad["Id"])]
            result.failed += 1
            result.errors.append(f"{letter.job_id or letter.message_id}: {bad.get('Code')}")
        # Deleted only now that the send succeeded: an interruption before this line leaves the
        # letter in the DLQ (released at the end) as well as its copy in the source queue.
        letters = {str(m.get("MessageId", "")): letter for m, letter in sent}
        for message in scan.delete([m for m, _ in sent]):
            result.count(letters[str(message.get("MessageId", ""))], queue_name(source_url))
        result.moved += len(sent)
        self._requeue([letter for _, letter in sent if letter.tracked and letter.job_id and letter.verified])
        return len(sent)

    def _job_records(self, letters: list[DeadLetter]) -> JobRecords | None:
        """The job records a moved tracked letter's status is kept in (``None``: none; a failure to make
        them is logged once: the jobs are back in their queues either way, and their runs write)."""
        if not letters or self._jobs is None:
            return None
        try:
            return self._jobs()
        except Exception as exc:
            if not self._warned_jobs:
                log.warning("redriven jobs' statuses are left as they are (no state table client): %s", exc)
                self._warned_jobs = True
            return None

    def _uncarried_redrives(self, letters: list[DeadLetter]) -> dict[str, int]:
        """The redrives so far of the tracked jobs whose letter had no room for ``jf-redrives`` (a
        signed job with a tracestate fills SQS's ten attributes), read from their statuses: counted
        from the letter, the count went back to 1. By the letter's message id."""
        short = [
            x
            for x in letters
            if x.tracked and x.job_id and x.verified and wire.ATTR_REDRIVES not in x.attributes
        ]
        jobs = self._job_records(short)
        counts: dict[str, int] = {}
        for letter in short if jobs is not None else ():
            assert letter.job_id is not None and jobs is not None
            try:
                status = jobs.get_status(letter.job_id)
            except Exception as exc:
                log.warning("job %s: its redrives so far could not be read: %s", letter.job_id, exc)
                continue
            if status is not None and status.redrives:
                counts[letter.message_id] = status.redrives
        return counts

    def _lapse_claims(self, letters: list[DeadLetter]) -> None:
        """Before the send: the dead runs' start claims end (a claim of a redriven run, made after the
        send, is its own and stands; lapsed after the send, a run that claimed meanwhile read queued)."""
        jobs = self._job_records(letters)
        for letter in letters if jobs is not None else ():
            assert letter.job_id is not None and jobs is not None
            if letter.died_at is None:
                continue
            try:
                jobs.lapse_claim(letter.job_id, died_at=letter.died_at.isoformat(timespec="milliseconds"))
            except Exception as exc:
                log.warning(
                    "job %s: its dead run's start claim stays until its deadline: %s", letter.job_id, exc
                )

    def _requeue(self, letters: list[DeadLetter]) -> None:
        """Each moved tracked job's status back to ``queued`` (it read ``dead``: a cancel answered "too
        late" and ``jf status`` said dead while it waited, in a paused lane say). A failed write is
        logged: the job is back in its queue either way, and its run writes its status."""
        jobs = self._job_records(letters)
        for letter in letters if jobs is not None else ():
            assert letter.job_id is not None and jobs is not None
            why = f"redriven from the {self.result.priority} DLQ (it died: {letter.reason or 'no reason'})"
            try:
                self.result.requeued += jobs.requeue(letter.job_id, why)
            except Exception as exc:
                log.warning("job %s was redriven, but its status still reads dead: %s", letter.job_id, exc)

    def _payload_gone(self, letter: DeadLetter) -> bool:
        """Refresh the letter's offloaded payload; ``True`` when it is gone (the letter then stays)."""
        if letter.payload_ref is None:
            return False
        s3 = self._s3() if self._s3 is not None else None
        if s3 is None:
            if not self._warned_s3:
                log.warning("no S3 client: offloaded payloads are redriven without being refreshed")
                self._warned_s3 = True
            return False
        from jobframework.payloads import refresh

        try:
            refresh(PayloadRef.model_validate(letter.payload_ref), s3)
        except PayloadMissingError as exc:
            self.result.payload_missing += 1
            self.result.errors.append(f"{letter.job_id or letter.message_id}: {exc}")
            return True
        except Exception as exc:
            # Its first horizon still covers one redrive: move it, and say so.
            log.warning("refreshing the payload of %s failed (%s); redriving it anyway", letter.job_id, exc)
        return False
