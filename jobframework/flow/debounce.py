"""Debounce: of the enqueues of one key within a window, only the last payload runs, once, at its close.

The first enqueue of a key opens a window of ``debounce`` seconds (item ``pk = debounce#<key>``, ``sk
= window``); every enqueue in it is sent delayed to the window's close and then recorded as the
window's latest (a conditional write: only while the window is open). At the close the consumer's
debounce gate runs the window's latest and drops the others with status ``cancelled`` (reason
``debounced``). The window is fixed from its first enqueue (it does not slide), so a steady stream
of enqueues still runs once per window. Each window's job has its own idempotency key
(``<key>#<window>``), so it runs once however often SQS delivers it.

An enqueue whose send fails is not recorded, so the previous latest runs instead; an enqueue that
finds the window closed by the time its send is done raises :class:`EnqueueError` (its message is
dropped as not the latest) and may simply be enqueued again (it opens the next window).
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any

from jobframework.errors import EnqueueError
from jobframework.flow.outcome import Drop, HandBack
from jobframework.state import JobState

if TYPE_CHECKING:
    from jobframework.envelope import Envelope
    from jobframework.jobs import Job
    from jobframework.state import StateStore

log = logging.getLogger(__name__)

MAX_DEBOUNCE_SECONDS = 900
"""SQS delays a message 15 minutes at most: the window's close must be reachable by one delay."""
NONE = "-"
JOIN_ATTEMPTS = 5


def _key(key: str) -> dict[str, Any]:
    return {"pk": {"S": f"debounce#{key}"}, "sk": {"S": "window"}}


def join(store: StateStore, key: str, job_id: str, window: float, now: float) -> tuple[str, float]:
    """The window (its id and close, epoch seconds) that an enqueue of ``key`` joins, opening one when
    none is open.

    Raises:
        EnqueueError: the window kept closing and opening under concurrent enqueues.
    """
    for _ in range(JOIN_ATTEMPTS):
        try:
            store.client.update_item(
                TableName=store.table,
                Key=_key(key),
                UpdateExpression=(
                    "SET prev_window = if_not_exists(window_id, :none), "
                    "prev_latest = if_not_exists(latest, :none), "
                    "window_id = :me, latest = :none, closes_at = :closes, expires_at = :exp"
                ),
                ConditionExpression="attribute_not_exists(pk) OR closes_at <= :now",
                ExpressionAttributeValues={
                    ":none": {"S": NONE},
                    ":me": {"S": job_id},
                    ":closes": {"N": f"{now + window:.3f}"},
                    ":now": {"N": f"{now:.3f}"},
                    ":exp": {"N": str(int(now + window) + 24 * 3600)},
                },
            )
            return job_id, now + window
        except store.client.exceptions.ConditionalCheckFailedException:
            pass
        item = store.client.get_item(TableName=store.table, Key=_key(key), ConsistentRead=True).get(
            "Item", {}
        )
        closes = float(item.get("closes_at", {}).get("N", "0"))
        if item and closes > now:
            return item["window_id"]["S"], closes
    raise EnqueueError(f"could not join a debounce window of key {key!r}: it kept changing; try again")


def confirm(store: StateStore, key: str, window_id: str, job_id: str, now: float) -> None:
    """Record the sent ``job_id`` as its window's latest.

    Raises:
        EnqueueError: the window closed before the send completed (the message sent is then dropped).
    """
    try:
        store.client.update_item(
            TableName=store.table,
            Key=_key(key),
            UpdateExpression="SET latest = :me",
            ConditionExpression="window_id = :w AND closes_at > :now",
            ExpressionAttributeValues={
                ":me": {"S": job_id},
                ":w": {"S": window_id},
                ":now": {"N": f"{now:.3f}"},
            },
        )
    except store.client.exceptions.ConditionalCheckFailedException:
        raise EnqueueError(
            f"the debounce window of key {key!r} closed while job {job_id} was being sent, so it will not "
            "run; enqueue it again (it opens the next window)"
        ) from None


def delay_to_close(closes_at: float, now: float) -> int:
    """Whole seconds from ``now`` to the window's close, rounded up."""
    return max(0, min(MAX_DEBOUNCE_SECONDS, math.ceil(closes_at - now)))


class DebounceGate:
    """The consumer side: at the window's close run its latest enqueue, drop the others."""

    def __init__(self, store: StateStore) -> None:
        self.store = store

    def __call__(
        self, env: Envelope, job: Job[Any], payload: Any, attempt: int, now: float
    ) -> HandBack | Drop | None:
        ref = env.debounce
        if ref is None or attempt > 1:
            return None
        try:
            item = self.store.client.get_item(
                TableName=self.store.table, Key=_key(ref.key), ConsistentRead=True
            ).get("Item", {})
        except Exception:
            log.warning("reading debounce window %s failed; checking again soon", ref.window, exc_info=True)
            return HandBack(5, "debounce window unreadable")
        if item.get("window_id", {}).get("S") == ref.window:
            closes = float(item.get("closes_at", {}).get("N", "0"))
            if closes > now:  # delivered early (a delay is whole seconds): wait for the close
                return HandBack(max(1, delay_to_close(closes, now)), "debounce window still open")
            latest = item.get("latest", {}).get("S", NONE)
        elif item.get("prev_window", {}).get("S") == ref.window:
            latest = item.get("prev_latest", {}).get("S", NONE)
        else:
            log.warning(
                "job %s (%s): debounce window %s of key %s is no longer on record; running it",
                env.id,
                env.type,
                ref.window,
                ref.key,
            )
            return None
        if latest == env.id:
            return None
        log.info("job %s (%s) debounced: superseded by %s", env.id, env.type, latest)
        return Drop(JobState.CANCELLED, f"debounced: superseded by {latest}", "Debounced")
