"""The settler: applies a batch's verdicts together, in the fewest SQS requests.

In this order (each step sees what the ones before changed):

1. **sagas**: a saga step's verdict tells its saga first (``completed`` or ``failed``); when the saga
   cannot be told now, the record is retried in a second instead (never dead-lettered unannounced);
   when this consumer does not define the saga, or the saga's record is gone, the record is
   dead-lettered ``unknown-saga`` (no retry can help; redriven after a deploy that defines it, the
   job, idempotent, is not run twice);
2. **dead letters**: ``SendMessageBatch`` to each DLQ, entries grouped by at most ten and 1 MiB
   (:func:`jobframework.dlq.redrive.batches_by_bytes`); an entry that fails to send is not settled:
   the record is reported failed and comes back (nothing is lost);
3. **copies**: hand-backs and copy retries, ``SendMessageBatch`` to the source queue the same way; a
   copy that fails to send is handed back in place instead;
4. **visibility**: ``ChangeMessageVisibilityBatch`` per source queue, ten a request, for what is
   retried or released in place; a failure is logged (the record still comes back, when its current
   visibility runs out);
5. **statuses, metrics, listeners**: the job statuses noted for the batch's one write, the batch's
   metrics, and each listener told each settled record's :class:`~jobframework.delivery.RecordOutcome`
   (a listener's failure is logged, never fatal).

The partial batch response then names only what did not settle (:attr:`Verdict.acknowledged`).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from jobframework import envelope as wire
from jobframework.attempts import redrives
from jobframework.classification import Reason
from jobframework.dead_letter import dead_letter_message
from jobframework.delivery import Batch, Outcome, RecordOutcome, describe, refusal_logged
from jobframework.gates import dead_letter
from jobframework.handback import copy_message
from jobframework.outcome_listeners import registered
from jobframework.retry import visibility_delay
from jobframework.state import JobState
from jobframework.status import TAKEN_BY_SAGA
from jobframework.tracing import record_trace_id
from jobframework.verdict import Kind, Verdict

if TYPE_CHECKING:
    from jobframework.consumer import Consumer

log = logging.getLogger("jobframework.consumer")

VISIBILITY_BATCH = 10
"""Entries per ``ChangeMessageVisibilityBatch`` (SQS's limit)."""
SAGA_RETRY_SECONDS = 1


def _ran(v: Verdict) -> dict[str, Any]:
    """The attempt and start (ISO 8601) of a job that ran, for its saga (nothing for one that did not:
    a duplicate delivery, a record refused before running)."""
    outcome = v.outcome
    if outcome is None or outcome.started_at is None or outcome.duplicate:
        return {}
    started = datetime.fromtimestamp(outcome.started_at, UTC).isoformat(timespec="milliseconds")
    return {"attempt": v.delivery.attempt, "started_at": started}


def _undefined_saga(v: Verdict, exc: Exception, details: dict[str, Any]) -> None:
    """Make ``v`` the dead letter of a saga job whose saga this consumer does not define, or whose
    record is gone (as every dead letter is: logged with the job's keys, its status, outcome and
    metrics); a step that had failed keeps why in the error."""
    d = v.delivery
    error = describe(exc)
    if details.get("reason"):
        error = f"{error} (the job had failed: {details['reason']}: {details.get('error') or '-'})"
    with refusal_logged(d, Reason.UNKNOWN_SAGA, error, log):
        ms = v.outcome.processing_ms if v.outcome is not None else None
        letter = dead_letter(d, Reason.UNKNOWN_SAGA, error, processing_ms=ms)
    v.kind, v.reason, v.error, v.status = letter.kind, letter.reason, letter.error, letter.status
    v.outcome, v.copy = letter.outcome, False


def _taken_by_saga(v: Verdict) -> None:
    """A saga step's failure that its saga took (it compensates): acknowledged, with no dead letter. The
    saga's record has the failure; a letter would page (and roll a canary back) for an expected outcome,
    such as an order out of stock, and a redrive of it could only be skipped ("saga moved on"). A
    compensation's failure is still dead-lettered: redriven once fixed, the rollback goes on."""
    v.kind = Kind.SKIPPED
    if v.outcome is not None:
        v.outcome.outcome = Outcome.FAILED
    env = v.delivery.require_envelope()
    saga = env.saga.id if env.saga is not None else "-"
    if v.status is not None:  # (its status says where the failure went: `dead` alone sent readers to the DLQ)
        state, fields = v.status
        why = v.reason.value if v.reason is not None else "failed"
        v.status = (
            state,
            {**fields, "reason": f"{why}: {TAKEN_BY_SAGA} {saga}, which compensates (no dead letter)"},
        )
    log.info("job %s (%s) failed for good; its saga %s compensates (no dead letter)", env.id, env.type, saga)


def _ended(v: Verdict) -> float:
    """When the verdict's job ended (epoch seconds); one that did not run, after those that did."""
    ended = v.outcome.ended_at if v.outcome is not None else None
    return math.inf if ended is None else ended


class Settler:
    """Applies verdicts for one consumer (its SQS client, queue directory, listeners)."""

    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer

    def settle(self, verdicts: list[Verdict], batch: Batch) -> list[str]:
        """Apply the verdicts; the message ids to report in ``batchItemFailures``."""
        told = [v for v in verdicts if v.saga is not None]
        if told:  # (the saga package is loaded only by a batch that has a saga's step)
            self._tell_sagas(told)
        self._dead_letter([v for v in verdicts if v.kind is Kind.DEAD_LETTER])
        self._copy([v for v in verdicts if v.copy and v.kind in (Kind.RETRY, Kind.RELEASE)])
        self._change_visibility([v for v in verdicts if not v.copy and v.kind in (Kind.RETRY, Kind.RELEASE)])
        for v in verdicts:
            if v.kind is Kind.RETURN:
                log.warning("record %s comes back unsettled: %s", v.delivery.message_id, v.why)
        listening = bool(self.consumer.listeners or registered())
        # (listeners are told in the order the jobs ended, not the records': jf dev's lines read in time)
        for v in sorted(verdicts, key=_ended) if listening and len(verdicts) > 1 else verdicts:
            self._note(v, batch)
        return [v.delivery.message_id for v in verdicts if not v.acknowledged]

    # -- 1. sagas -----------------------------------------------------------------------------------

    def _tell_sagas(self, verdicts: Iterable[Verdict]) -> None:
        from jobframework import saga

        for v in verdicts:
            assert v.saga is not None
            event, details = v.saga
            env = v.delivery.require_envelope()
            try:
                saga.on_step_event(self.consumer, env, event, **details, **_ran(v))
            except (saga.UnknownSagaError, saga.SagaNotFoundError) as exc:
                # Retried, it would fail the same way until SQS's own redrive moved it, reasonless.
                _undefined_saga(v, exc, details)
            except saga.SagaNotDue as exc:  # (back at the deadline: an ERROR and a retry each second)
                delay = visibility_delay(exc.seconds)
                log.info("%s; back in %ds, at its deadline (saga %s)", exc, delay, env.saga)
                v.kind, v.delay, v.copy, v.outcome = Kind.RETRY, delay, False, None
            except Exception:
                # The job's effect is done (and recorded by idempotency): retried, it is skipped as a
                # duplicate and the saga told again, which its conditional writes make happen once.
                log.error("advancing saga %s after step %s failed; retrying", env.saga, env.id, exc_info=True)
                v.kind, v.delay, v.copy, v.outcome = Kind.RETRY, SAGA_RETRY_SECONDS, False, None
                if event != "completed":
                    v.status = None
            else:
                if event == "failed" and v.kind is Kind.DEAD_LETTER and saga.is_forward_step(env):
                    _taken_by_saga(v)

    # -- 2. dead letters ----------------------------------------------------------------------------

    def _dead_letter(self, verdicts: list[Verdict]) -> None:
        def message(v: Verdict) -> dict[str, Any]:
            d = v.delivery
            assert v.reason is not None
            return dead_letter_message(d.record, v.reason, v.error or "-", attempt=d.attempt, source=d.source)

        def unsent(v: Verdict, error: str) -> None:
            log.error(
                "dead-lettering %s (%s) failed; it will be retried: %s",
                v.delivery.message_id,
                v.reason.value if v.reason else "-",
                error,
            )
            v.kind, v.why, v.status, v.outcome = Kind.RETURN, f"dead-lettering failed: {error}", None, None

        self._send_batches(verdicts, self.consumer.dlq_url, message, unsent)

    # -- 3. copies --------------------------------------------------------------------------------------

    def _copy(self, verdicts: list[Verdict]) -> None:
        def message(v: Verdict) -> dict[str, Any]:
            body = v.delivery.record.get("body")
            if not isinstance(body, str) or not body:
                raise ValueError("a record without a text body cannot be copied")
            return copy_message(
                v.delivery.record,
                delay=delay_now(v),
                executions=v.executions,
                deferred=v.deferred,
                attributes=v.attributes,
            )

        def unsent(v: Verdict, error: str) -> None:
            log.warning(
                "handing %s back as a copy failed; handed back in place: %s", v.delivery.message_id, error
            )
            v.copy = False

        self._send_batches(verdicts, self.consumer.queue_url, message, unsent)

    def _send_batches(
        self,
        verdicts: list[Verdict],
        url_of: Callable[[str], str],
        message: Callable[[Verdict], dict[str, Any]],
        unsent: Callable[[Verdict, str], None],
    ) -> None:
        """``SendMessageBatch`` each verdict's message to ``url_of(source)``; ``unsent`` for each failure."""
        if not verdicts:
            return
        from jobframework.dlq.redrive import batches_by_bytes

        by_url: dict[str, list[tuple[Verdict, dict[str, Any]]]] = {}
        for v in verdicts:
            try:
                url = url_of(v.delivery.source)
                by_url.setdefault(url, []).append((v, message(v)))
            except Exception as exc:
                unsent(v, describe(exc))
        if not by_url:  # (no client made when nothing is to be sent: boto3 loads in ~0.1 s)
            return
        sqs = self.consumer.sqs
        for url, items in by_url.items():
            for group in batches_by_bytes(items, _message_bytes):
                entries = [{"Id": str(n), **m} for n, (_, m) in enumerate(group)]
                try:
                    response = sqs.send_message_batch(QueueUrl=url, Entries=entries)  # type: ignore[arg-type]
                except Exception as exc:
                    log.debug("SendMessageBatch to %s failed", url, exc_info=True)
                    for v, _ in group:
                        unsent(v, describe(exc))
                    continue
                sent = {str(e.get("Id")) for e in response.get("Successful", [])}
                failed = {str(e.get("Id")): e for e in response.get("Failed", [])}
                for n, (v, _) in enumerate(group):
                    if str(n) not in sent:
                        entry: Any = failed.get(str(n), {})
                        unsent(v, f"{entry.get('Code', 'not sent')}: {entry.get('Message', '')}")

    # -- 4. visibility ------------------------------------------------------------------------------------

    def _change_visibility(self, verdicts: list[Verdict]) -> None:
        by_url: dict[str, list[Verdict]] = {}
        for v in verdicts:
            try:
                by_url.setdefault(self.consumer.queue_url(v.delivery.source), []).append(v)
            except Exception:
                log.warning("ChangeMessageVisibility of %s failed", v.delivery.message_id, exc_info=True)
        if not by_url:  # (no client made for a batch with nothing to hand back: boto3 loads in ~0.1 s)
            return
        sqs = self.consumer.sqs
        for url, items in by_url.items():
            for start in range(0, len(items), VISIBILITY_BATCH):
                group = items[start : start + VISIBILITY_BATCH]
                entries = [
                    {
                        "Id": str(n),
                        "ReceiptHandle": str(v.delivery.record.get("receiptHandle", "")),
                        "VisibilityTimeout": delay_now(v),
                    }
                    for n, v in enumerate(group)
                ]
                try:
                    response = sqs.change_message_visibility_batch(QueueUrl=url, Entries=entries)  # type: ignore[arg-type]
                except Exception:
                    # The records are still reported failed: they return when their visibility runs out.
                    log.warning(
                        "ChangeMessageVisibilityBatch of %d records failed", len(group), exc_info=True
                    )
                    continue
                for entry in response.get("Failed", []):
                    log.warning(
                        "ChangeMessageVisibility of %s failed: %s %s",
                        group[int(entry.get("Id", 0))].delivery.message_id,
                        entry.get("Code"),
                        entry.get("Message"),
                    )

    # -- 5. statuses, metrics, listeners ------------------------------------------------------------------

    def _note(self, v: Verdict, batch: Batch) -> None:
        d = v.delivery
        env = d.envelope
        if env is not None:
            # (the stages' events, a scheduled run's Heartbeat or an Overrun, and the verdict's)
            for event in (*d.events, *v.events):
                batch.metrics.schedule_event(env.type, event)
        if self.consumer.state is not None:
            status_of(v, batch.statuses)
        if v.outcome is not None:
            self.emit(batch, v.outcome)

    def emit(self, batch: Batch, outcome: RecordOutcome) -> None:
        batch.metrics.add(outcome)
        for listeners in (self.consumer.listeners, registered()):  # (the handler's, the modules')
            for listener in listeners:
                try:
                    listener(outcome)
                except Exception:
                    log.warning("consumer listener failed", exc_info=True)


def delay_now(v: Verdict) -> int:
    """The verdict's delay as its request goes out: counted from now to ``back_at`` when it has one (a
    rate turn: the batch's other records ran since its gate), never more than ``delay``.

    Example:
        >>> from jobframework.verdict import Kind
        >>> turn = Verdict(None, Kind.RELEASE, delay=3, back_at=time.time() + 1.5)  # type: ignore[arg-type]
        >>> delay_now(turn), delay_now(Verdict(None, Kind.RELEASE, delay=3))  # type: ignore[arg-type]
        (2, 3)
    """
    if v.back_at is None:
        return int(v.delay)
    return max(0, min(int(v.delay), math.ceil(v.back_at - time.time())))


def status_of(
    v: Verdict,
    statuses: dict[str, dict[str, Any]],
    status: tuple[JobState, dict[str, Any]] | None = None,
) -> bool:
    """Note the status of a tracked job's verdict (``v.status``, or ``status``) in ``statuses`` (the
    batch's pending records, written when it ends, or :mod:`jobframework.early_status`'s); ``False``
    when it has none to note."""
    d = v.delivery
    env = d.envelope
    status = status or v.status
    if status is None or env is None or not env.track:
        return False
    state, fields = status
    started = _ran(v).get("started_at")  # a run's start (a job keyed by its id has no start claim)
    fields = {
        **fields,
        "trace_id": record_trace_id(d.record, env.traceparent),
        "started_at": started,
        "redrives": redrives(d.record) or None,
        "lane": d.lane,  # (a dead job's letter is in this lane's DLQ: jf status points there)
    }
    note_status(statuses, env, state, fields)
    return True


def note_status(
    statuses: dict[str, dict[str, Any]], env: Any, state: JobState, fields: dict[str, Any]
) -> None:
    """Note the job's status in ``statuses``, the pending records of a batch."""
    status = statuses.setdefault(
        env.id, {"id": env.id, "type": env.type, "key": env.key, "enqueued_at": env.enqueued_at.isoformat()}
    )
    status.update({k: v for k, v in fields.items() if v is not None}, status=state)
    if state in (JobState.SUCCEEDED, JobState.DEAD):
        status["finished_at"] = datetime.now(UTC).isoformat(timespec="milliseconds")
    if state is JobState.SUCCEEDED:
        status.pop("error", None)
        if fields.get("reason") is None:  # (a duplicate's says it did not run)
            status.pop("reason", None)


def _message_bytes(item: tuple[Verdict, dict[str, Any]]) -> int:
    m = item[1]
    return wire.message_size(m["MessageBody"], m.get("MessageAttributes", {}))
