"""One record's stages: parse, verify, load, the gates, execute, classify; each may end it with a verdict.

:meth:`Pipeline.process` takes one SQS record to a :class:`~jobframework.verdict.Verdict`, on its own
(one bad record never touches its neighbours): it never sends anything to SQS about the record; the
settler (:mod:`jobframework.settler`) applies the batch's verdicts together.

* **parse**: the body as an envelope (``malformed`` otherwise), the job looked up (``unknown-type``);
* **verify**: the signature, when the consumer has signing keys (``signature``);
* **load**: the payload fetched from S3 if offloaded (``payload-missing`` when gone), upgraded to the
  job's version (``version``) and validated (``invalid-payload``);
* **gates**: :mod:`jobframework.gates` (backlogged schedules, time left, and whatever else is plugged in);
* **execute**: the job in its trace span and log context, under its key and message hold, through
  idempotency when on;
* **classify**: every failure, whether the job's or a store's that the record needed (the key ring or
  the payload store unreadable), goes through :func:`jobframework.classification.classify` and the
  retry budget.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from jobframework.admission import load_payload, read_envelope, verify_signature
from jobframework.attempts import is_first_attempt
from jobframework.budget_keys import budget_key
from jobframework.classification import Reason
from jobframework.core import FIFO_SUFFIX
from jobframework.delivery import (
    Batch,
    Delivery,
    Outcome,
    Unavailable,
    describe,
    job_context_of,
    log_keys_of,
    queue_wait_ms_of,
)
from jobframework.errors import (
    ConfigurationError,
    JobCancelled,
    MalformedMessageError,
    PayloadMissingError,
    PayloadVersionError,
    SignatureError,
)
from jobframework.failures import failure_verdict
from jobframework.gates import (
    RELEASE_MARGIN_SECONDS,
    Admitted,
    Gate,
    cancelled_unrun,
    lease_holder,
    refuse,
    release,
    stopped,
)
from jobframework.heartbeat import OVERRUN_GRACE_SECONDS
from jobframework.holding import Held
from jobframework.idempotency import AlreadyInProgress, KeyCancelled, KeyedStart
from jobframework.retry import visibility_delay
from jobframework.running import call
from jobframework.state import JobState, summarize
from jobframework.status import DUPLICATE_REASON
from jobframework.stores.key_records import claims_key
from jobframework.telemetry import job_logger, put_log_keys, reset_log_keys
from jobframework.tracing import extract, job_span
from jobframework.verdict import Kind, Verdict, returned, unverified

if TYPE_CHECKING:
    from jobframework.consumer import Consumer
    from jobframework.jobs import Job

log = logging.getLogger("jobframework.consumer")


class Pipeline:
    """The stages of one record, for one consumer (its registry, features and ``gates``)."""

    def __init__(self, consumer: Consumer, gates: Sequence[Gate]) -> None:
        self.consumer = consumer
        self.gates = tuple(gates)
        self._unguarded: set[str] = set()
        """Idempotent job types run here without an idempotency table (each logged once)."""
        self._unordered: set[str] = set()
        """Ordered job types that arrived on a lane not their FIFO one (each logged once)."""

    def process(self, record: dict[str, Any], context: Any, batch: Batch) -> Verdict:
        """The record's verdict; an unexpected error of the framework is the record's alone."""
        d = Delivery.of(record)
        try:
            admitted = self.admit(d, context, batch)
            if isinstance(admitted, Verdict):
                return admitted
            return self.execute(admitted, batch)
        except Exception as exc:
            log.error("processing record %s failed; it comes back", d.message_id, exc_info=True)
            if d.envelope is not None:
                self.run_ended(d, self.consumer.registry.find(d.envelope.type))
            return returned(d, describe(exc))

    # -- parse, verify, load, gates ---------------------------------------------------------------------

    def admit(self, d: Delivery, context: Any, batch: Batch) -> Admitted | Verdict:
        """Everything before running: the job and its validated payload, past the gates, or a verdict."""
        c = self.consumer
        source = batch.sources.get(d.source)
        if source is None:
            source = batch.sources[d.source] = c.queues.source_of(d.source)
        d.priority, d.lane = source
        body = d.record.get("body")
        try:
            if not isinstance(body, str):
                raise MalformedMessageError(f"the body is {type(body).__name__}, not text")
            d.envelope = env = read_envelope(d.record, body, c.registry, signed=c.keys is not None)
        except MalformedMessageError as exc:
            return refuse(d, Reason.MALFORMED, str(exc))
        job = c.registry.find(env.type)
        if job is None:
            refused = refuse(
                d,
                Reason.UNKNOWN_TYPE,
                f"no job named {env.type!r} is registered here (the consumer imports the job modules that "
                "pyproject.toml's [tool.jobframework] jobs, --jobs or JF_JOBS name, the construct's "
                "job_modules= when deployed; a test imports the job's module itself)",
            )
            return unverified(refused) if c.keys is not None else refused  # (its type and id: a claim)
        if d.lane is not None and job.flow.ordered_by is not None and not d.lane.endswith(FIFO_SUFFIX):
            self._out_of_order(d, job)
        d.priority = d.priority or job.priority.value
        d.lane = d.lane or job.lane
        d.budget = d.source  # (until its payload is read: a payload store or key ring failure too)
        verified = c.keys is None
        try:
            if c.keys is not None:
                verify_signature(d, c.keys, c.registry, keyed=c.idempotency is not None)
                verified = True
            payload = load_payload(d, job, lambda: c._client("s3"), bucket=c.payload_bucket)
        except MalformedMessageError as exc:  # (an offloaded payload in a bucket not this topology's)
            return refuse(d, Reason.MALFORMED, str(exc))
        except SignatureError as exc:
            return unverified(refuse(d, Reason.SIGNATURE, str(exc)))
        except PayloadMissingError as exc:  # gone from S3: no retry can bring it back
            return refuse(d, Reason.PAYLOAD_MISSING, str(exc))
        except Unavailable as exc:  # the key ring or the payload store: classified as any failure
            failed = failure_verdict(c, d, job, exc, None, batch)
            return failed if verified else unverified(failed)
        except PayloadVersionError as exc:
            if env.payload_version > job.version:  # (a deploy under way: handed back a while)
                from jobframework.newer_payload import newer_payload_verdict

                return newer_payload_verdict(d, job, str(exc), c.state)
            return refuse(d, Reason.VERSION, str(exc))
        except ConfigurationError as exc:  # the job's own code (its key= function) failed: as any failure
            return failure_verdict(c, d, job, exc, None, batch)
        except (ValidationError, ValueError) as exc:
            error = f"payload does not match {job.payload_model.__name__}: {describe(exc)}"
            if env.payload_version < job.version:  # what the job's upgrade= steps made of it
                error += f" (after its upgrade from payload version {env.payload_version} to {job.version})"
            return refuse(d, Reason.INVALID_PAYLOAD, error)
        if job.retry_budget is not True and batch.budget is not None:  # (named, per payload, or none)
            d.budget = budget_key(job.retry_budget, payload, d.source, job.name)
        trace = extract(d.record, env.traceparent)
        # The job's keys on every log line from here, the gates' too (a cancel, a debounce, a limit);
        # reset by execute() once it ran, or now when a gate stops the record.
        token = put_log_keys(log_keys_of(d, trace.trace_id), batch.log_keys)
        admitted = Admitted(d, job, payload, context, batch, trace, token)
        try:
            for gate in self.gates:
                verdict = gate(admitted, c)
                if verdict is not None:
                    reset_log_keys(token, batch.log_keys)
                    self.run_ended(d, job)  # (a gate after the limits stopped it)
                    return verdict
            if batch.budget is not None and d.budget is not None and is_first_attempt(d.record):
                batch.budget.first_attempt(d.budget)
        except BaseException:
            reset_log_keys(token, batch.log_keys)
            self.run_ended(d, job)
            raise
        return admitted

    def _out_of_order(self, d: Delivery, job: Job[Any]) -> None:
        """An ordered job arrived on another lane (sent before the job was made ordered, or by a
        producer that routes it the old way): it runs, without its group's order; said once a type."""
        if job.name not in self._unordered:
            self._unordered.add(job.name)
            log.warning(
                "job type %s is ordered (ordered_by=), but a job of it came on the %s queue, not a FIFO "
                "one: it runs without its group's order (sent before the job was made ordered, or by a "
                "producer that routes it the old way; redeploy producers with the job's module or catalog)",
                job.name,
                d.lane,
            )

    # -- execute -----------------------------------------------------------------------------------------

    def execute(self, admitted: Admitted, batch: Batch) -> Verdict:
        d, job, payload, context = admitted.delivery, admitted.job, admitted.payload, admitted.context
        c = self.consumer
        env = d.require_envelope()
        trace = admitted.trace or extract(d.record, env.traceparent)
        logger = job_logger()
        queue_wait_ms = queue_wait_ms_of(d.record, env) if d.attempt == 1 else None
        d.started_at = time.time()  # (the status's start: the outcome is made after the failure's log)
        started = time.perf_counter()
        ran = True
        keyed: KeyedStart | None = None
        result: str | None = None
        try:
            with (
                job_span(
                    trace,
                    env.type,
                    env.id,
                    d.attempt,
                    otel=batch.otel,
                    message_id=d.message_id,
                    queue=d.source,
                ) as own,
                Held(c, d, job, batch) as key,
            ):
                ctx = (
                    job_context_of(
                        d, job, own=own, parent=trace, context=context, logger=logger, state=c.state
                    )
                    if job.takes_context
                    else None
                )
                if job.idempotent and c.idempotency is None and env.type not in self._unguarded:
                    self._unguarded.add(env.type)
                    log.warning(
                        "job %s is idempotent, but this consumer has no idempotency table "
                        "(JF_IDEMPOTENCY_TABLE): its jobs run without the at-most-once guard; set the "
                        "table, or mark the job @job(idempotent=False)",
                        env.type,
                    )
                if c.idempotency is not None and key is not None:
                    lapse = job.timeout + RELEASE_MARGIN_SECONDS
                    with batch.key_turn(f"{env.type}:{env.key}", lapse):
                        c.idempotency.limit_attempt(context, lapse)
                        result, ran = c.idempotency.run(
                            env.type,
                            env.key,
                            lambda: call(job, payload, ctx, timeout=job.timeout),
                            key,
                            keyed=(keyed := self._keyed_start(d, job)),
                        )
                else:
                    result = summarize(call(job, payload, ctx, timeout=job.timeout))
        except AlreadyInProgress as exc:
            # Back when the other delivery's in-progress record expires (or, if unknown, a job timeout).
            delay = visibility_delay((exc.retry_after if exc.retry_after is not None else job.timeout) + 1)
            log.info(
                "job %s (%s) is running in another delivery; checking again in %ds", env.id, env.type, delay
            )
            # No status: the run that holds the key writes its own (this batch may end after it did).
            if keyed is None and c.state is not None:  # (keyed by its id: its key's claim is its start)
                from jobframework.flow.cancel import claimant_of, undo_start_claim

                undo_start_claim(c.state, env, claimant_of(d.record))
            return release(d, delay, why=str(exc), outcome=Outcome.RETRIED)
        except JobCancelled:
            log.info("job %s (%s) stopped after a cancel", env.id, env.type)
            return stopped(d, (time.perf_counter() - started) * 1000)
        except KeyCancelled:
            log.info("job %s (%s) was cancelled; acknowledged unrun", env.id, env.type)
            return cancelled_unrun(d)
        except Exception as exc:  # a BaseException of the job arrives as JobAborted: the job's failure
            elapsed_ms = (time.perf_counter() - started) * 1000
            return failure_verdict(c, d, job, exc, elapsed_ms, batch, payload=payload)
        finally:
            self.run_ended(d, job)
            if admitted.log_token is not None:  # (set by admit(), with the job's keys)
                reset_log_keys(admitted.log_token, batch.log_keys)
            # (past a grace: an async job is cancelled at its timeout, which is no overrun)
            if time.perf_counter() - started > job.timeout + OVERRUN_GRACE_SECONDS:
                d.events.append("Overrun")
        elapsed_ms = (time.perf_counter() - started) * 1000
        if not ran:
            log.info(
                "job %s (%s) key %s already completed; duplicate delivery skipped", env.id, env.type, env.key
            )
        verdict = self.succeeded(d, result, queue_wait_ms=queue_wait_ms, processing_ms=elapsed_ms, ran=ran)
        if keyed is not None and (keyed.status_kept or not ran):
            # The key's claim was the job's start, and its completion holds the outcome (start, end,
            # attempt, result), which every status read merges into the job's status item
            # (stores/key_records.py): no outcome write (issue 13). A duplicate's own would overwrite
            # the first run's with less. A job with no status item (sent by another producer with
            # "track": true) gets its outcome written, as it has nothing else to read.
            verdict.status = None
        return verdict

    @staticmethod
    def succeeded(
        d: Delivery,
        result: str | None,
        *,
        queue_wait_ms: float | None,
        processing_ms: float,
        ran: bool = True,
    ) -> Verdict:
        env = d.require_envelope()
        status: tuple[JobState, dict[str, Any]] | None = None
        if env.track:  # (an untracked job's status is never written: none to note)
            fields: dict[str, Any] = {"attempts": d.attempt, "result": result}
            if not ran:  # its key's run succeeded before: say so beside the result, which is that run's
                fields["reason"] = DUPLICATE_REASON.format(key=env.key)
            status = (JobState.SUCCEEDED, fields)
        return Verdict(
            d,
            Kind.SUCCEEDED,
            status=status,
            outcome=d.outcome(
                Outcome.SUCCEEDED,
                queue_wait_ms=queue_wait_ms,
                processing_ms=processing_ms,
                duplicate=not ran,
                result=None if result is None else json.loads(result),  # (as client.status gives it)
            ),
            saga=("completed", {"result": result}) if env.saga is not None else None,
        )

    def run_ended(self, d: Delivery, job: Job[Any] | None) -> None:
        """Free the concurrency lease the delivery took, if its job has a cap and it took one, now, not
        when its batch settles: a record of its cap may be waiting for it in this process."""
        if job is None or job.flow.concurrency is None:
            return
        from jobframework.flow.gates import release_lease

        release_lease(self.consumer, lease_holder(d.record))

    def _keyed_start(self, d: Delivery, job: Job[Any]) -> KeyedStart | None:
        """The key's claim is the job's start (no start claim: the cancel gate skipped it), so the run
        reads the cancel marker right after it (:mod:`jobframework.stores.key_records`)."""
        c, env = self.consumer, d.require_envelope()
        state, runner = c.state, c.idempotency
        if state is None or not claims_key(runner.table if runner else None, state.key_table, env, job):
            return None
        return KeyedStart(d.attempt, lambda: state.jobs.start_check(env.id))
