"""Concurrency and rate limits of a job type, shared by every consumer (Lambda and ``jf worker``).

**Concurrency** (``@job(concurrency=N, concurrency_key=fn)``): one item per job type (and key),
``pk = limit#<job>[#<key>]``, ``sk = concurrency``, holds the leases of the runs in progress, each
expiring at its run's hard deadline (now plus the job's timeout), so a crashed consumer's slot frees
itself. Acquiring is a write conditional on the item's ``version``; the write carries the leases
still alive plus the new one, and succeeds only while fewer than N are alive. A conflicting write
returns the item as it is now (``ReturnValuesOnConditionCheckFailure``), so a contended acquisition
needs no separate read. The lease is released when the record's outcome is known (one write).

**Rate** (``@job(rate="100/minute", rate_key=fn)``): a token bucket kept as GCRA (the generic cell
rate algorithm): one number per bucket, the theoretical arrival time ``tat`` (``sk = rate``). An
acquisition moves ``tat`` by one emission interval (``per / limit`` seconds) with one conditional
update; it is allowed while the new ``tat`` stays within a burst of ``limit / 20`` (at least one)
intervals of now, so that any window of ``per`` seconds admits at most ``limit`` plus that burst
(starts are spread over the period, not let through in a lump at its start).

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

Either way a record over the limit is handed back unrun; the hand-back does not use an attempt. A
state table that cannot be reached hands the record back too (a limit is never silently lifted).
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobframework.flow.options import limit_key_of
from jobframework.flow.outcome import NO_RATE_INPUTS, HandBack, RateInputs

if TYPE_CHECKING:
    from jobframework.envelope import Envelope
    from jobframework.jobs import Job
    from jobframework.state import StateStore

log = logging.getLogger(__name__)

CONCURRENCY_RETRY_SECONDS = (1, 3)
"""A record over its concurrency cap comes back after a random delay in this range (seconds)."""
UNAVAILABLE_RETRY_SECONDS = 5
WRITE_ATTEMPTS = 8
LEASE_MARGIN_SECONDS = 5.0
BURST_FRACTION = 0.05
POOL_SECONDS = 1.0
"""Tokens taken for a batch's records are theirs for this long (seconds); the rest go back."""
MIN_WAIT_SECONDS = 0.001
"""A refused take waits at least this long (a wait of 0 means the token was taken)."""
MAX_TURN_AHEAD_SECONDS = 14 * 24 * 3600.0
"""A carried turn further off than SQS keeps a message (14 days) is none this consumer gave."""
EARLY_SECONDS = 1.0
"""A record whose reserved slot is at most this far off waits for it in the consumer; a later slot is
handed back to come back at most this long before it (SQS delays are whole seconds)."""


def burst_seconds(limit: float, per: float) -> float:
    """The bucket's burst as time: ``limit / 20`` intervals, at least one."""
    return max(1.0, limit * BURST_FRACTION) * per / limit


def rate_slot(value: str | None, attempt: int) -> float | None:
    """The slot ``jf-rate-slot`` reserved for this attempt, or ``None`` (absent, malformed, not a
    finite time, or taken for an earlier attempt: a retried record takes a new token)."""
    if not value:
        return None
    slot, _, taken_for = value.partition(":")
    try:
        turn = float(slot)
        return turn if math.isfinite(turn) and int(taken_for) == attempt else None
    except ValueError:
        return None


def limit_key(job: Job[Any], payload: Any, kind: str) -> str:
    """``limit#<job>`` or ``limit#<job>#<key>`` for the per-key limits."""
    key = limit_key_of(job, payload, kind)
    return f"limit#{job.name}" if key is None else f"limit#{job.name}#{key}"


class ConcurrencyLimit:
    """Leases of one job type's runs (see the module's docstring)."""

    def __init__(self, store: StateStore) -> None:
        self.store = store
        self._seen: dict[str, tuple[int, dict[str, float]]] = {}
        self._lock = threading.Lock()

    def acquire(self, pk: str, lease: str, cap: int, until: float, now: float) -> bool:
        """Take a lease for ``lease`` (the job id) until ``until``; ``False`` when ``cap`` are taken."""
        with self._lock:
            version, leases = self._seen.get(pk, (0, {}))
        for _ in range(WRITE_ATTEMPTS):
            alive = {k: v for k, v in leases.items() if v > now and k != lease}
            if len(alive) >= cap:
                # What we saw may be old: look again before refusing (a refusal then costs a read).
                fresh = self._read(pk)
                if fresh == (version, leases):
                    return False
                version, leases = fresh
                continue
            alive[lease] = until
            ok, current = self._write(pk, version, alive)
            if ok:
                with self._lock:
                    self._seen[pk] = (version + 1, alive)
                return True
            version, leases = current
        raise RuntimeError(f"the concurrency leases of {pk} kept changing under {WRITE_ATTEMPTS} writes")

    def release(self, pk: str, lease: str) -> None:
        """Drop ``lease`` (one write; the item as it is then is kept, so the next take is one write)."""
        item = self.store.client.update_item(
            TableName=self.store.table,
            Key={"pk": {"S": pk}, "sk": {"S": "concurrency"}},
            UpdateExpression="REMOVE leases.#lease ADD version :one",
            ConditionExpression="attribute_exists(leases)",
            ExpressionAttributeNames={"#lease": lease},
            ExpressionAttributeValues={":one": {"N": "1"}},
            ReturnValues="ALL_NEW",
        ).get("Attributes", {})
        with self._lock:
            self._seen[pk] = _leases_of(item)

    def _read(self, pk: str) -> tuple[int, dict[str, float]]:
        item = self.store.client.get_item(
            TableName=self.store.table, Key={"pk": {"S": pk}, "sk": {"S": "concurrency"}}, ConsistentRead=True
        ).get("Item", {})
        return _leases_of(item)

    def _write(
        self, pk: str, version: int, leases: dict[str, float]
    ) -> tuple[bool, tuple[int, dict[str, float]]]:
        condition = "attribute_not_exists(version)" if version == 0 else "version = :v"
        values: dict[str, Any] = {
            ":leases": {"M": {k: {"N": f"{v:.3f}"} for k, v in leases.items()}},
            ":next": {"N": str(version + 1)},
            ":exp": {"N": str(int(max(leases.values(), default=time.time())) + 24 * 3600)},
        }
        if version:
            values[":v"] = {"N": str(version)}
        try:
            self.store.client.update_item(
                TableName=self.store.table,
                Key={"pk": {"S": pk}, "sk": {"S": "concurrency"}},
                UpdateExpression="SET leases = :leases, version = :next, expires_at = :exp",
                ConditionExpression=condition,
                ExpressionAttributeValues=values,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except self.store.client.exceptions.ConditionalCheckFailedException as exc:
            return False, _leases_of(getattr(exc, "response", {}).get("Item") or {})
        return True, (version + 1, leases)


def _leases_of(item: dict[str, Any]) -> tuple[int, dict[str, float]]:
    version = int(item.get("version", {}).get("N", "0"))
    leases = {k: float(v["N"]) for k, v in item.get("leases", {}).get("M", {}).items()}
    return version, leases


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


class LimitGate:
    """The consumer side: take the job's rate token and concurrency lease, or hand the record back."""

    def __init__(self, store: StateStore) -> None:
        self.concurrency = ConcurrencyLimit(store)
        self.rate = RateLimit(store)
        self._held: dict[str, str] = {}
        self._lock = threading.Lock()

    def __call__(
        self,
        env: Envelope,
        job: Job[Any],
        payload: Any,
        attempt: int,
        now: float,
        *,
        rate: RateInputs = NO_RATE_INPUTS,
    ) -> HandBack | None:
        """``rate``: the record's batch demand for its job type's tokens (taken together; a job with a
        ``rate_key`` takes one a record), the turn it carries, and how long it may wait here."""
        options = job.flow
        if options.rate is None and options.concurrency is None:
            return None
        slot = rate.reserved
        try:
            if options.rate is not None:
                turn = self._rate_turn(env, job, payload, now, rate)
                if isinstance(turn, HandBack):
                    return turn
                slot = turn  # kept if the concurrency cap hands it back: no token again
                if turn > now:  # its turn is near: wait here (a hand-back is a whole second at least)
                    time.sleep(turn - now)
                    now = time.time()
            if options.concurrency is not None:
                pk = limit_key(job, payload, "concurrency")
                until = now + job.timeout + LEASE_MARGIN_SECONDS
                if not self.concurrency.acquire(pk, env.id, options.concurrency, until, now):
                    delay = random.randint(*CONCURRENCY_RETRY_SECONDS)
                    log.info("job %s (%s) over its concurrency cap; back in %ds", env.id, env.type, delay)
                    return HandBack(delay, "concurrency limit", rate_slot=slot)  # its token is kept
                with self._lock:
                    self._held[env.id] = pk
        except Exception:
            log.warning("taking a limit for job %s failed; handing it back", env.id, exc_info=True)
            return HandBack(UNAVAILABLE_RETRY_SECONDS, "limits unavailable", rate_slot=slot)
        return None

    def _rate_turn(
        self, env: Envelope, job: Job[Any], payload: Any, now: float, rate: RateInputs
    ) -> float | HandBack:
        """The record's turn (epoch seconds; at most :data:`EARLY_SECONDS` off, within what it may
        wait), or its hand-back. A record reserves a turn once, and only where its hand-back carries
        it; a turn it carries is its token, however late it comes back (a busy lane or a batching
        window delays every return: taking a new token then would waste the reserved one and starve
        the job type)."""
        options = job.flow
        assert options.rate is not None
        limit, per = options.rate.limit, options.rate.per
        turn = rate.reserved
        if turn is not None and turn - now > MAX_TURN_AHEAD_SECONDS:
            turn = None  # not a turn any consumer gave
        reserve = rate.can_carry and turn is None
        if turn is None:
            want = 1 if options.rate_key is not None else rate.demand
            wait = self.rate.acquire(limit_key(job, payload, "rate"), limit, per, now, want, reserve=reserve)
            if wait > 0 and not reserve:
                log.info("job %s (%s) over its rate; back in %.2fs", env.id, env.type, wait)
                return HandBack(max(1, math.ceil(wait)), "rate limit", rate_slot=rate.reserved)
            turn = now + wait
        hold = turn - now
        if hold > 0 and hold > min(EARLY_SECONDS, rate.may_wait):
            delay = max(1, math.ceil(hold - EARLY_SECONDS))  # back at most a second early
            log.info("job %s (%s) over its rate; its turn in %.2fs", env.id, env.type, hold)
            return HandBack(delay, "rate limit", rate_slot=turn)
        return turn

    def release(self, job_id: str) -> None:
        """Free the lease ``job_id`` holds in this process, if any (a failure is logged: it expires)."""
        with self._lock:
            pk = self._held.pop(job_id, None)
        if pk is None:
            return
        try:
            self.concurrency.release(pk, job_id)
        except Exception:
            log.warning("releasing the lease of job %s failed; it expires by itself", job_id, exc_info=True)
