"""Pausing a queue: the event source mapping's ``Enabled`` on AWS, a flag the pollers read locally.

``jf queue pause high`` does both: it writes a flag item to the state table (``pk = "pause"``, ``sk =
<lane>``), which the emulator of ``jf dev`` and ``jf worker`` read (one ``Query`` a second) to stop
and restart polling the lane, and it disables every Lambda event source mapping whose source is the
lane's queue (found by listing the mappings of the queue's ARN). Records already received finish;
nothing is lost: a paused queue keeps its messages (mind their retention period).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jobframework.config import RuntimeConfig
    from jobframework.state import StateStore

log = logging.getLogger(__name__)

PAUSE_PK = "pause"
REFRESH_SECONDS = 1.0
"""How often a poller reads the pause flags."""
SETTLE_SECONDS = 5
"""How long after a pause a consumer may still take a job of the lane: a receive under way returns
what it got (``jf dev``'s long poll waits up to 2 s, a poller reads the flag about once a second,
Lambda's pollers take a few seconds to stop)."""


@dataclass(frozen=True, slots=True)
class MappingChange:
    """One event source mapping that a pause or resume changed (or found already so)."""

    uuid: str
    function: str
    state: str


def pause(store: StateStore, lane: str, *, by: str = "jf") -> str | None:
    """Flag ``lane`` as paused (idempotent: a second pause keeps the first time). Returns when it was
    paused before (ISO time), or ``None`` when this call paused it."""
    now = datetime.now(UTC).isoformat(timespec="seconds")
    old = store.client.update_item(
        TableName=store.table,
        Key={"pk": {"S": PAUSE_PK}, "sk": {"S": lane}},
        UpdateExpression="SET paused_at = if_not_exists(paused_at, :now), paused_by = :by",
        ExpressionAttributeValues={":now": {"S": now}, ":by": {"S": by}},
        ReturnValues="ALL_OLD",
    ).get("Attributes", {})
    return _paused_at(old)


def resume(store: StateStore, lane: str) -> str | None:
    """Clear ``lane``'s pause flag (idempotent). Returns since when it was paused (ISO time), or
    ``None`` when it was not paused."""
    old = store.client.delete_item(
        TableName=store.table,
        Key={"pk": {"S": PAUSE_PK}, "sk": {"S": lane}},
        ReturnValues="ALL_OLD",
    ).get("Attributes", {})
    return _paused_at(old)


def _paused_at(item: dict[str, Any]) -> str | None:
    """The ``paused_at`` (ISO time) of a flag item as DynamoDB returns it, or ``None``."""
    since = item.get("paused_at", {}).get("S")
    return since if isinstance(since, str) else None


def paused(store: StateStore) -> dict[str, str]:
    """The paused lanes and since when (ISO time), in one ``Query``."""
    lanes: dict[str, str] = {}
    kwargs: dict[str, Any] = {
        "TableName": store.table,
        "KeyConditionExpression": "pk = :pk",
        "ExpressionAttributeValues": {":pk": {"S": PAUSE_PK}},
        "ConsistentRead": True,
    }
    while True:
        response = store.client.query(**kwargs)
        for item in response.get("Items", []):
            lanes[item["sk"]["S"]] = item.get("paused_at", {}).get("S", "")
        if "LastEvaluatedKey" not in response:
            return lanes
        kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]


def set_mappings_enabled(lambda_client: Any, queue_arn: str, enabled: bool) -> list[MappingChange]:
    """Enable or disable every event source mapping of the queue ``queue_arn`` (none locally)."""
    changes: list[MappingChange] = []
    kwargs: dict[str, Any] = {"EventSourceArn": queue_arn}
    while True:
        response = lambda_client.list_event_source_mappings(**kwargs)
        for mapping in response.get("EventSourceMappings", []):
            updated = lambda_client.update_event_source_mapping(UUID=mapping["UUID"], Enabled=enabled)
            changes.append(
                MappingChange(
                    uuid=mapping["UUID"],
                    function=str(mapping.get("FunctionArn", "")).rsplit(":", 1)[-1],
                    state=str(updated.get("State", "")),
                )
            )
        marker = response.get("NextMarker")
        if not marker:
            return changes
        kwargs["Marker"] = marker


class PauseWatch:
    """The paused lanes as a poller sees them: re-read at most every ``refresh`` seconds.

    A read that fails keeps the last answer (logged): a blip of the state table neither pauses nor
    resumes anything.
    """

    def __init__(
        self, store: StateStore, lanes: Iterable[str] = (), refresh: float = REFRESH_SECONDS
    ) -> None:
        self.store = store
        self.lanes = set(lanes)
        self.refresh = refresh
        self._paused: frozenset[str] = frozenset()
        self._read_at = float("-inf")
        self._lock = threading.Lock()

    def current(self) -> frozenset[str]:
        """The lanes paused now (those of interest when ``lanes`` was given)."""
        now = time.monotonic()
        if now - self._read_at < self.refresh or not self._lock.acquire(blocking=False):
            return self._paused
        try:
            self._read_at = now
            found = frozenset(paused(self.store))
            if self.lanes:
                found &= frozenset(self.lanes)
            if found != self._paused:
                log.info("paused queues now: %s", ", ".join(sorted(found)) or "none")
            self._paused = found
        except Exception:
            log.warning("reading the pause flags failed; keeping the last known", exc_info=True)
        finally:
            self._lock.release()
        return self._paused


def pause_watch(config: RuntimeConfig, dynamodb: Any) -> Callable[[], frozenset[str]] | None:
    """The lanes ``jf queue pause`` paused, as ``jf dev``'s and ``jf worker``'s emulator asks for them
    (none without a state table)."""
    if not config.state_table:
        return None
    from jobframework.state import StateStore

    return PauseWatch(StateStore(config.state_table, dynamodb)).current


def lanes_of(queues: Iterable[str], name: str) -> list[str]:
    """The configured lanes ``name`` means: a priority names its plain and profile lanes (``high``,
    ``high-cpu``); a lane names itself.

    Raises:
        ConfigurationError: no configured lane matches; the message lists them.
    """
    from jobframework.errors import ConfigurationError
    from jobframework.jobs import lane_priority, lane_sort_key

    known = sorted(queues, key=lane_sort_key)  # critical first, as jf queue ls lists them
    if "-" in name:
        found = [name] if name in known else []
    else:
        found = [lane for lane in known if lane_priority(lane).value == name]
    if not found:
        from jobframework.errortext import closest

        close = closest(name, [*known, "critical", "high", "default", "low"])
        hint = f" (did you mean {close}?)" if close else ""
        raise ConfigurationError(
            f"no queue {name!r} is configured{hint}; known: {', '.join(known) or 'none'}"
        )
    return found
