"""Inspect, export, purge and redrive dead letters.

A dead letter is the original message body, byte for byte, with the reason attributes
the consumer added (``jf-reason``, ``jf-error``, ``jf-attempts``, ``jf-source``,
``jf-dead-at``). :class:`DeadLetters` works on one topology's DLQs through any SQS
client (AWS, the embedded AWS, a stub):

- :meth:`~DeadLetters.depths`: each DLQ's depth and the age of its oldest message;
- :meth:`~DeadLetters.peek` / :meth:`~DeadLetters.export`: read without removing (messages
  are held invisible while being read, then made visible again at once; SQS counts the
  receive, which nothing relies on);
- :meth:`~DeadLetters.purge`: delete, optionally only one job type;
- :meth:`~DeadLetters.redrive`: send matching messages back to their source queue with
  the same body (id, key) and trace attributes, without the reason attributes, as new
  messages (attempts start again at 1), in batches of ten; a message is deleted from the
  DLQ only after its send succeeded, so an interrupted redrive loses nothing (at worst a
  message sent just before the interruption is redriven twice; its key dedups it);
- :meth:`~DeadLetters.start_native_redrive` / :meth:`~DeadLetters.native_tasks`: SQS's own
  ``StartMessageMoveTask`` (the console's "Start DLQ redrive").
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import IO, TYPE_CHECKING, Any

from jobframework import envelope as wire
from jobframework.dead_letter import KEPT_ATTRIBUTES
from jobframework.delivery import arn_queue_name
from jobframework.errors import EndpointNotSupportedError, JobFrameworkError
from jobframework.jobs import Priority, lane_sort_key
from jobframework.topology import RuntimeConfig

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

log = logging.getLogger(__name__)

BATCH = 10
HOLD_SECONDS = 300
"""Visibility timeout of DLQ messages while a command holds them (released at the end)."""
REASON_ATTRIBUTES = (
    wire.ATTR_REASON,
    wire.ATTR_ERROR,
    wire.ATTR_ATTEMPTS,
    wire.ATTR_SOURCE,
    wire.ATTR_DEAD_AT,
)
_NOT_IMPLEMENTED_CODES = frozenset(
    {
        "InternalFailure",
        "InternalError",
        "InternalServerError",
        "NotImplemented",
        "NotImplementedException",
        "UnknownOperationException",
        "InvalidAction",
        "UnsupportedOperation",
    }
)


class DeadLetterError(JobFrameworkError):
    """A DLQ operation failed; the message says which and why."""


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """One dead letter as read from a DLQ."""

    message_id: str
    receipt_handle: str
    body: str
    job_type: str | None
    job_id: str | None
    key: str | None
    reason: str | None
    error: str | None
    attempts: int | None
    source: str | None
    dead_at: datetime | None
    sent_at: datetime | None
    attributes: dict[str, str]
    system_attributes: dict[str, str]

    @classmethod
    def of(cls, message: dict[str, Any]) -> DeadLetter:
        attrs = {
            name: str(attr.get("StringValue"))
            for name, attr in (message.get("MessageAttributes") or {}).items()
            if isinstance(attr, dict) and "StringValue" in attr
        }
        body = str(message.get("Body", ""))
        job_id = key = None
        job_type = attrs.get(wire.ATTR_TYPE)
        try:
            data = json.loads(body)
            if isinstance(data, dict):
                job_id = _str_or_none(data.get("id"))
                key = _str_or_none(data.get("key"))
                job_type = job_type or _str_or_none(data.get("type"))
        except ValueError:
            pass
        system = {k: str(v) for k, v in (message.get("Attributes") or {}).items()}
        attempts = attrs.get(wire.ATTR_ATTEMPTS)
        return cls(
            message_id=str(message.get("MessageId", "")),
            receipt_handle=str(message.get("ReceiptHandle", "")),
            body=body,
            job_type=job_type,
            job_id=job_id,
            key=key,
            reason=attrs.get(wire.ATTR_REASON),
            error=attrs.get(wire.ATTR_ERROR),
            attempts=int(attempts) if attempts and attempts.isdigit() else None,
            source=attrs.get(wire.ATTR_SOURCE),
            dead_at=_parse_time(attrs.get(wire.ATTR_DEAD_AT)),
            sent_at=_epoch_ms(system.get("SentTimestamp")),
            attributes=attrs,
            system_attributes=system,
        )

    @property
    def died_at(self) -> datetime | None:
        """When it was dead-lettered (``jf-dead-at``, else when the DLQ got it)."""
        return self.dead_at or self.sent_at

    def age(self, now: datetime | None = None) -> float | None:
        """Seconds since it was dead-lettered."""
        died = self.died_at
        if died is None:
            return None
        return max(0.0, ((now or datetime.now(UTC)) - died).total_seconds())

    def summary(self) -> dict[str, Any]:
        """What ``jf dlq peek`` shows (JSON-ready)."""
        return {
            "type": self.job_type,
            "id": self.job_id,
            "key": self.key,
            "reason": self.reason,
            "error": self.error,
            "attempts": self.attempts,
            "dead_at": self.died_at.isoformat() if self.died_at else None,
            "source": self.source,
            "message_id": self.message_id,
        }

    def export_record(self) -> dict[str, Any]:
        """One line of ``jf dlq export``: everything needed to inspect or re-send it."""
        return {
            **self.summary(),
            "body": self.body,
            "attributes": self.attributes,
            "system_attributes": self.system_attributes,
        }


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _epoch_ms(value: str | None) -> datetime | None:
    if not value or not value.isdigit():
        return None
    return datetime.fromtimestamp(int(value) / 1000, UTC)


@dataclass(frozen=True, slots=True)
class DlqDepth:
    priority: str
    name: str
    url: str
    depth: int
    in_flight: int
    oldest_age_seconds: float | None
    sampled: int


@dataclass(slots=True)
class RedriveResult:
    """What a redrive did (or, with ``dry_run``, would do)."""

    priority: str
    dry_run: bool
    moved: int = 0
    matched: int = 0
    skipped: int = 0
    failed: int = 0
    by_type: dict[str, int] = field(default_factory=dict)
    by_source: dict[str, int] = field(default_factory=dict)
    job_ids: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


Progress = Callable[[int], None]


class DeadLetters:
    """The DLQs of one topology.

    Args:
        config: queue and DLQ URLs (``RuntimeConfig.from_env()``).
        sqs_client: the SQS client (inject a stubbed one in tests).
        wait_time_seconds: ``WaitTimeSeconds`` of each receive; 0 on the embedded AWS. Against AWS
            use 1 or more (short polls sample servers and can come back empty too early).
        empty_receives: consecutive empty receives that mean "nothing more to read".
    """

    def __init__(
        self,
        config: RuntimeConfig,
        sqs_client: SQSClient,
        *,
        wait_time_seconds: int = 0,
        empty_receives: int = 2,
    ) -> None:
        self.config = config
        self.sqs = sqs_client
        self.wait_time_seconds = wait_time_seconds
        self.empty_receives = empty_receives
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

    def _receive(self, url: str, hold: int) -> list[dict[str, Any]]:
        response: Any = self.sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=BATCH,
            WaitTimeSeconds=self.wait_time_seconds,
            VisibilityTimeout=hold,
            AttributeNames=["All"],
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        return list(response.get("Messages", []))

    def _scan(self, url: str, hold: int = HOLD_SECONDS) -> Iterator[list[dict[str, Any]]]:
        """Batches of the queue's messages, each held invisible until released or deleted."""
        empty = 0
        while empty < self.empty_receives:
            got = self._receive(url, hold)
            if not got:
                empty += 1
                continue
            empty = 0
            yield got

    def _release(self, url: str, messages: list[dict[str, Any]]) -> None:
        """Make held messages visible again now."""
        for start in range(0, len(messages), BATCH):
            chunk = messages[start : start + BATCH]
            try:
                self.sqs.change_message_visibility_batch(
                    QueueUrl=url,
                    Entries=[
                        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
                        for i, m in enumerate(chunk)
                    ],
                )
            except Exception:
                log.warning("releasing %d messages on %s failed; they reappear later", len(chunk), url)

    def _delete(self, url: str, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Delete messages (batches of ten); returns those deleted."""
        deleted: list[dict[str, Any]] = []
        for start in range(0, len(messages), BATCH):
            chunk = messages[start : start + BATCH]
            response = self.sqs.delete_message_batch(
                QueueUrl=url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(chunk)],
            )
            deleted.extend(chunk[int(ok["Id"])] for ok in response.get("Successful", []))
        return deleted

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
            oldest: float | None = None
            letters = self.peek(lane, limit=sample) if depth and sample else []
            ages = [a for a in (d.age() for d in letters) if a is not None]
            oldest = max(ages) if ages else None
            result.append(
                DlqDepth(
                    priority=lane,
                    name=ep.dlq_name,
                    url=ep.dlq_url,
                    depth=depth,
                    in_flight=int(attrs.get("ApproximateNumberOfMessagesNotVisible", 0)),
                    oldest_age_seconds=oldest,
                    sampled=len(letters),
                )
            )
        return result

    def peek(self, priority: Priority | str, *, limit: int | None = 10) -> list[DeadLetter]:
        """Up to ``limit`` dead letters (all with ``None``), left in the DLQ and visible."""
        url = self.dlq_url(priority)
        held: list[dict[str, Any]] = []
        try:
            for batch in self._scan(url, hold=60):
                held.extend(batch)
                if limit is not None and len(held) >= limit:
                    break
        finally:
            self._release(url, held)
        return [DeadLetter.of(m) for m in (held if limit is None else held[:limit])]

    def export(self, priority: Priority | str, out: IO[str]) -> int:
        """Write every dead letter as a JSON line to ``out`` (nothing is removed); returns the count."""
        letters = self.peek(priority, limit=None)
        for letter in letters:
            out.write(json.dumps(letter.export_record(), default=str) + "\n")
        return len(letters)

    # -- removing --------------------------------------------------------------------------------------

    def purge(self, priority: Priority | str, *, job_type: str | None = None) -> int:
        """Delete the DLQ's messages (only those of ``job_type`` when given); returns how many."""
        url = self.dlq_url(priority)
        kept: list[dict[str, Any]] = []
        deleted = 0
        try:
            for batch in self._scan(url):
                doomed = [m for m in batch if job_type is None or DeadLetter.of(m).job_type == job_type]
                kept.extend(m for m in batch if m not in doomed)
                deleted += len(self._delete(url, doomed))
        finally:
            self._release(url, kept)
        return deleted

    # -- redrive ---------------------------------------------------------------------------------------

    def _source_url(self, priority: Priority | str, letter: DeadLetter, default: str) -> str:
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

    def default_source(self, priority: Priority | str) -> str:
        """The DLQ's source queue: the one its redrive allow policy names, else the topology's."""
        ep = self.config.endpoints(priority)
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

    def redrive(
        self,
        priority: Priority | str,
        *,
        job_type: str | None = None,
        older_than: float | None = None,
        limit: int | None = None,
        rate: float | None = None,
        dry_run: bool = False,
        progress: Progress | None = None,
    ) -> RedriveResult:
        """Send matching dead letters back to their source queue.

        Args:
            priority: which DLQ.
            job_type: only this job type.
            older_than: only dead letters at least this many seconds old.
            limit: at most this many.
            rate: at most this many messages a second.
            dry_run: count what would move; move nothing.
            progress: called with the number moved (or matched, in a dry run) after each batch.

        Raises:
            DeadLetterError: the DLQ cannot be read (messages already moved stay moved; nothing is lost).
        """
        lane = str(getattr(priority, "value", priority))
        url = self.dlq_url(lane)
        default = self.default_source(lane)
        result = RedriveResult(priority=lane, dry_run=dry_run)
        # Every message read and not yet deleted: made visible again at the end, whatever happens.
        outstanding: dict[str, dict[str, Any]] = {}
        started = time.monotonic()
        now = datetime.now(UTC)
        try:
            for batch in self._scan(url):
                chosen: list[tuple[dict[str, Any], DeadLetter]] = []
                for message in batch:
                    outstanding[message["ReceiptHandle"]] = message
                    letter = DeadLetter.of(message)
                    full = limit is not None and result.matched + len(chosen) >= limit
                    too_young = older_than is not None and (letter.age(now) or 0.0) < older_than
                    if full or too_young or (job_type is not None and letter.job_type != job_type):
                        result.skipped += 1
                        continue
                    chosen.append((message, letter))
                result.matched += len(chosen)
                if dry_run:
                    for _, letter in chosen:
                        _count(result, letter, "")
                    if progress:
                        progress(len(chosen))
                else:
                    moved = self._move(lane, url, chosen, default, result, outstanding)
                    if progress and moved:
                        progress(moved)
                if rate:
                    done = result.matched if dry_run else result.moved
                    ahead = done / rate - (time.monotonic() - started)
                    if ahead > 0:
                        time.sleep(ahead)
                if limit is not None and result.matched >= limit:
                    break
        except Exception as exc:
            raise DeadLetterError(f"redrive of the {lane} DLQ stopped: {exc}") from exc
        finally:
            self._release(url, list(outstanding.values()))
        return result

    def _move(  # noqa: PLR0917
        self,
        prio: Priority | str,
        dlq_url: str,
        chosen: list[tuple[dict[str, Any], DeadLetter]],
        default: str,
        result: RedriveResult,
        outstanding: dict[str, dict[str, Any]],
    ) -> int:
        by_source: dict[str, list[tuple[dict[str, Any], DeadLetter]]] = {}
        for message, letter in chosen:
            by_source.setdefault(self._source_url(prio, letter, default), []).append((message, letter))
        moved = 0
        for source_url, items in by_source.items():
            entries: list[Any] = []
            for i, (_, letter) in enumerate(items):
                entry: dict[str, Any] = {
                    "Id": str(i),
                    "MessageBody": letter.body,
                    "MessageAttributes": {
                        name: wire.string_attribute(value)
                        for name, value in letter.attributes.items()
                        if name in KEPT_ATTRIBUTES
                    },
                }
                xray = letter.system_attributes.get("AWSTraceHeader")
                if xray:
                    entry["MessageSystemAttributes"] = {"AWSTraceHeader": wire.string_attribute(xray)}
                entries.append(entry)
            try:
                response = self.sqs.send_message_batch(QueueUrl=source_url, Entries=entries)
            except Exception as exc:
                result.failed += len(items)
                result.errors.append(f"SendMessageBatch to {source_url} failed: {exc}")
                continue
            sent = [items[int(ok["Id"])] for ok in response.get("Successful", [])]
            for bad in response.get("Failed", []):
                _, letter = items[int(bad["Id"])]
                result.failed += 1
                result.errors.append(f"{letter.job_id or letter.message_id}: {bad.get('Code')}")
            # Deleted only now that the send succeeded: an interruption before this line leaves the
            # message in the DLQ (released at the end) as well as its copy in the source queue.
            letters = {m["ReceiptHandle"]: letter for m, letter in sent}
            for message in self._delete(dlq_url, [m for m, _ in sent]):
                outstanding.pop(message["ReceiptHandle"], None)
                _count(result, letters[message["ReceiptHandle"]], queue_name(source_url))
            moved += len(sent)
            result.moved += len(sent)
        return moved

    # -- native redrive (SQS StartMessageMoveTask) ----------------------------------------------------------

    def start_native_redrive(self, priority: Priority | str, *, rate: int | None = None) -> str:
        """Start an SQS message move task from the DLQ back to its source(s); returns the task handle.

        Raises:
            EndpointNotSupportedError: the endpoint does not implement StartMessageMoveTask (the
                embedded AWS); use :meth:`redrive` there.
            DeadLetterError: SQS refused the task (the message says why).
        """
        dlq_arn = self.queue_arn(self.dlq_url(priority))
        kwargs: dict[str, Any] = {"SourceArn": dlq_arn}
        if rate:
            kwargs["MaxNumberOfMessagesPerSecond"] = int(rate)
        response = self._native("StartMessageMoveTask", lambda: self.sqs.start_message_move_task(**kwargs))
        return str(response.get("TaskHandle", ""))

    def native_tasks(self, priority: Priority | str) -> list[dict[str, Any]]:
        """The DLQ's recent message move tasks (status, moved, to move, ...)."""
        dlq_arn = self.queue_arn(self.dlq_url(priority))
        response = self._native(
            "ListMessageMoveTasks", lambda: self.sqs.list_message_move_tasks(SourceArn=dlq_arn, MaxResults=10)
        )
        return [dict(r) for r in response.get("Results", [])]

    def _native(self, operation: str, call: Callable[[], Any]) -> Any:
        from botocore.exceptions import ClientError

        try:
            return call()
        except ClientError as exc:
            error = exc.response.get("Error", {})
            code = str(error.get("Code", ""))
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
            if code in _NOT_IMPLEMENTED_CODES or status in (500, 501):
                endpoint = self.sqs.meta.endpoint_url
                raise EndpointNotSupportedError(
                    f"{operation} is not supported by this endpoint ({endpoint}); "
                    "use `jf dlq redrive` without --native"
                ) from exc
            raise DeadLetterError(f"{operation} failed: {code}: {error.get('Message', '')}") from exc


def queue_name(url: str) -> str:
    """``.../123456789012/jf-dev-high`` -> ``jf-dev-high``."""
    return url.rstrip("/").rsplit("/", 1)[-1]


def _count(result: RedriveResult, letter: DeadLetter, source: str) -> None:
    kind = letter.job_type or "?"
    result.by_type[kind] = result.by_type.get(kind, 0) + 1
    if source:
        result.by_source[source] = result.by_source.get(source, 0) + 1
    if letter.job_id:
        result.job_ids.append(letter.job_id)
