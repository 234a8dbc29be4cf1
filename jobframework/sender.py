"""Sending prepared enqueues: one by one (``SendMessage``, or an EventBridge Scheduler schedule for a
long delay) or ten to a ``SendMessageBatch``, with the dedup key's claim, confirmation and release
around the send, and the tracked job's ``queued`` status after it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from jobframework import envelope as wire
from jobframework.dlq.redrive import batches_by_bytes
from jobframework.errors import EnqueueError
from jobframework.outgoing import EnqueueResult, Prepared
from jobframework.retry import compute_backoff
from jobframework.state import STATUS_TTL_SECONDS, JobState, StateStore

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import SendMessageBatchRequestEntryTypeDef

log = logging.getLogger("jobframework.client")

WRITES_AT_ONCE = 10
"""DynamoDB writes ``send_many`` makes at once (dedup claims before a batch, the markers' confirmations
and the tracked jobs' ``queued`` statuses after it): a backfill of tracked jobs wrote them one after
another, a round trip each (200 tracked, keyed jobs took 3.3 s on the embedded AWS)."""
_T = TypeVar("_T")
_R = TypeVar("_R")
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def reset_pool() -> None:
    """Shut the shared pool down (a bench that changes :data:`WRITES_AT_ONCE` makes it again)."""
    global _pool
    with _pool_lock:
        if _pool is not None:
            _pool.shutdown(wait=True)
        _pool = None


def _each(fn: Callable[[_T], _R], items: Sequence[_T]) -> list[_R]:
    """``fn`` of each item, in order; concurrently on a pool shared by the process's clients when
    there are several (boto3's clients are thread-safe)."""
    global _pool
    if len(items) < 2:
        return [fn(item) for item in items]
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(WRITES_AT_ONCE, thread_name_prefix="jf-enqueue")
    return list(_pool.map(fn, items))


class Sender:
    """Sends what :meth:`jobframework.client.JobClient.prepare` made.

    Args:
        sqs: the SQS client (looked up at each send: the client makes it lazily).
        state: the state table, or ``None`` without one (dedup markers, statuses).
        schedule: sends a prepared enqueue delayed beyond 15 minutes; returns the schedule's id.
        retries: how many times a batch's failed entries are resent.
    """

    def __init__(
        self,
        *,
        sqs: Callable[[], SQSClient],
        state: Callable[[], StateStore | None],
        schedule: Callable[[Prepared], str],
        retries: Callable[[], int],
    ) -> None:
        self._sqs = sqs
        self._state = state
        self._schedule = schedule
        self._retries = retries

    def send(self, prepared: Prepared) -> EnqueueResult:
        """Send one enqueue (a duplicate of a claimed key sends nothing and names the first job).

        Raises:
            EnqueueError: SQS (or Scheduler) refused it; its dedup claim is released.
        """
        env = prepared.envelope
        state = self._state()
        holder = self._claim(prepared)
        if holder is not None:
            return prepared.result(duplicate_of=holder)
        try:
            message_id = self._schedule(prepared) if prepared.scheduled else self._send_message(prepared)
        except BaseException:
            self._unclaim(prepared)
            raise
        self._confirm(prepared)
        if env.debounce is not None and state is not None:
            from jobframework.flow.debounce import confirm

            confirm(state, env.debounce.key, env.debounce.window, env.id, time.time())
        self._record_status(prepared)
        log.debug("enqueued %s job %s", env.type, env.id)
        return prepared.result(message_id)

    def _claim(self, prepared: Prepared) -> str | None:
        """Claim the enqueue's dedup key: ``None`` when it is ours to send (or not deduplicated), else
        the id of the job already enqueued with it."""
        env, state = prepared.envelope, self._state()
        if not prepared.deduplicated or state is None:
            return None
        holder = state.dedup.claim(env.key, env.id, prepared.dedup_window or 0.0, tracked=bool(env.track))
        if holder is not None:
            log.info("%s job with key %s already enqueued as %s; not sent again", env.type, env.key, holder)
        return holder

    def _claim_or_error(self, prepared: Prepared) -> tuple[str | None, str | None]:
        """:meth:`_claim`'s holder, or the error that stopped the claim (the entry is then not sent)."""
        try:
            return self._claim(prepared), None
        except Exception as exc:
            return None, str(exc)

    def _after_send(self, prepared: Prepared) -> None:
        """Sent: the dedup marker confirmed and the tracked job's status written (each logs its own
        failure: the job is sent, so nothing here raises)."""
        self._confirm(prepared)
        self._record_status(prepared)

    def _unclaim(self, prepared: Prepared) -> None:
        """The send failed: drop the claim so that a retry of this enqueue is not blocked."""
        state = self._state()
        if prepared.deduplicated and state is not None:
            state.dedup.release(prepared.envelope.key, prepared.envelope.id)

    def _confirm(self, prepared: Prepared) -> None:
        """Sent: mark the claim as sent. A tracked job's status record (written next) is the
        confirmation itself, so its marker costs no second write."""
        env, state = prepared.envelope, self._state()
        if not prepared.deduplicated or state is None or env.track:
            return
        try:
            state.dedup.confirm(env.key, env.id)
        except Exception:
            # Sent: raising now would make the caller enqueue it again. The pending marker still
            # dedups until its lease ends.
            log.warning("confirming the dedup marker of job %s failed", env.id, exc_info=True)

    def _record_status(self, prepared: Prepared) -> None:
        state = self._state()
        if state is None or not prepared.envelope.track:
            return
        env = prepared.envelope
        try:
            state.jobs.set_status(
                env.id,
                JobState.SCHEDULED if prepared.scheduled else JobState.QUEUED,
                job_type=env.type,
                key=env.key,
                attempts=0,
                enqueued_at=env.enqueued_at.isoformat(),
                trace_id=prepared.trace_id,
                run_at=(env.enqueued_at + timedelta(seconds=prepared.delay)).isoformat()
                if prepared.delay
                else None,
                ttl=STATUS_TTL_SECONDS + prepared.delay,  # kept 7 days after its run time
            )
        except Exception:
            log.warning("recording the queued status of job %s failed", env.id, exc_info=True)

    def _send_message(self, prepared: Prepared) -> str:
        kwargs: dict[str, Any] = {
            "QueueUrl": prepared.queue_url,
            "MessageBody": prepared.body,
            "MessageAttributes": prepared.attributes,
        }
        if prepared.delay:
            kwargs["DelaySeconds"] = prepared.delay
        if prepared.xray:
            kwargs["MessageSystemAttributes"] = {"AWSTraceHeader": wire.string_attribute(prepared.xray)}
        if prepared.group:
            kwargs["MessageGroupId"] = prepared.group
        if prepared.dedup_id:
            kwargs["MessageDeduplicationId"] = prepared.dedup_id
        try:
            response = self._sqs().send_message(**kwargs)
        except Exception as exc:
            raise EnqueueError(
                f"sending {prepared.envelope.type} job {prepared.envelope.id} failed: {exc}"
            ) from exc
        return str(response.get("MessageId", ""))

    def send_many(self, prepared: list[Prepared]) -> list[EnqueueResult]:
        """Send many, ten per ``SendMessageBatch``, in the order given (see ``JobClient.enqueue_many``)."""
        results: list[EnqueueResult | None] = [None] * len(prepared)
        pending: list[int] = []
        first: dict[str, int] = {}  # key -> the entry of this call that claims it
        repeats: dict[int, int] = {}  # an entry repeating a key of this call -> the first entry
        batched: list[int] = []
        for i, p in enumerate(prepared):
            key = p.envelope.key
            if p.batchable and p.deduplicated and key in first:
                repeats[i] = first[key]
            elif not p.batchable:  # long delays and debounce take the one-by-one path
                try:
                    results[i] = self.send(p)
                except Exception as exc:
                    results[i] = p.result(error=str(exc))
            else:
                batched.append(i)
                if p.deduplicated:
                    first[key] = i
        # Each dedup key is claimed before its batch is sent (the keys of the call are distinct now).
        claims = _each(self._claim_or_error, [prepared[i] for i in batched])
        for i, (holder, error) in zip(batched, claims, strict=True):
            if error is not None:
                results[i] = prepared[i].result(error=error)
            elif holder is not None:
                results[i] = prepared[i].result(duplicate_of=holder)
            else:
                pending.append(i)
        for round_ in range(self._retries() + 1):
            if not pending:
                break
            if round_:
                time.sleep(compute_backoff(round_, base_delay=0.05, max_delay=1.0))
            failed: list[int] = []
            for batch in self._batches(prepared, pending):
                failed.extend(self._send_batch(prepared, batch, results, final=round_ == self._retries()))
            pending = failed
        for i, original in repeats.items():
            sent = results[original]
            results[i] = (
                prepared[i].result(duplicate_of=sent.id)
                if sent is not None and sent.ok
                else prepared[i].result(error="not sent: the entry with the same key was not sent")
            )
        return [r if r is not None else prepared[i].result(error="not sent") for i, r in enumerate(results)]

    def _batches(self, prepared: Sequence[Prepared], indexes: list[int]) -> Iterable[list[int]]:
        """Groups of at most ten entries of one queue and at most 1 MiB together."""
        by_queue: dict[str, list[int]] = {}
        for i in indexes:
            by_queue.setdefault(prepared[i].queue_url, []).append(i)
        for group in by_queue.values():
            yield from batches_by_bytes(
                group, lambda i: wire.message_size(prepared[i].body, prepared[i].attributes)
            )

    def _send_batch(
        self,
        prepared: Sequence[Prepared],
        batch: list[int],
        results: list[EnqueueResult | None],
        *,
        final: bool,
    ) -> list[int]:
        entries: list[SendMessageBatchRequestEntryTypeDef] = []
        for n, i in enumerate(batch):
            p = prepared[i]
            entry: SendMessageBatchRequestEntryTypeDef = {
                "Id": str(n),
                "MessageBody": p.body,
                "MessageAttributes": p.attributes,
            }
            if p.delay:
                entry["DelaySeconds"] = p.delay
            if p.group:
                entry["MessageGroupId"] = p.group
            if p.dedup_id:
                entry["MessageDeduplicationId"] = p.dedup_id
            if p.xray:
                entry["MessageSystemAttributes"] = {
                    "AWSTraceHeader": {"DataType": "String", "StringValue": p.xray}
                }
            entries.append(entry)
        try:
            response = self._sqs().send_message_batch(QueueUrl=prepared[batch[0]].queue_url, Entries=entries)
        except Exception as exc:
            if final:
                for i in batch:
                    results[i] = prepared[i].result(error=f"SendMessageBatch failed: {exc}")
                    self._unclaim(prepared[i])
                return []
            log.warning("SendMessageBatch of %d entries failed, retrying: %s", len(batch), exc)
            return batch
        sent: list[Prepared] = []
        for ok in response.get("Successful", []):
            i = batch[int(ok["Id"])]
            results[i] = prepared[i].result(ok["MessageId"])
            sent.append(prepared[i])
        _each(self._after_send, sent)
        retry: list[int] = []
        for bad in response.get("Failed", []):
            i = batch[int(bad["Id"])]
            error = f"{bad.get('Code')}: {bad.get('Message', '')}"
            if bad.get("SenderFault") or final:
                results[i] = prepared[i].result(error=error)
                self._unclaim(prepared[i])
            else:
                log.info("batch entry for job %s failed (%s), retrying", prepared[i].envelope.id, error)
                retry.append(i)
        return retry
