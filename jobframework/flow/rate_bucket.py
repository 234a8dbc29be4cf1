"""A job type's rate (``@job(rate="100/minute", rate_key=fn)``), shared by every consumer.

A token bucket kept as GCRA (the generic cell rate algorithm): one number per bucket, the
theoretical arrival time ``tat`` (``sk = rate``). An acquisition moves ``tat`` by one emission
interval (``per / limit`` seconds) with one conditional update; it is allowed while the new ``tat``
stays within a burst of ``limit / 20`` (at least one) intervals of now, so that any window of
``per`` seconds admits at most ``limit`` plus that burst (starts are spread over the period, not let
through in a lump at its start).

An update conditional on the value read (a compare-and-set) loses to every other consumer's update
in between, and several consumers on one bucket could lose eight in a row (the record was then
handed back, "limits unavailable"). So once one has lost, a bucket that is busy (``tat`` at or past
now) is moved by ``SET tat = tat + interval`` conditional only on it staying busy (and, for a record
that cannot reserve, on a token still fitting the burst), which no other update can make fail: one
token a request, the new ``tat`` returned, from which the token's turn is known.

A record over the rate **reserves** its turn: the same conditional update moves ``tat`` by one
interval anyway, and the record's slot is the time that token falls due. Waiting records so queue up
one interval apart, each holding a token of its own, instead of all coming back for the next token
and all but one being handed back again (a burst of N cost about N squared hand-backs). The slot
travels on the hand-back copy (``jf-rate-slot``: the slot and the attempt it was taken for); SQS
delays are whole seconds, so the copy comes back up to :data:`EARLY_SECONDS` before its slot and the
record waits out the rest in the consumer before it starts. A record that comes back with a slot for
its attempt takes no token again (also when another gate hands it back before it runs), however late
it comes back; a record that ran and is retried takes a new one. Late turns (busy consumers, a
batching window) start when they come back, so a short window can see more starts than the limit
plus the burst; over the period the count holds (each start is one token). A record that cannot
carry a turn reserves none and waits for the next token as before (a FIFO lane's hand-back changes
the visibility in place; so does a copy whose send failed). A reserved token whose record never comes
back (cancelled, expired, purged) is simply not used. The carried turn is trusted as the message is
(``jf-sig`` covers the body, not per-delivery attributes): a sender that can write to the queue can
start a job out of turn.

Tokens are taken for a batch's records together: the first record of a job type to reach the gate
takes as many tokens as the batch has records of that type (at most the burst) in the one update, and
the others of the batch take theirs from what it took, with no request. Tokens not used within
:data:`POOL_SECONDS` (a record of the batch ended before the gate) are given back in the bucket's next
update, so none is lost. Jobs with a ``rate_key`` take one token a record (the keys are the payloads').
"""

from __future__ import annotations

import contextlib
import math
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jobframework.state import StateStore

WRITE_ATTEMPTS = 8
"""Conditional writes of one item before giving up (the record is handed back, limits unavailable)."""
BURST_FRACTION = 0.05
POOL_SECONDS = 1.0
"""Tokens taken for a batch's records are theirs for this long (seconds); the rest go back."""
MIN_WAIT_SECONDS = 0.001
"""A refused take waits at least this long (a wait of 0 means the token was taken)."""


def burst_seconds(limit: float, per: float) -> float:
    """The bucket's burst as time: ``limit / 20`` intervals, at least one."""
    return max(1.0, limit * BURST_FRACTION) * per / limit


@dataclass(slots=True)
class _Pool:
    """Tokens a process took for a batch's records and has not handed out yet."""

    left: int
    until: float
    """Epoch seconds; after this the ``left`` tokens go back to the bucket in its next update."""


class RateLimit:
    """Token buckets as GCRA (see the module's docstring)."""

    def __init__(self, store: StateStore) -> None:
        self.store = store
        self._tat: dict[str, float | None] = {}
        self._pools: dict[str, _Pool] = {}
        self._buckets: dict[str, threading.Lock] = {}
        self._held: dict[str, float] = {}
        """Buckets this process held (:meth:`hold`) and until when."""
        self._lock = threading.Lock()

    def acquire(
        self, pk: str, limit: float, per: float, now: float, want: int = 1, *, reserve: bool = True
    ) -> float:
        """Take a token; returns 0 when taken, else the seconds until the token reserved for the caller
        falls due (its turn; see the module's docstring). With ``reserve=False`` a refusal reserves
        nothing (and writes nothing): the seconds until the next token falls due.

        ``want`` is how many records of the batch need a token of this bucket: up to that many (and the
        burst) are taken in one update, the surplus kept for the others of the batch.
        """
        if self._from_pool(pk, now):
            return 0.0
        with self._lock:
            bucket = self._buckets.setdefault(pk, threading.Lock())
        with bucket:  # one update a bucket at a time in this process: the batch's others wait for it
            if self._from_pool(pk, now):
                return 0.0
            return self._take(pk, limit, per, now, max(1, want), reserve=reserve)

    def hold(self, pk: str, until: float, limit: float, per: float) -> None:
        """No token of the bucket falls due before ``until`` (a downstream's ``Retry-After``): ``tat``
        is moved there (plus the burst, less an interval) unless it is already later, and the tokens
        this process holds for its batch are dropped. Records over the rate then reserve their turns
        one interval apart from ``until``."""
        held = until + burst_seconds(limit, per) - per / limit
        with self._lock:
            self._pools.pop(pk, None)
            if (self._tat.get(pk) or 0.0) < held:
                self._tat[pk] = held
            self._held[pk] = max(until, self._held.get(pk, 0.0))
        # (a failed condition: held as long or longer already)
        with contextlib.suppress(self.store.client.exceptions.ConditionalCheckFailedException):
            self.store.client.update_item(
                TableName=self.store.table,
                Key={"pk": {"S": pk}, "sk": {"S": "rate"}},
                UpdateExpression="SET tat = :held, expires_at = :exp",
                ConditionExpression="attribute_not_exists(tat) OR tat < :held",
                ExpressionAttributeValues={
                    ":held": {"N": f"{held:.6f}"},
                    ":exp": {"N": str(int(held) + 24 * 3600)},
                },
            )

    def held_until(self, pk: str, now: float) -> float | None:
        """Until when this process holds the bucket (a throttle's ``Retry-After``), if it does now: a
        turn reserved before the hold must not start within it."""
        with self._lock:
            until = self._held.get(pk)
            if until is not None and until <= now:
                del self._held[pk]
                return None
            return until

    def _from_pool(self, pk: str, now: float) -> bool:
        with self._lock:
            pool = self._pools.get(pk)
            if pool is None or pool.left <= 0 or now >= pool.until:
                return False
            pool.left -= 1
            return True

    def _take(self, pk: str, limit: float, per: float, now: float, want: int, *, reserve: bool) -> float:
        interval = per / limit
        tolerance = burst_seconds(limit, per)
        with self._lock:
            tat = self._tat.get(pk)
            pool = self._pools.get(pk)
            unused = pool.left if pool is not None and now >= pool.until else 0
        conflicts = 0
        give_back = unused * interval  # unused tokens go back
        for _ in range(WRITE_ATTEMPTS):
            base = max(now, (tat or 0.0) - give_back)
            # Tokens that fit within the burst (epoch seconds carry ~1e-7 s of float error: the slack).
            room = math.floor((tolerance - (base - now)) / interval + 1e-6)
            if room < 1 and not reserve:  # tat only grows: what we saw cannot overstate the wait
                return max(base + interval - now - tolerance, MIN_WAIT_SECONDS)
            taken = max(1, min(want, room))  # none in the burst: reserve the next one
            if tat is not None and tat - give_back >= now and conflicts:
                # A busy bucket that others move too: one token by an update that needs no value read
                # before it (a compare-and-set would keep losing to them).
                added = self._add(
                    pk,
                    now + give_back,
                    interval - give_back,
                    interval=interval,
                    tolerance=tolerance,
                    reserve=reserve,
                )
                if isinstance(added, float):
                    return self._took(pk, added, 1, now, interval=interval, tolerance=tolerance)
                tat = added[1]
                if tat is not None and tat - give_back >= now and not reserve:
                    return max(tat - give_back + interval - now - tolerance, MIN_WAIT_SECONDS)
                continue
            ok, current = self._write(pk, tat, base + taken * interval)
            if ok:
                return self._took(
                    pk, base + taken * interval, taken, now, interval=interval, tolerance=tolerance
                )
            tat, conflicts = current, conflicts + 1
        raise RuntimeError(f"the rate bucket {pk} kept changing under {WRITE_ATTEMPTS} writes")

    def _took(
        self, pk: str, tat: float, taken: int, now: float, *, interval: float, tolerance: float
    ) -> float:
        """Note the bucket as this update left it (``taken`` tokens up to ``tat``); 0 when the first of
        them was in the burst, else the seconds until the reserved one falls due."""
        base = tat - taken * interval
        room = math.floor((tolerance - (base - now)) / interval + 1e-6)
        with self._lock:
            self._tat[pk] = tat
            self._pools[pk] = _Pool(taken - 1 if room >= 1 else 0, now + POOL_SECONDS)
        return 0.0 if room >= 1 else max(base + interval - now - tolerance, MIN_WAIT_SECONDS)

    def _add(
        self, pk: str, floor: float, step: float, *, interval: float, tolerance: float, reserve: bool
    ) -> float | tuple[bool, float | None]:
        """Move ``tat`` by ``step`` while it is at least ``floor`` (the bucket is busy) and, unless
        ``reserve``, while a token still fits the burst; the new ``tat``, or the failure and the value
        found."""
        values: dict[str, Any] = {
            ":step": {"N": f"{step:.6f}"},
            ":floor": {"N": f"{floor:.6f}"},
            ":exp": {"N": str(int(floor + tolerance) + 24 * 3600)},
        }
        condition = "tat >= :floor"
        if not reserve:
            values[":ceiling"] = {"N": f"{floor + tolerance - interval + 1e-6:.6f}"}  # a token fits
            condition += " AND tat <= :ceiling"
        try:
            new = self.store.client.update_item(
                TableName=self.store.table,
                Key={"pk": {"S": pk}, "sk": {"S": "rate"}},
                UpdateExpression="SET tat = tat + :step, expires_at = :exp",
                ConditionExpression=condition,
                ExpressionAttributeValues=values,
                ReturnValues="UPDATED_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )["Attributes"]["tat"]["N"]
        except self.store.client.exceptions.ConditionalCheckFailedException as exc:
            item = getattr(exc, "response", {}).get("Item") or {}
            return False, float(item["tat"]["N"]) if "tat" in item else None
        return float(new)

    def _write(self, pk: str, old: float | None, new: float) -> tuple[bool, float | None]:
        values: dict[str, Any] = {":new": {"N": f"{new:.6f}"}, ":exp": {"N": str(int(new) + 24 * 3600)}}
        if old is not None:
            values[":old"] = {"N": f"{old:.6f}"}
        try:
            self.store.client.update_item(
                TableName=self.store.table,
                Key={"pk": {"S": pk}, "sk": {"S": "rate"}},
                UpdateExpression="SET tat = :new, expires_at = :exp",
                ConditionExpression="attribute_not_exists(tat)" if old is None else "tat = :old",
                ExpressionAttributeValues=values,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except self.store.client.exceptions.ConditionalCheckFailedException as exc:
            item = getattr(exc, "response", {}).get("Item") or {}
            return False, float(item["tat"]["N"]) if "tat" in item else None
        return True, new
