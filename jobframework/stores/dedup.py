"""Enqueue dedup markers: which job holds a key, for how long, and whether its send went through.

One item a key (``pk = dedup#<key>``, ``sk = marker``): the holder's job id, ``state`` (``pending``
while its enqueue sends, ``sent`` once confirmed), ``lease_until`` (a pending claim older than this
was left by a sender that died) and ``expires_at`` (the end of the dedup window; also the item's
TTL). A tracked job's claim is confirmed by its status record instead of a write of its own.

The claim is an algorithm over three primitives, the same for both implementations:
:meth:`DedupMarkers.claim` makes a conditional put (:meth:`put_if_free`); when it fails it reads
the marker (:meth:`read`) and either returns the holder (its send is confirmed), waits while the
holder is still sending, or claims again when the marker is free (released, expired, or pending
past its lease: a tracked one only when its job has no status). :class:`DynamoDedupMarkers` keeps
them in the state table, :class:`InMemoryDedupMarkers` in a dict (for tests without the embedded
AWS); ``tests/functional/test_dedup_markers.py`` runs one contract against both.
"""

from __future__ import annotations

import contextlib
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobframework.errors import EnqueueError
from jobframework.stores.items import from_item, to_item

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from jobframework.stores.job_records import JobRecords

CLAIM_ATTEMPTS = 5
PENDING_WAIT_SECONDS = 5.0
"""How long a duplicate enqueue waits for the first one's send to be confirmed."""
POLL_SECONDS = 0.05


@dataclass(frozen=True, slots=True)
class Marker:
    """A dedup marker as read."""

    job_id: str
    state: str
    """``pending`` or ``sent``."""
    lease_until: float
    expires_at: float
    tracked: bool


class DedupMarkers(ABC):
    """The dedup claim (see the module's docstring) over an implementation's three primitives."""

    pending_wait = PENDING_WAIT_SECONDS

    def claim(
        self, key: str, job_id: str, window: float, lease: float = 30.0, *, tracked: bool = False
    ) -> str | None:
        """Claim ``key`` for ``job_id`` for ``window`` seconds: ``None`` when the claim is ours, else
        the id of the job that holds the key (once its send is confirmed).

        Raises:
            EnqueueError: the holder is still sending after :data:`PENDING_WAIT_SECONDS`, or the key
                kept changing hands.
        """
        stale = ""  # a tracked claim found unsent past its lease: taken over by naming its holder
        for _ in range(CLAIM_ATTEMPTS):
            now = time.time()
            marker = Marker(job_id, "pending", now + lease, now + window, tracked)
            if self.put_if_free(key, marker, now=now, stale=stale):
                return None
            holder, stale = self._sent_holder(key)
            if holder is not None:
                return holder
            # The holder released its claim (its send failed) or its lease ran out: claim again.
        raise EnqueueError(f"could not claim dedup key {key!r}: it kept changing hands; try again")

    def _sent_holder(self, key: str) -> tuple[str | None, str]:
        """The holder once its send is confirmed, or ``None`` when the claim is free to take again
        (and then the id of a stale tracked holder to take it from, or ``""``). Waits while the
        holder is still sending, so that a duplicate never gets the id of a job whose send fails."""
        deadline = time.monotonic() + self.pending_wait
        while True:
            marker = self.read(key)
            now = time.time()
            if marker is None or not marker.job_id or marker.expires_at < now:
                return None, ""
            if marker.state == "sent":
                return marker.job_id, ""
            if marker.tracked and self.has_status(marker.job_id):
                return marker.job_id, ""  # a tracked job's status is written once it is sent
            if marker.lease_until < now:  # its sender died or never confirmed: take it over
                return None, marker.job_id if marker.tracked else ""
            if time.monotonic() > deadline:
                raise EnqueueError(
                    f"job {marker.job_id} with dedup key {key!r} is still being sent by another enqueue; "
                    "try again"
                )
            time.sleep(POLL_SECONDS)

    @abstractmethod
    def put_if_free(self, key: str, marker: Marker, *, now: float, stale: str) -> bool:
        """Write ``marker`` (pending) unless the key is held at ``now``: free means no marker, an
        expired one, or one pending past its lease that is untracked or held by ``stale``."""

    @abstractmethod
    def read(self, key: str) -> Marker | None:
        """The marker of ``key`` (a consistent read), or ``None``."""

    @abstractmethod
    def has_status(self, job_id: str) -> bool:
        """Whether the job has a status record (a tracked claim's confirmation)."""

    @abstractmethod
    def confirm(self, key: str, job_id: str) -> None:
        """Mark ``job_id``'s claim as sent (it is no longer taken over when its lease passes)."""

    @abstractmethod
    def release(self, key: str, job_id: str) -> None:
        """Drop ``job_id``'s claim (its send failed), so that a retry of the enqueue is not blocked."""


def _key(key: str) -> dict[str, Any]:
    return {"pk": {"S": f"dedup#{key}"}, "sk": {"S": "marker"}}


class DynamoDedupMarkers(DedupMarkers):
    """Dedup markers in the state table ``table``."""

    def __init__(self, table: str, client: DynamoDBClient) -> None:
        self.table = table
        self.client = client

    def put_if_free(self, key: str, marker: Marker, *, now: float, stale: str) -> bool:
        item: dict[str, Any] = {"pk": f"dedup#{key}", "sk": "marker", "job_id": marker.job_id}
        item |= {"state": marker.state, "tracked": marker.tracked}
        item |= {"lease_until": round(marker.lease_until, 3), "expires_at": round(marker.expires_at, 3)}
        try:
            self.client.put_item(
                TableName=self.table,
                Item=to_item(item),
                # A pending claim past its lease is free unless it is tracked: a tracked claim's
                # confirmation is its job's status, which only the claim's reader looks at.
                ConditionExpression=(
                    "attribute_not_exists(pk) OR expires_at < :now"
                    " OR (#state = :pending AND lease_until < :now"
                    " AND (attribute_not_exists(tracked) OR tracked = :no OR job_id = :stale))"
                ),
                ExpressionAttributeNames={"#state": "state"},
                ExpressionAttributeValues=to_item(
                    {":now": round(now, 3), ":pending": "pending", ":no": False, ":stale": stale}
                ),
            )
        except self.client.exceptions.ConditionalCheckFailedException:
            return False
        return True

    def read(self, key: str) -> Marker | None:
        item = self.client.get_item(TableName=self.table, Key=_key(key), ConsistentRead=True).get("Item")
        if not item:
            return None
        plain = from_item(item)
        return Marker(
            job_id=str(plain.get("job_id", "")),
            state=str(plain.get("state", "")),
            lease_until=float(plain.get("lease_until", 0)),
            expires_at=float(plain.get("expires_at", 0)),
            tracked=bool(plain.get("tracked", False)),
        )

    def has_status(self, job_id: str) -> bool:
        return "Item" in self.client.get_item(
            TableName=self.table,
            Key={"pk": {"S": f"job#{job_id}"}, "sk": {"S": "status"}},
            ConsistentRead=True,
            ProjectionExpression="pk",
        )

    def confirm(self, key: str, job_id: str) -> None:
        self.client.update_item(
            TableName=self.table,
            Key=_key(key),
            UpdateExpression="SET #state = :sent",
            ConditionExpression="job_id = :id",
            ExpressionAttributeNames={"#state": "state"},
            ExpressionAttributeValues=to_item({":sent": "sent", ":id": job_id}),
        )

    def release(self, key: str, job_id: str) -> None:
        with contextlib.suppress(self.client.exceptions.ConditionalCheckFailedException):  # not ours
            self.client.delete_item(
                TableName=self.table,
                Key=_key(key),
                ConditionExpression="job_id = :id",
                ExpressionAttributeValues=to_item({":id": job_id}),
            )


class InMemoryDedupMarkers(DedupMarkers):
    """Dedup markers in a dict; ``records`` are the job records whose statuses confirm tracked claims."""

    def __init__(self, records: JobRecords | None = None) -> None:
        self.records = records
        self.markers: dict[str, Marker] = {}
        self._lock = threading.Lock()

    def put_if_free(self, key: str, marker: Marker, *, now: float, stale: str) -> bool:
        with self._lock:
            held = self.markers.get(key)
            free = (
                held is None
                or held.expires_at < now
                or (
                    held.state == "pending"
                    and held.lease_until < now
                    and (not held.tracked or held.job_id == stale)
                )
            )
            if free:
                self.markers[key] = marker
            return free

    def read(self, key: str) -> Marker | None:
        with self._lock:
            return self.markers.get(key)

    def has_status(self, job_id: str) -> bool:
        return self.records is not None and self.records.get_status(job_id) is not None

    def confirm(self, key: str, job_id: str) -> None:
        with self._lock:
            held = self.markers.get(key)
            if held is None or held.job_id != job_id:
                raise EnqueueError(f"the dedup claim of {key!r} is not {job_id}'s to confirm")
            self.markers[key] = Marker(held.job_id, "sent", held.lease_until, held.expires_at, held.tracked)

    def release(self, key: str, job_id: str) -> None:
        with self._lock:
            held = self.markers.get(key)
            if held is not None and held.job_id == job_id:
                del self.markers[key]
