"""Redrive the dead letters an operator ticked, by message id.

:meth:`jobframework.dlq.DeadLetters.redrive` selects by job type, age and count; the console's
filter redrive calls it as is. A hand-picked selection needs a match by message id, which it does
not offer, so this module moves exactly the ticked letters with the same guarantees: the same body
(id, key) and kept attributes (trace) as a new message to the letter's source queue, attempts
starting again at 1, and a letter deleted from the DLQ only after its send succeeded; whatever was
read and not moved is made visible again at the end. (When ``DeadLetters.redrive`` takes message
ids, this module becomes one call.)
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from typing import Any

from jobframework import envelope as wire
from jobframework.dead_letter import KEPT_ATTRIBUTES
from jobframework.dlq import BATCH, HOLD_SECONDS, DeadLetter, DeadLetterError, DeadLetters, RedriveResult

log = logging.getLogger(__name__)

EMPTY_RECEIVES = 2


def _entry(n: int, letter: DeadLetter) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "Id": str(n),
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
    return entry


def _source(letters: DeadLetters, letter: DeadLetter, default: str) -> str:
    if letter.source and letter.source != "-":
        found = letters.config.by_queue_name(letter.source)
        if found and found[1].name == letter.source:
            return found[1].url
        try:
            return str(letters.sqs.get_queue_url(QueueName=letter.source)["QueueUrl"])
        except Exception:
            log.warning("source queue %s of %s not found; using %s", letter.source, letter.job_id, default)
    return default


def redrive_selected(
    letters: DeadLetters,
    priority: str,
    message_ids: Collection[str],
    *,
    dry_run: bool = False,
    progress: Callable[[int], None] | None = None,
) -> RedriveResult:
    """Send the dead letters with these SQS message ids back to their source queue.

    Returns what moved (``matched``: how many of the ids are still in the DLQ; in a dry run nothing
    moves). Ids no longer in the DLQ (redriven or purged meanwhile) are simply not found.

    Raises:
        DeadLetterError: the DLQ cannot be read (what moved stays moved; nothing is lost).
    """
    url = letters.dlq_url(priority)
    default = letters.default_source(priority)
    wanted = set(message_ids)
    result = RedriveResult(priority=priority, dry_run=dry_run)
    held: dict[str, dict[str, Any]] = {}
    """Every message read and not deleted: made visible again at the end."""
    empty = 0
    try:
        while wanted and empty < EMPTY_RECEIVES:
            response: Any = letters.sqs.receive_message(
                QueueUrl=url,
                MaxNumberOfMessages=BATCH,
                WaitTimeSeconds=letters.wait_time_seconds,
                VisibilityTimeout=HOLD_SECONDS,
                AttributeNames=["All"],
                MessageSystemAttributeNames=["All"],
                MessageAttributeNames=["All"],
            )
            got: list[dict[str, Any]] = list(response.get("Messages", []))
            empty = 0 if got else empty + 1
            chosen: list[tuple[dict[str, Any], DeadLetter]] = []
            for message in got:
                held[message["ReceiptHandle"]] = message
                if message.get("MessageId") in wanted:
                    wanted.discard(message["MessageId"])
                    chosen.append((message, DeadLetter.of(message)))
                else:
                    result.skipped += 1
            result.matched += len(chosen)
            if dry_run:
                for _, letter in chosen:
                    _count(result, letter, None)
                if progress and chosen:
                    progress(len(chosen))
                continue
            moved = _move(letters, url, chosen, default, result, held)
            if progress and moved:
                progress(moved)
    except Exception as exc:
        raise DeadLetterError(f"redrive of the selected {priority} dead letters stopped: {exc}") from exc
    finally:
        _release(letters, url, list(held.values()))
    return result


def _move(  # noqa: PLR0917
    letters: DeadLetters,
    dlq_url: str,
    chosen: list[tuple[dict[str, Any], DeadLetter]],
    default: str,
    result: RedriveResult,
    held: dict[str, dict[str, Any]],
) -> int:
    by_source: dict[str, list[tuple[dict[str, Any], DeadLetter]]] = {}
    for message, letter in chosen:
        by_source.setdefault(_source(letters, letter, default), []).append((message, letter))
    moved = 0
    for source_url, items in by_source.items():
        try:
            entries: list[Any] = [_entry(n, letter) for n, (_, letter) in enumerate(items)]
            response = letters.sqs.send_message_batch(QueueUrl=source_url, Entries=entries)
        except Exception as exc:
            result.failed += len(items)
            result.errors.append(f"SendMessageBatch to {source_url} failed: {exc}")
            continue
        for bad in response.get("Failed", []):
            _, letter = items[int(bad["Id"])]
            result.failed += 1
            result.errors.append(f"{letter.job_id or letter.message_id}: {bad.get('Code')}")
        sent = [items[int(ok["Id"])] for ok in response.get("Successful", [])]
        if not sent:
            continue
        # Deleted only now that the send succeeded: an interruption before this leaves the letter in
        # the DLQ (released at the end) as well as its copy in the source queue; its key dedups it.
        deleted = letters.sqs.delete_message_batch(
            QueueUrl=dlq_url,
            Entries=[{"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]} for n, (m, _) in enumerate(sent)],
        )
        for ok in deleted.get("Successful", []):
            message, letter = sent[int(ok["Id"])]
            held.pop(message["ReceiptHandle"], None)
            _count(result, letter, source_url)
            moved += 1
    result.moved += moved
    return moved


def _count(result: RedriveResult, letter: DeadLetter, source_url: str | None) -> None:
    kind = letter.job_type or "?"
    result.by_type[kind] = result.by_type.get(kind, 0) + 1
    if source_url:
        name = source_url.rstrip("/").rsplit("/", 1)[-1]
        result.by_source[name] = result.by_source.get(name, 0) + 1
    if letter.job_id:
        result.job_ids.append(letter.job_id)


def _release(letters: DeadLetters, url: str, messages: list[dict[str, Any]]) -> None:
    for start in range(0, len(messages), BATCH):
        chunk = messages[start : start + BATCH]
        try:
            letters.sqs.change_message_visibility_batch(
                QueueUrl=url,
                Entries=[
                    {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
                    for n, m in enumerate(chunk)
                ],
            )
        except Exception:
            log.warning("releasing %d messages on %s failed; they reappear later", len(chunk), url)
