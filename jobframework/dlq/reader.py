"""Reading a queue once: each message handed out once, held invisible until deleted or released.

A DLQ read is a sequence of receives that hold what they get (``VisibilityTimeout``). Left alone, a
read that outlasts its hold sees the first messages again and, counting them as new, never ends.
:class:`HeldScan` keeps the ids it has handed out, extends the hold of everything it holds before it
lapses (doubling it each time, so a long read makes few extension rounds), and stops after
``empty_receives`` receives in a row bring nothing new (empty, or only letters already seen): every
letter is considered once, and a read of ``n`` letters makes at most about ``n / 10 *
(1 + empty_receives)`` receives whatever happens to the holds.

A scan ``from_start`` hands out only the messages sent to the queue before it started (SQS's
``SentTimestamp`` against SQS's own clock: the ``Date`` of its first receive, so a local clock that
is off changes nothing): a command that acts on letters (redrive, purge) acts on those that were there
when it started. Without it, a redriven job that fails again comes back as a new letter, is redriven
again, and a paced redrive (which gives it the time to) never ends. The ``Date`` is to the second, so
the scan takes what arrives in that second too (:attr:`HeldScan.start` says from when a message may
be such a newcomer). Later arrivals are held like the rest, released at the end, and counted
(:attr:`HeldScan.later`).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from jobframework.core import SQS_BATCH_ENTRIES, SQS_MAX_VISIBILITY_SECONDS

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

log = logging.getLogger(__name__)

BATCH = SQS_BATCH_ENTRIES
"""Messages per ReceiveMessage / DeleteMessageBatch / ChangeMessageVisibilityBatch (SQS's maximum)."""
MAX_HOLD_SECONDS = SQS_MAX_VISIBILITY_SECONDS
"""SQS's visibility limit (12 hours)."""


class HeldScan:
    """One pass over a queue.

    Iterate it for batches of messages not seen before; :meth:`delete` what is done with; leave the
    ``with`` block (or call :meth:`release`) to make the rest visible again.

    Args:
        sqs: the SQS client.
        url: the queue.
        hold: seconds each message is first held; doubled at each extension, up to 12 hours.
        wait_time_seconds: ``WaitTimeSeconds`` of each receive.
        empty_receives: receives in a row with nothing new that end the pass.
        clock: seconds, monotonic (tests inject one).
        from_start: hand out only the messages sent before the scan's first receive.
    """

    def __init__(
        self,
        sqs: SQSClient,
        url: str,
        *,
        hold: int,
        wait_time_seconds: int = 0,
        empty_receives: int = 2,
        clock: Callable[[], float] = time.monotonic,
        from_start: bool = False,
    ) -> None:
        self.sqs = sqs
        self.url = url
        self.hold = max(1, min(int(hold), MAX_HOLD_SECONDS))
        self.wait_time_seconds = wait_time_seconds
        self.empty_receives = max(1, empty_receives)
        self.clock = clock
        self.held: dict[str, dict[str, Any]] = {}
        """Message id -> the latest received copy (its receipt handle is the valid one)."""
        self.from_start = from_start
        self.start: int | None = None
        """SQS's time (epoch ms, to the second, rounded down) of the first receive (``from_start``)."""
        self.seen: set[str] = set()
        self.later = 0
        """Messages sent after the scan started (held, not handed out)."""
        self.repeats = 0
        """Receives of a message already handed out (its hold lapsed)."""
        self.extensions = 0
        """Rounds of hold extension."""
        self._until = self.clock() + self.hold

    def __enter__(self) -> HeldScan:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __iter__(self) -> Iterator[list[dict[str, Any]]]:
        quiet = 0
        while quiet < self.empty_receives:
            self._keep_held()
            fresh = []
            for message in self._receive():
                message_id = str(message.get("MessageId", ""))
                if message_id in self.seen:
                    self.repeats += 1
                else:
                    self.seen.add(message_id)
                    if self._sent_in_time(message):
                        fresh.append(message)
                    else:
                        self.later += 1
                self.held[message_id] = message
            if not fresh:
                quiet += 1
                continue
            quiet = 0
            yield fresh

    def _sent_in_time(self, message: dict[str, Any]) -> bool:
        if self.start is None:
            return True
        sent = message.get("Attributes", {}).get("SentTimestamp")
        try:
            return int(sent) < self.start + 1000  # the Date is to the second: that second counts
        except (TypeError, ValueError):
            return True  # no usable time: considered, as before

    def _receive(self) -> list[dict[str, Any]]:
        visibility = max(1, math.ceil(self._until - self.clock()))
        response: Any = self.sqs.receive_message(
            QueueUrl=self.url,
            MaxNumberOfMessages=BATCH,
            WaitTimeSeconds=self.wait_time_seconds,
            VisibilityTimeout=visibility,
            AttributeNames=["All"],
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        if self.from_start and self.start is None:
            self.start = _server_ms(response)
        return list(response.get("Messages", []))

    def _keep_held(self) -> None:
        """Extend every hold when less than half of the current one is left."""
        now = self.clock()
        if not self.held or self._until - now > self.hold / 2:
            return
        self.hold = min(self.hold * 2, MAX_HOLD_SECONDS)
        self.extensions += 1
        self._until = now + self.hold
        log.debug("extending the hold of %d messages on %s to %ds", len(self.held), self.url, self.hold)
        self._change_visibility(list(self.held.values()), self.hold)

    def _change_visibility(self, messages: list[dict[str, Any]], seconds: int) -> None:
        for start in range(0, len(messages), BATCH):
            chunk = messages[start : start + BATCH]
            try:
                self.sqs.change_message_visibility_batch(
                    QueueUrl=self.url,
                    Entries=[
                        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": seconds}
                        for i, m in enumerate(chunk)
                    ],
                )
            except Exception as exc:
                # Not fatal: a message whose hold lapses is received again and not counted twice.
                log.warning(
                    "changing the visibility of %d messages on %s failed: %s", len(chunk), self.url, exc
                )

    def delete(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Delete ``messages`` (batches of ten); returns those deleted, which are no longer held."""
        deleted: list[dict[str, Any]] = []
        for start in range(0, len(messages), BATCH):
            chunk = [self.held.get(str(m.get("MessageId", "")), m) for m in messages[start : start + BATCH]]
            response = self.sqs.delete_message_batch(
                QueueUrl=self.url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(chunk)],
            )
            for ok in response.get("Successful", []):
                message = chunk[int(ok["Id"])]
                self.held.pop(str(message.get("MessageId", "")), None)
                deleted.append(message)
        return deleted

    def saw_everything(self) -> bool:
        """Whether every message of the queue was handed out (call before :meth:`release`). A standard
        queue's scan reads until nothing new comes; a FIFO queue gives no more of a group while ten
        of its messages are held, so its scan asks SQS whether any message is still visible: one that
        is, is behind those (not seen, which is not "not there")."""
        if not self.url.endswith(".fifo"):
            return True
        try:
            attributes = self.sqs.get_queue_attributes(
                QueueUrl=self.url, AttributeNames=["ApproximateNumberOfMessages"]
            )["Attributes"]
            return int(attributes.get("ApproximateNumberOfMessages", "1")) == 0
        except Exception as exc:  # (unknown: not said to be missing)
            log.warning("reading the depth of %s failed: %s", self.url, exc)
            return False

    def release(self) -> None:
        """Make everything still held visible again now."""
        held, self.held = list(self.held.values()), {}
        self._change_visibility(held, 0)


def _server_ms(response: Any) -> int:
    """SQS's time of a response (its ``Date`` header, epoch ms, to the second); this machine's
    clock when the response has none."""
    from email.utils import parsedate_to_datetime

    date = response.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
    try:
        return int(parsedate_to_datetime(date).timestamp()) * 1000
    except (TypeError, ValueError):
        return int(time.time()) * 1000
