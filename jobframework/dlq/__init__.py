"""Inspect, export, purge and redrive dead letters.

A dead letter is the original message body, byte for byte, with the reason attributes
the consumer added (``jf-reason``, ``jf-error``, ``jf-attempts``, ``jf-source``,
``jf-dead-at``). :class:`DeadLetters` works on one topology's DLQs through any SQS
client (AWS, the embedded AWS):

- :meth:`~DeadLetters.depths`: each DLQ's depth and the age of its oldest message;
- :meth:`~DeadLetters.peek` / :meth:`~DeadLetters.export`: read without removing (messages
  are held invisible while being read, then made visible again at once; SQS counts the
  receive, which nothing relies on);
- :meth:`~DeadLetters.purge`: delete, optionally only one job type;
- :meth:`~DeadLetters.redrive`: send matching messages back to their source queue
  (:mod:`jobframework.dlq.redrive`);
- :meth:`~DeadLetters.start_native_redrive` / :meth:`~DeadLetters.native_tasks`: SQS's own
  ``StartMessageMoveTask`` (the console's "Start DLQ redrive").

Every command reads the DLQ once (:class:`~jobframework.dlq.reader.HeldScan`): each letter is
considered once however long the read takes (the hold is extended while reading, and letters
seen before are not counted again), and the read ends after two receives in a row bring nothing new.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

from jobframework.dlq.letter import (
    REASON_ATTRIBUTES,
    UNTYPED,
    DeadLetter,
    DeadLetterError,
    DlqDepth,
    Selection,
)
from jobframework.dlq.native import move_tasks, start_move_task
from jobframework.dlq.reader import BATCH, HeldScan
from jobframework.dlq.redrive import Progress, Redrive, RedriveResult, queue_name
from jobframework.jobs import Priority, lane_sort_key
from jobframework.topology import RuntimeConfig

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sqs import SQSClient

    from jobframework.stores.job_records import JobRecords

__all__ = [
    "BATCH",
    "HOLD_SECONDS",
    "READ_HOLD_SECONDS",
    "REASON_ATTRIBUTES",
    "UNTYPED",
    "DeadLetter",
    "DeadLetterError",
    "DeadLetters",
    "DlqDepth",
    "Progress",
    "PurgeResult",
    "RedriveResult",
    "Selection",
    "queue_name",
]

log = logging.getLogger(__name__)


@dataclass
class PurgeResult:
    """What a purge deleted."""

    deleted: int = 0
    not_found: list[str] = field(default_factory=list)
    """Ids given (``ids``) that no letter in the DLQ carries (a typo, or deleted already); empty when a
    FIFO DLQ's group had letters behind ten held unselected (not seen)."""


HOLD_SECONDS = 300
"""Seconds a purge or redrive first holds what it reads (extended while it runs, released at the end)."""
READ_HOLD_SECONDS = 60
"""Seconds a peek or export first holds what it reads (likewise)."""


class DeadLetters:
    """The DLQs of one topology.

    Args:
        config: queue and DLQ URLs (``RuntimeConfig.from_env()``).
        sqs_client: the SQS client.
        s3_client: the S3 client that refreshes offloaded payloads on redrive (made from the
            default session when ``None`` and a letter needs it; see :func:`jobframework.payloads.refresh`).
        wait_time_seconds: ``WaitTimeSeconds`` of each receive; 0 on the embedded AWS. Against AWS
            use 1 or more (short polls sample servers and can come back empty too early).
        empty_receives: receives in a row with nothing new that mean "nothing more to read".
        hold_seconds: the first hold of every command (default: 60 s reading, 300 s purge/redrive).
        dynamodb_client: the client of the state table, where a redrive sets a tracked job's status
            from ``dead`` back to ``queued`` (made from the default session when ``None`` and a
            tracked letter moves; no state table in ``config``: statuses are left as they are).
    """

    def __init__(
        self,
        config: RuntimeConfig,
        sqs_client: SQSClient,
        *,
        s3_client: S3Client | None = None,
        wait_time_seconds: int = 0,
        empty_receives: int = 2,
        hold_seconds: int | None = None,
        dynamodb_client: DynamoDBClient | None = None,
    ) -> None:
        self.config = config
        self.sqs = sqs_client
        self._s3 = s3_client
        self._s3_tried = False
        self._dynamodb = dynamodb_client
        self._jobs: JobRecords | None = None
        self.wait_time_seconds = wait_time_seconds
        self.empty_receives = empty_receives
        self.hold_seconds = hold_seconds
        self._arns: dict[str, str] = {}

    # -- helpers ---------------------------------------------------------------------------------------

    def dlq_url(self, priority: Priority | str) -> str:
        return self.config.endpoints(priority).dlq_url

    def queue_arn(self, url: str) -> str:
        arn = self._arns.get(url)
        if arn is None:
            arn = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
                "QueueArn"
            ]
            self._arns[url] = arn
        return arn

    def scan(self, url: str, *, hold: int = HOLD_SECONDS, acting: bool = False) -> HeldScan:
        """One pass over ``url`` (use it as a context manager: what is still held is released on exit).

        ``acting``: the pass moves or deletes letters, so it takes only those sent before it started
        (a redriven job that fails again is a new letter, not one to redrive again).
        """
        return HeldScan(
            self.sqs,
            url,
            hold=self.hold_seconds or hold,
            wait_time_seconds=self.wait_time_seconds,
            empty_receives=self.empty_receives,
            from_start=acting,
        )

    @property
    def s3(self) -> S3Client | None:
        if self._s3 is None and not self._s3_tried:
            self._s3_tried = True
            try:
                from jobframework.aws_clients import AwsClients

                aws = AwsClients(endpoint_url=self.config.endpoint_url, region=self.config.region)
                self._s3 = aws.client("s3")
            except Exception:
                log.warning("no S3 client: offloaded payloads cannot be refreshed", exc_info=True)
        return self._s3

    def job_records(self) -> JobRecords | None:
        """The state table's job records (``None``: the configuration names no state table)."""
        if self._jobs is None and self.config.state_table:
            from jobframework.state import StateStore

            client = self._dynamodb
            if client is None:
                from jobframework.aws_clients import AwsClients

                aws = AwsClients(endpoint_url=self.config.endpoint_url, region=self.config.region)
                client = self._dynamodb = aws.client("dynamodb")
            self._jobs = StateStore.of(self.config, client).jobs
        return self._jobs

    # -- reading ---------------------------------------------------------------------------------------

    def depths(self, *, sample: int = 100) -> list[DlqDepth]:
        """Each DLQ's depth, messages in flight, and the oldest dead-letter age among up to ``sample``.

        SQS reports no oldest age for a queue (CloudWatch's ``ApproximateAgeOfOldestMessage`` does,
        minutes late), so the age comes from reading up to ``sample`` messages (``sampled``
        says how many; with fewer than the depth it is a lower bound).
        """
        result = []
        for lane, ep in sorted(self.config.queues.items(), key=lambda kv: lane_sort_key(kv[0])):
            attrs = self.sqs.get_queue_attributes(
                QueueUrl=ep.dlq_url,
                AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
            )["Attributes"]
            depth = int(attrs.get("ApproximateNumberOfMessages", 0))
            letters = self.peek(lane, limit=sample) if depth and sample else []
            ages = [a for a in (d.age() for d in letters) if a is not None]
            result.append(
                DlqDepth(
                    priority=lane,
                    name=ep.dlq_name,
                    url=ep.dlq_url,
                    depth=depth,
                    in_flight=int(attrs.get("ApproximateNumberOfMessagesNotVisible", 0)),
                    oldest_age_seconds=max(ages) if ages else None,
                    sampled=len(letters),
                )
            )
        return result

    def depth(self, priority: Priority | str) -> int:
        """The DLQ's approximate depth (visible letters)."""
        attrs = self.sqs.get_queue_attributes(
            QueueUrl=self.dlq_url(priority), AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]
        return int(attrs.get("ApproximateNumberOfMessages", 0))

    def peek(
        self,
        priority: Priority | str,
        *,
        limit: int | None = 10,
        job_type: str | None = None,
        reason: str | None = None,
        ids: Collection[str] | None = None,
        matching: str | None = None,
        error_contains: str | None = None,
    ) -> list[DeadLetter]:
        """Up to ``limit`` dead letters (all with ``None``), each once, left in the DLQ and visible; with
        ``job_type``, ``reason``, ``ids`` (job ids or message ids), ``matching`` (text in the body or
        the error) or ``error_contains`` (text in the error), only those (as :meth:`redrive` selects
        them)."""
        found: list[DeadLetter] = []
        chosen = frozenset(ids) if ids else None
        selection = Selection(
            job_type=job_type, reason=reason, ids=chosen, matching=matching, error_contains=error_contains
        )
        with self.scan(self.dlq_url(priority), hold=READ_HOLD_SECONDS) as scan:
            for batch in scan:
                found.extend(d for d in map(DeadLetter.of, batch) if selection.matches(d))
                if limit is not None and len(found) >= limit:
                    break
        return found if limit is None else found[:limit]

    def export(self, priority: Priority | str, out: IO[str], *, progress: Progress | None = None) -> int:
        """Write every dead letter once as a JSON line to ``out`` (nothing is removed); returns the count.

        Lines are written as the letters are read; ``progress`` is called with each batch's count.
        """
        count = 0
        with self.scan(self.dlq_url(priority), hold=READ_HOLD_SECONDS) as scan:
            for batch in scan:
                for message in batch:
                    out.write(json.dumps(DeadLetter.of(message).export_record(), default=str) + "\n")
                count += len(batch)
                if progress:
                    progress(len(batch))
        return count

    # -- removing --------------------------------------------------------------------------------------

    def purge(
        self,
        priority: Priority | str,
        *,
        job_type: str | None = None,
        reason: str | None = None,
        ids: Collection[str] | None = None,
        progress: Progress | None = None,
        matching: str | None = None,
        error_contains: str | None = None,
    ) -> PurgeResult:
        """Delete the DLQ's messages (only those selected when ``job_type``, ``reason`` or ``ids`` are
        given, as for :meth:`redrive`); says how many, and which ``ids`` no letter carries.

        Only the letters already in the DLQ when the purge starts are deleted (one dead-lettered
        meanwhile was seen by no one)."""
        chosen = frozenset(ids) if ids is not None else None
        selection = Selection(
            job_type=job_type, reason=reason, ids=chosen, matching=matching, error_contains=error_contains
        )
        result, unseen = PurgeResult(), set(chosen or ())
        with self.scan(self.dlq_url(priority), acting=True) as scan:
            for batch in scan:
                letters = [(m, DeadLetter.of(m)) for m in batch]
                for _, letter in letters:
                    unseen -= selection.named(letter)
                gone = len(scan.delete([m for m, letter in letters if selection.matches(letter)]))
                result.deleted += gone
                if progress and gone:
                    progress(gone)
            result.not_found = sorted(unseen) if unseen and scan.saw_everything() else []
        return result

    # -- redrive ---------------------------------------------------------------------------------------

    def redrive(
        self,
        priority: Priority | str,
        *,
        job_type: str | None = None,
        reason: str | None = None,
        older_than: float | None = None,
        limit: int | None = None,
        rate: float | None = None,
        dry_run: bool = False,
        progress: Progress | None = None,
        message_ids: Collection[str] | None = None,
        matching: str | None = None,
        error_contains: str | None = None,
    ) -> RedriveResult:
        """Send matching dead letters back to their source queue; each letter is considered once.

        Only the letters already in the DLQ when the redrive starts are considered: a job redriven here
        that fails again is dead-lettered anew and stays for the next redrive.

        Args:
            priority: which DLQ.
            message_ids: only the letters with these ids, SQS message ids or job ids (an operator's
                selection); the read stops once every message id is found (a job id takes every letter
                of that job). Ids no longer in the DLQ are simply not found.
            job_type: only this job type (``"?"``: letters whose type cannot be read).
            matching: only letters whose body (payload, key) or error contains this text.
            error_contains: only letters whose error contains this text (``429``).
            reason: only letters dead-lettered for this reason (``exhausted``, ``malformed``, ...).
            older_than: only dead letters at least this many seconds old.
            limit: at most this many.
            rate: at most this many messages a second.
            dry_run: count what would move; move nothing.
            progress: called after each batch read with how many letters it considered.

        Raises:
            DeadLetterError: the DLQ cannot be read (messages already moved stay moved; nothing is lost).
        """
        lane = str(getattr(priority, "value", priority))
        result = RedriveResult(priority=lane, dry_run=dry_run)
        url = self.dlq_url(lane)
        try:
            with self.scan(url, acting=True) as scan:
                Redrive(
                    self.config, self.sqs, None if dry_run else lambda: self.s3, result, self.job_records
                ).run(
                    scan,
                    Selection(
                        job_type=job_type,
                        reason=reason,
                        older_than=older_than,
                        ids=frozenset(message_ids) if message_ids is not None else None,
                        matching=matching,
                        error_contains=error_contains,
                    ),
                    limit=limit,
                    rate=rate,
                    progress=progress,
                )
        except Exception as exc:
            raise DeadLetterError(f"redrive of the {lane} DLQ stopped: {exc}") from exc
        return result

    # -- native redrive (SQS StartMessageMoveTask) ----------------------------------------------------------

    def start_native_redrive(self, priority: Priority | str, *, rate: int | None = None) -> str:
        """Start an SQS message move task from the DLQ back to its source(s); returns the task handle.

        Offloaded payloads are not refreshed by a native redrive (their first horizon covers one redrive).

        Raises:
            EndpointNotSupportedError: the endpoint does not implement StartMessageMoveTask (the
                embedded AWS); use :meth:`redrive` there.
            DeadLetterError: SQS refused the task (the message says why).
        """
        return start_move_task(self.sqs, self.queue_arn(self.dlq_url(priority)), rate=rate)

    def native_tasks(self, priority: Priority | str) -> list[dict[str, Any]]:
        """The DLQ's recent message move tasks (status, moved, to move, ...)."""
        return move_tasks(self.sqs, self.queue_arn(self.dlq_url(priority)))
