"""The one classification path of a record whose job (or what it needed) failed: retried within its
policy and the retry budget, dead-lettered with a reason, or, for a :class:`~jobframework.errors.Throttled`,
handed back (:mod:`jobframework.throttle`). Every failure of the pipeline and of a batched job's
items comes here (:func:`failure_verdict`)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from jobframework.attempts import receive_count
from jobframework.budget_keys import budget_label
from jobframework.classification import Action, Reason, classify
from jobframework.delivery import Outcome, describe
from jobframework.errors import Throttled
from jobframework.gates import dead_letter, stopped
from jobframework.retry import visibility_delay
from jobframework.state import JobState
from jobframework.status import now_iso
from jobframework.throttle import throttle_back
from jobframework.verdict import Kind, Verdict

if TYPE_CHECKING:
    from jobframework.consumer import Consumer
    from jobframework.delivery import Batch, Delivery
    from jobframework.jobs import Job

log = logging.getLogger("jobframework.consumer")


def failure_verdict(  # noqa: PLR0917
    consumer: Consumer,
    d: Delivery,
    job: Job[Any],
    exc: Exception,
    elapsed_ms: float | None,
    batch: Batch,
    *,
    payload: Any = None,
) -> Verdict:
    """Retry (within the policy and the budget) or dead-letter; a throttle is handed back (``payload``:
    the job's, whose ``rate_key`` names the rate it holds)."""
    env = d.require_envelope()
    error = describe(exc)
    from jobframework.flow.cancel import cancel_requested  # (not at cold start: failures only)

    if elapsed_ms is not None and env.saga is None and cancel_requested(env.id):
        # A cancel was asked while it ran (it did not stop): no retry, nor a dead letter to redrive.
        log.info("job %s (%s) failed after its cancel; not retried: %s", env.id, env.type, error)
        return stopped(d, elapsed_ms, error=error)
    if isinstance(exc, Throttled) and (
        back := throttle_back(d, job, exc, payload=payload, consumer=consumer, error=error)
    ):
        return back  # (a throttle past its window is classified: a failure as RetryableError's)
    decision = classify(
        exc, attempt=d.attempt, policy=job.retry, permanent=job.permanent, transient=job.transient
    )
    max_attempts = job.retry.max_attempts
    if (
        decision.action is Action.RETRY
        and batch.budget is not None
        and d.budget is not None
        and not batch.budget.allow_retry(d.budget)
    ):
        spent_of = budget_label(d.budget)
        log.error(
            "job %s (%s) failed and the retry budget of %s is spent: %s",
            env.id,
            env.type,
            spent_of,
            error,
            exc_info=exc,
        )
        spent = (
            f"{error} (not retried: the retry budget of {spent_of} is spent; redrive once the "
            "downstream is back, or set JF_RETRY_BUDGET or the job's retry_budget=)"
        )
        return dead_letter(d, Reason.BUDGET, spent, processing_ms=elapsed_ms)
    if decision.action is Action.RETRY:
        delay = visibility_delay(decision.delay)
        if decision.transient:
            log.warning(
                "job %s (%s) attempt %d/%d failed, retry in %ds: %s",
                env.id,
                env.type,
                d.attempt,
                max_attempts,
                delay,
                error,
            )
        else:
            log.error(
                "job %s (%s) attempt %d/%d failed, retry in %ds",
                env.id,
                env.type,
                d.attempt,
                max_attempts,
                delay,
                exc_info=exc,
            )
        return Verdict(
            d,
            Kind.RETRY,
            delay=delay,
            # A record with no receive count to grow retries as a copy carrying this execution.
            copy=receive_count(d.record) is None,
            executions=d.attempt,
            status=(
                JobState.RETRYING,
                {"attempts": d.attempt, "error": error, "next_attempt_at": now_iso(delay)},
            ),
            outcome=d.outcome(Outcome.RETRIED, error=error, delay=delay, processing_ms=elapsed_ms),
        )
    reason = decision.reason or Reason.EXHAUSTED
    ended, saga_step = "dead-lettered", False
    if env.saga is not None:  # (its saga takes a step's failure: no letter, the settler says)
        from jobframework.saga import is_forward_step

        saga_step = is_forward_step(env)
        ended = "failed for good" if saga_step else ended
    log.log(
        # A PermanentError, or a type the job declared permanent=, is the job's own refusal (a 410
        # Gone, a 400, an unknown order): expected, as Celery's `throws`, so not an ERROR line for
        # error-log alerts (the DLQ's alarm still pages).
        logging.WARNING if reason is Reason.PERMANENT or saga_step else logging.ERROR,
        f"job %s (%s) {ended} (%s) after attempt %d: %s",  # (the words in the template: jf dev's filter)
        env.id,
        env.type,
        reason.value,
        d.attempt,
        error,
        exc_info=exc,  # where it raised, for whoever reads the dead letter's log line
    )
    return dead_letter(d, reason, error, processing_ms=elapsed_ms)
