"""Concurrency and rate limits of a job type, shared by every consumer (Lambda and ``jf worker``).

**Concurrency** (``@job(concurrency=N, concurrency_key=fn)``): one item per job type (and key),
``pk = limit#<job>[#<key>]``, ``sk = concurrency``, holds the leases of the runs in progress, each
expiring at its run's hard deadline (now plus the job's timeout), so a crashed consumer's slot frees
itself. Acquiring is a write conditional on the item's ``version``; the write carries the leases
still alive plus the new one, and succeeds only while fewer than N are alive. A conflicting write
returns the item as it is now (``ReturnValuesOnConditionCheckFailure``), so a contended acquisition
needs no separate read. The lease is released as soon as its run ends (one write), not when its
batch settles.

**Shared** (``@job(..., limit_group="crm")``): the job types of one group (the jobs that call one
downstream) count in one item and one bucket, ``limit#group:<name>[#<key>]``; the registry refuses a
group whose jobs declare different limits.

**Rate** (``@job(rate="100/minute", rate_key=fn)``): a token bucket per job type (and key) kept
as GCRA, in :mod:`jobframework.flow.rate_bucket` (a record over the rate reserves its turn, which
its hand-back carries).

**Waiting**: a record over its concurrency cap while a run of this process holds one of the cap's
leases waits for it, in line, up to ``JF_LIMIT_WAIT`` seconds (unset: its job's timeout,
:func:`~jobframework.concurrency.limit_wait`) and never past the invocation's time to spare;
the run that ends hands its lease over in one write (:mod:`jobframework.flow.local_leases`). So a
batch of ten on ``concurrency=3`` runs three at a time; it had run three and handed seven back, which
made 3.3 jobs/s of 0.1 s where 30 were possible (``bench/concurrency_cap.py``). While other
processes hold every lease, one record a process looks again (a read, every 0.05 to 0.5 s) for
:data:`ELSEWHERE_WAIT_SECONDS` (or ``JF_LIMIT_WAIT``), the others in line behind it.

Otherwise a record over a limit is handed back unrun (with a back-off, for a concurrency cap); the
hand-back does not use an attempt. A state table that cannot be reached hands the record back too (a
limit is never silently lifted).
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from typing import TYPE_CHECKING, Any

from jobframework.concurrency import limit_wait
from jobframework.flow.local_leases import LocalLeases
from jobframework.flow.options import limit_key_of
from jobframework.flow.outcome import NO_RATE_INPUTS, Drop, HandBack, RateInputs
from jobframework.flow.rate_bucket import WRITE_ATTEMPTS, RateLimit

if TYPE_CHECKING:
    from jobframework.envelope import Envelope
    from jobframework.jobs import Job
    from jobframework.state import StateStore

log = logging.getLogger(__name__)

CONCURRENCY_RETRY_SECONDS = (1, 3)
"""A record over its concurrency cap comes back after a random delay in this range (seconds) the first
time; the range's top doubles at each hand-back of the record, up to :data:`CONCURRENCY_BACKOFF_CAP`
(full jitter: 300 records waiting on ``concurrency=3`` had made 794 hand-backs in 30 s)."""
CONCURRENCY_BACKOFF_CAP = 30
ELSEWHERE_WAIT_SECONDS = 5.0
"""How long a record over its cap looks again for a lease while other processes hold them all, when
``JF_LIMIT_WAIT`` is unset (Sidekiq's limiter's ``wait_timeout``): shorter than the wait in line behind
a run of its own process, since every invocation on a capped backlog would wait, billed."""
UNAVAILABLE_RETRY_SECONDS = 5
LEASE_MARGIN_SECONDS = 5.0
MAX_TURN_AHEAD_SECONDS = 14 * 24 * 3600.0
"""A carried turn further off than SQS keeps a message (14 days) is none this consumer gave."""
EARLY_SECONDS = 1.0
"""A record whose reserved slot is at most this far off waits for it in the consumer; a later slot is
handed back to come back at most this long before it (SQS delays are whole seconds)."""


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
    """``limit#<job>`` or ``limit#<job>#<key>`` for the per-key limits; a job of a ``limit_group``
    counts in its group's, ``limit#group:<name>[#<key>]`` (no job name has a colon)."""
    key = limit_key_of(job, payload, kind)
    group = job.flow.limit_group
    owner = job.name if group is None else f"group:{group}"
    return f"limit#{owner}" if key is None else f"limit#{owner}#{key}"


class ConcurrencyLimit:
    """Leases of one job type's runs (see the module's docstring)."""

    def __init__(self, store: StateStore) -> None:
        self.store = store
        self._seen: dict[str, tuple[int, dict[str, float]]] = {}
        self._lock = threading.Lock()

    def acquire(self, pk: str, lease: str, cap: int, until: float, now: float) -> bool:
        """Take a lease for ``lease`` (the job id) until ``until``; ``False`` when ``cap`` are taken
        (as the item is now), or when every write lost a race (the caller waits or hands back, as
        for a full cap: a trial's two processes on one cap had lost eight in a row)."""
        with self._lock:
            version, leases = self._seen.get(pk, (0, {}))
        fresh = False  # (what a read or a refused write gave: the item as it is now)
        for _ in range(WRITE_ATTEMPTS):
            alive = {k: v for k, v in leases.items() if v > now and k != lease}
            if len(alive) >= cap:
                if fresh:  # (kept: the next look is a read, not a write refused with the item)
                    with self._lock:
                        self._seen[pk] = (version, leases)
                    return False
                # What we saw may be old: look again before refusing (a refusal then costs a read).
                version, leases = self._read(pk)
                fresh = True
                continue
            alive[lease] = until
            ok, current = self._write(pk, version, alive)
            if ok:
                with self._lock:
                    self._seen[pk] = (version + 1, alive)
                return True
            (version, leases), fresh = current, True
        log.info("the concurrency leases of %s kept changing under %d writes", pk, WRITE_ATTEMPTS)
        return False

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

    def transfer(self, pk: str, lease: str, to: str, until: float) -> bool:
        """Hand ``lease`` over to ``to`` until ``until`` in one write (the count of leases unchanged);
        ``False`` when ``lease`` is no longer in the item (pruned as expired: ``to`` must acquire), or
        ``to`` has a lease already (another delivery of it runs elsewhere: ``lease`` stays taken)."""
        if lease == to:
            return False
        try:
            item = self.store.client.update_item(
                TableName=self.store.table,
                Key={"pk": {"S": pk}, "sk": {"S": "concurrency"}},
                UpdateExpression=(
                    "REMOVE leases.#lease SET leases.#to = :until, expires_at = :exp ADD version :one"
                ),
                ConditionExpression="attribute_exists(leases.#lease) AND attribute_not_exists(leases.#to)",
                ExpressionAttributeNames={"#lease": lease, "#to": to},
                ExpressionAttributeValues={
                    ":until": {"N": f"{until:.3f}"},
                    ":exp": {"N": str(int(until) + 24 * 3600)},
                    ":one": {"N": "1"},
                },
                ReturnValues="ALL_NEW",
            ).get("Attributes", {})
        except self.store.client.exceptions.ConditionalCheckFailedException:
            return False
        with self._lock:
            self._seen[pk] = _leases_of(item)
        return True

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


def concurrency_delay(waits: int, rand: Any = random) -> int:
    """Seconds until a record over its concurrency cap comes back, after ``waits`` such hand-backs.

    Example:
        >>> import random
        >>> r = random.Random(7)
        >>> [max(concurrency_delay(n, r) for _ in range(200)) for n in (0, 1, 2, 3, 9)]
        [3, 6, 12, 24, 30]
    """
    low, high = CONCURRENCY_RETRY_SECONDS
    return int(rand.randint(low, min(CONCURRENCY_BACKOFF_CAP, high * 2 ** min(waits, 10))))


class LimitGate:
    """The consumer side: take the job's rate token and concurrency lease, or hand the record back."""

    def __init__(self, store: StateStore) -> None:
        self.concurrency = ConcurrencyLimit(store)
        self.leases = LocalLeases(self.concurrency)
        self.rate = RateLimit(store)

    def __call__(
        self,
        env: Envelope,
        job: Job[Any],
        payload: Any,
        attempt: int,
        now: float,
        *,
        rate: RateInputs = NO_RATE_INPUTS,
    ) -> HandBack | Drop | None:
        """``rate``: the record's batch demand for its job type's tokens (taken together; a job with a
        ``rate_key`` takes one a record), the turn it carries, and how long it may wait here."""
        options = job.flow
        if options.rate is None and options.concurrency is None:
            return None
        spare_until = time.monotonic() + rate.may_wait  # (a rate turn waited for spends it too)
        slot = rate.reserved
        try:
            if options.rate is not None:
                turn = self._rate_turn(env, job, payload, now, rate=rate, attempt=attempt)
                if isinstance(turn, HandBack | Drop):
                    return turn
                slot = turn  # kept if the concurrency cap hands it back: no token again
                now = max(now, time.time())  # (the turn may have waited for a token)
                if turn > now:  # its turn is near: wait here (a hand-back is a whole second at least)
                    time.sleep(turn - now)
                    now = time.time()
            if options.concurrency is not None:
                pk = limit_key(job, payload, "concurrency")
                # (a batched job's items wait for none: the leases they would wait for are its call's)
                wait = 0.0 if job.batch is not None else limit_wait()
                waiting_from = time.monotonic()
                deadline = min(waiting_from + (job.timeout if wait is None else wait), spare_until)
                taken = self.leases.take(
                    pk,
                    env.id,
                    holder=rate.holder or env.id,
                    cap=options.concurrency,
                    lease_seconds=job.timeout + LEASE_MARGIN_SECONDS,
                    deadline=deadline,
                    poll_until=waiting_from + ELSEWHERE_WAIT_SECONDS if wait is None else None,
                )
                if not taken:
                    delay = concurrency_delay(rate.waits)
                    waited = time.monotonic() - waiting_from
                    log.info(
                        "job %s (%s) over its concurrency cap; back in %ds%s",
                        env.id,
                        env.type,
                        delay,
                        f" (waited {waited:.1f}s for a lease: JF_LIMIT_WAIT)"
                        if waited >= 0.1 and wait != 0
                        else "",
                    )
                    # (its rate token is kept)
                    return HandBack(delay, "concurrency limit", rate_slot=slot, waits=rate.waits + 1)
        except Exception:
            log.warning("taking a limit for job %s failed; handing it back", env.id, exc_info=True)
            return HandBack(UNAVAILABLE_RETRY_SECONDS, "limits unavailable", rate_slot=slot)
        return None

    def _rate_turn(
        self, env: Envelope, job: Job[Any], payload: Any, now: float, *, rate: RateInputs, attempt: int
    ) -> float | HandBack | Drop:
        """The record's turn (epoch seconds; at most :data:`EARLY_SECONDS` off, within what it may
        wait), or its hand-back. A record reserves a turn once, and only where its hand-back carries
        it; a turn it carries is its token, however late it comes back (a busy lane or a batching
        window delays every return: taking a new token then would waste the reserved one and starve
        the job type). A job with a deadline (``expires_in=``) whose next turn falls after it is
        dropped ``expired`` now, its turn not reserved: it had come back at its turn to be dropped then,
        its token spent."""
        options = job.flow
        assert options.rate is not None
        limit, per = options.rate.limit, options.rate.per
        turn = rate.reserved
        key = limit_key(job, payload, "rate")
        if turn is not None and turn - now > MAX_TURN_AHEAD_SECONDS:
            turn = None  # not a turn any consumer gave
        if turn is not None and turn < (self.rate.held_until(key, now) or 0):
            turn = None  # reserved before a throttle's hold, which it falls in: a turn anew, after it
        reserve = rate.can_carry and turn is None
        if turn is None:
            want = 1 if options.rate_key is not None else rate.demand
            deadline = env.deadline.timestamp() if env.deadline is not None and attempt == 1 else None
            if reserve and deadline is not None:  # (a look first, which takes a token if one is due)
                wait = self.rate.acquire(key, limit, per, now, want, reserve=False)
                if wait > 0 and now + wait <= deadline:  # (in time as this process sees the bucket)
                    wait = self.rate.acquire(key, limit, per, now, want, reserve=True)
                if wait > 0 and now + wait > deadline:  # (the look's, or the turn booked after it: others'
                    return _expires_before(env, now + wait)  # turns made it later, its token spent)
            else:
                wait = self.rate.acquire(key, limit, per, now, want, reserve=reserve)
            waited = 0.0
            while wait > 0 and not reserve and waited + wait <= min(EARLY_SECONDS, rate.may_wait):
                # It cannot carry a turn (a FIFO lane hands back in place, its group behind it): a token
                # due within a second is waited for here, as a hand-back would be a second at least (a
                # group of an ordered job at 5/second ran at 1/second).
                time.sleep(wait)
                waited += wait
                now = time.time()
                wait = self.rate.acquire(key, limit, per, now, want, reserve=False)
            if wait > 0 and not reserve:
                log.info("job %s (%s) over its rate; back in %.2fs", env.id, env.type, wait)
                return HandBack(
                    max(1, math.ceil(wait)), "rate limit", rate_slot=rate.reserved, back_at=now + wait
                )
            turn = now + wait
        hold = turn - now
        if hold > 0 and hold > min(EARLY_SECONDS, rate.may_wait):
            delay = max(1, math.ceil(hold - EARLY_SECONDS))  # back at most a second early
            log.info("job %s (%s) over its rate; its turn in %.2fs", env.id, env.type, hold)
            return HandBack(delay, "rate limit", rate_slot=turn, back_at=turn - EARLY_SECONDS)
        return turn

    def release(self, holder: str) -> None:
        """Free the lease ``holder`` (a delivery's :func:`~jobframework.gates.lease_holder`) holds in
        this process, if any, or hand it to a record waiting here (:mod:`.local_leases`)."""
        self.leases.release(holder)


def _expires_before(env: Envelope, turn: float) -> Drop:
    """The drop of a job whose rate turn falls after its deadline: it could not start in time."""
    from jobframework.state import JobState

    assert env.deadline is not None
    log.warning(
        "job %s (%s) cannot start by its deadline: its rate turn is %.1fs after it; dropped",
        env.id,
        env.type,
        turn - env.deadline.timestamp(),
    )
    return Drop(
        JobState.EXPIRED,
        f"its rate turn falls after its deadline {env.deadline.isoformat()}: it could not start by then",
        "Expired",
    )
