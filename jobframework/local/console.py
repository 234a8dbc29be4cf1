"""The console of ``jf dev``: one readable line per job outcome, each log record on one line, no EMF.

Every record the consumer settles ends in one :class:`~jobframework.delivery.RecordOutcome`; the
listener :func:`outcome_listener` logs it on the ``jobframework.outcomes`` logger with these keys
(``extra``), so that ``jf dev --json`` prints it as one more JSON log line:

``outcome``, ``job_type``, ``job_id``, ``message_id``, ``priority``, ``lane`` (the queue's lane,
``default-fifo`` for an ordered job: what ``jf dlq`` takes), ``attempt``, ``reason``, ``error``,
``delay`` (seconds), ``duration_ms``.

Without ``--json``, :class:`ReadableFormatter` (a Powertools formatter, so the job's logger keeps its
keys) renders a record that has the outcome keys as an outcome line, and any other record, the jobs'
own ``ctx.logger`` lines included, as ``time level [job_type job_id attempt N] message``, a traceback
indented under it. The consumer's own records that say again what an outcome line says (``job ...
dead-lettered``, ``... retry in 2s``) are left out; of their traceback, if any, the frames of the
job's own code are kept (``at handlers/jobs.py:108 in generate_report: raise ...``), under the line.

Example (what ``jf dev`` prints)::

    09:22:25.882 succeeded      emails.send       01a23b36-5687-7106-87ed-84ccbfcd25b8  high     attempt 1  11 ms
    09:22:28.206 retry in 1s    webhooks.deliver  01a23b36-5b50-73de-8d65-2699fe235923  default  attempt 1  7 ms  RetryableError: answered 503
    09:22:25.882 dead-lettered  payments.capture  01a23b36-519d-70e0-9aa0-525f7ef9d590  high     attempt 1  3 ms  permanent: PermanentError: card declined
"""  # noqa: E501

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter

from jobframework.delivery import Outcome, RecordOutcome
from jobframework.local.restated import NoRestatements, job_frames, pending, restates_outcome
from jobframework.throttle import THROTTLED

if TYPE_CHECKING:
    from jobframework.delivery import Listener

OUTCOMES_LOGGER = "jobframework.outcomes"
WORKER_LOGGER = "jobframework.worker"
"""The logger of ``jf worker``'s own lines (polling, stopped)."""
OUTCOME_KEYS = (
    "outcome",
    "job_type",
    "job_id",
    "message_id",
    "priority",
    "lane",
    "attempt",
    "reason",
    "error",
    "delay",
    "duration_ms",
)
"""The keys of an outcome record (``extra`` of the ``jobframework.outcomes`` logger)."""

_LEVELS = {
    Outcome.SUCCEEDED: logging.INFO,
    Outcome.SKIPPED: logging.INFO,
    Outcome.RELEASED: logging.INFO,
    Outcome.RETRIED: logging.WARNING,
    Outcome.DEAD_LETTERED: logging.ERROR,
    Outcome.FAILED: logging.WARNING,
}


def outcome_listener(*, always: bool = True) -> Listener:
    """A consumer listener that logs each record's outcome (see the module's docstring for its keys).

    ``always``: at INFO whatever ``POWERTOOLS_LOG_LEVEL`` says for the rest (``jf dev``); else the
    Powertools Logger's level (``jf worker``: at ``WARNING``, only retries and dead letters), set on
    the logger itself, so that ``JF_LOG_LEVEL`` (the framework's own lines) does not hide outcomes."""
    log = logging.getLogger(OUTCOMES_LOGGER)
    if always:
        log.setLevel(logging.INFO)
    else:
        from jobframework.telemetry import job_logger

        log.setLevel(job_logger().log_level)

    def emit(outcome: RecordOutcome) -> None:
        level = _LEVELS.get(outcome.outcome, logging.INFO)
        if not log.isEnabledFor(level):
            return
        keys = outcome_keys(outcome)
        ident = outcome.job_id or f"message {outcome.message_id}"
        args = (ident, outcome.job_type or "-", _what(keys))
        fn, lno, func, _ = log.findCaller()  # (this function: the JSON line's "location", as log.log's)
        record = log.makeRecord(log.name, level, fn, lno, "job %s (%s) %s", args, None, func, keys)
        # Stamped when its job ended, not when its batch settled (the listener is told then: for a batch
        # whose jobs ran one after another, a capped job's, every line had read the same time).
        ended = outcome.ended_at
        if ended is not None:
            record.created, record.msecs = ended, int((ended - int(ended)) * 1000) + 0.0
        log.handle(record)

    return emit


def worker_log() -> logging.Logger:
    """The logger of ``jf worker``'s start and stop lines, at INFO whatever the levels say (as the
    outcome lines of ``jf dev``): a ``jobframework.`` logger, whose records reach the Powertools
    Logger's handler whatever ``POWERTOOLS_SERVICE_NAME`` says (:func:`jobframework.telemetry.job_logger`
    sees to it), so that they are log lines of the same shape as the rest (JSON, with ``level``,
    ``message``, ``timestamp`` and ``service``)."""
    from jobframework.telemetry import job_logger

    job_logger()  # made now: its handler, and the framework's records routed to it
    log = logging.getLogger(WORKER_LOGGER)
    log.setLevel(logging.INFO)
    return log


def outcome_keys(outcome: RecordOutcome) -> dict[str, Any]:
    """The outcome as the keys its log record carries."""
    return {
        "outcome": outcome.outcome,
        "job_type": outcome.job_type,
        "job_id": outcome.job_id,
        "message_id": outcome.message_id,
        "priority": outcome.priority,
        "lane": outcome.lane,
        "attempt": outcome.attempt,
        "reason": str(outcome.reason) if outcome.reason is not None else None,
        "error": outcome.error,
        "delay": outcome.delay,
        "duration_ms": round(outcome.processing_ms, 1) if outcome.processing_ms is not None else None,
        "duplicate": outcome.duplicate or None,
        "unrun": outcome.unrun or None,
    }


TYPE_WIDTH = 16
"""The job type's column in an outcome line, at least (wider for the longest job registered)."""
MAX_TYPE_WIDTH = 40
"""A job type longer than this shifts its own line's columns rather than widening every line."""


def outcome_text(keys: dict[str, Any], type_width: int = TYPE_WIDTH) -> str:
    """One line for an outcome's keys (without the time), the job type padded to ``type_width``.

    Example:
        >>> outcome_text({"outcome": "retried", "job_type": "webhooks.deliver", "job_id": "j-1",
        ...               "priority": "default", "attempt": 2, "delay": 4, "duration_ms": 7.2,
        ...               "error": "RetryableError: 503"})
        'retry in 4s    webhooks.deliver  j-1  default  attempt 2  7 ms  RetryableError: 503'
        >>> outcome_text({"outcome": "succeeded", "duplicate": True, "job_type": "payments.capture",
        ...               "job_id": "j-2", "priority": "high", "attempt": 1, "duration_ms": 6.0})
        'duplicate      payments.capture  j-2  high  attempt 1  6 ms'
        >>> outcome_text({"outcome": "dead_lettered", "job_type": "ledger.post", "job_id": "j-3",
        ...               "priority": "default", "lane": "default-fifo", "attempt": 3, "duration_ms": 2.0})
        'dead-lettered  ledger.post       j-3  default-fifo  attempt 3  2 ms'
        >>> outcome_text({"outcome": "skipped", "job_type": "reports.daily", "job_id": "j-4",
        ...               "priority": "low", "attempt": 1, "reason": "cancelled"})
        'skipped        reports.daily     j-4  low  not run  cancelled'
        >>> outcome_text({"outcome": "retried", "job_type": "orders.place", "job_id": "j-5",
        ...               "priority": "default", "attempt": 1, "delay": 61, "unrun": True,
        ...               "error": "another delivery runs it"})
        'back in 1m     orders.place      j-5  default  not run  another delivery runs it'
        >>> outcome_text({"outcome": "released", "job_type": "crm.sync", "job_id": "j-6",
        ...               "priority": "default", "attempt": 1, "delay": 3, "reason": "concurrency limit"})
        'released       crm.sync          j-6  default  not run  concurrency limit  back in 3s'

    A record handed back unrun (it waits for another delivery of its key, or a backlogged schedule
    defers it; ``released``: over a limit, say) comes "back in" its delay, "not run": no attempt was
    spent.

    The lane (what ``jf dlq`` takes) is shown, else the priority.
    """
    what = _what(keys)
    job_type = keys.get("job_type") or "(no job type)"
    ident = keys.get("job_id") or f"message {keys.get('message_id') or '?'}"
    parts = [
        f"{what:<13}",
        f"{job_type:<{type_width}}",
        ident,
        keys.get("lane") or keys.get("priority") or "-",
    ]
    duration = keys.get("duration_ms")
    outcome = keys.get("outcome")
    released = outcome == Outcome.RELEASED and keys.get("reason") != THROTTLED  # (a throttle's ran)
    if (outcome == Outcome.SKIPPED and duration is None) or keys.get("unrun") or released:
        parts.append("not run")  # (cancelled, expired, handed back unrun: no attempt was made)
    else:
        parts.append(f"attempt {keys.get('attempt') or 1}")
    if duration is not None:
        parts.append(duration_text(duration))
    detail = [str(d) for d in (keys.get("reason"), keys.get("error")) if d]
    if detail:
        parts.append(": ".join(detail))
    if released and keys.get("delay") is not None:
        parts.append(f"back in {_seconds(keys['delay'])}")
    if keys.get("note"):  # what the console adds (local/handbacks.py), not a key of the outcome
        parts.append(f"({keys['note']})")
    return "  ".join(parts)


def _what(keys: dict[str, Any]) -> str:
    outcome = keys.get("outcome")
    if outcome == Outcome.RETRIED:  # (handed back unrun when it did not run: no attempt spent)
        verb = "back in" if keys.get("unrun") else "retry in"
        return f"{verb} {_seconds(keys.get('delay'))}"
    if outcome == Outcome.RELEASED and keys.get("reason") == THROTTLED:  # (the downstream's 429)
        return f"back in {_seconds(keys.get('delay'))}"
    if outcome == Outcome.SUCCEEDED and keys.get("duplicate"):
        return "duplicate"  # its key had completed: acknowledged, the job did not run again
    return str(outcome).replace("_", "-")


def _seconds(value: Any) -> str:
    if value is None:
        return "?"
    seconds = float(value)
    return f"{seconds:g}s" if seconds < 60 else f"{seconds / 60:.0f}m"


_SHOWN_OR_AMBIENT = frozenset(
    {
        *("timestamp", "level", "location", "message", "service", "sampling_rate", "xray_trace_id"),
        *("exception", "exception_name", "stack_trace", "cold_start", "correlation_id"),
        *("function_name", "function_memory_size", "function_arn", "function_request_id"),
        *("job_id", "job_type", "job_key", "attempt", "trace_id", "reason", "batch_size", "outcome"),
    }
)
"""Keys a line shows in its prefix, or that every line carries: the others are the caller's, shown."""


class ReadableFormatter(LambdaPowertoolsFormatter):
    """Powertools' formatter, rendering each record's keys as one line of text instead of JSON."""

    def __init__(self) -> None:
        super().__init__(datefmt="%H:%M:%S.%F")
        self.type_width = 0
        """The job type column's width: the longest job registered when the first outcome is printed
        (jf dev imports the jobs after it installs the console), growing for a longer one seen later."""

    def _type_width(self, job_type: str | None) -> int:
        if not self.type_width:
            from jobframework.jobs import registry

            self.type_width = max([TYPE_WIDTH, *(len(j.name) for j in registry)])
        if job_type and len(job_type) > self.type_width:
            self.type_width = len(job_type)
        return min(self.type_width, MAX_TYPE_WIDTH)

    def format(self, record: logging.LogRecord) -> str:
        if restates_outcome(record):  # not through the filter: keep where the job raised, at least
            return job_frames(record)
        return super().format(record)

    def serialize(self, log: Any) -> str:
        keys: dict[str, Any] = dict(log)
        when = keys.get("timestamp", "")
        if keys.get("outcome"):
            line = f"{when} {outcome_text(keys, self._type_width(keys.get('job_type')))}"
            frames = pending.take(keys.get("job_id") or f"message {keys.get('message_id')}")
            if frames:
                line = f"{line}\n{frames}"
        else:
            context = [str(keys[k]) for k in ("job_type", "job_id") if keys.get(k)]
            if keys.get("job_id") and keys.get("attempt"):
                context.append(f"attempt {keys['attempt']}")
            if keys.get("reason"):
                context.append(f"reason {keys['reason']}")
            prefix = f"[{' '.join(context)}] " if context else ""
            line = f"{when} {keys.get('level', ''):<7} {prefix}{keys.get('message', '')}"
            extra = [f"{k}={v}" for k, v in keys.items() if k not in _SHOWN_OR_AMBIENT and v is not None]
            if extra:  # what the job's logger was given (extra={...}, append_keys)
                line = f"{line}  {' '.join(extra)}"
        exception = keys.get("exception")
        return f"{line}\n{_indent(str(exception))}" if exception else line


def _indent(text: str) -> str:
    return "\n".join(f"    {line}" for line in text.splitlines())


def log_as_app(app: str | None) -> None:
    """Name the ``service`` of the log lines after ``app``, as the stack does (it sets
    ``POWERTOOLS_SERVICE_NAME`` to its app name), unless ``POWERTOOLS_SERVICE_NAME`` is set already;
    before :func:`jobframework.telemetry.job_logger` is first called (``jf dev``, ``jf worker``), which
    gives the framework's own records (``jobframework.*``: outcomes, consumer, emulator) the Logger's
    handler when it is named after another service, so that they print as before.
    """
    from jobframework.telemetry import SERVICE_ENV, job_logger

    if app:
        os.environ.setdefault(SERVICE_ENV, app)
    job_logger()


def install(*, json_logs: bool, every_handback: bool = False) -> Listener:
    """Set up the console of ``jf dev``; returns the consumer listener that logs the outcomes.

    The consumer's EMF metrics are off (``JF_METRICS_DISABLED=true`` unless the environment says
    otherwise; a job's own Powertools metrics still print);
    the framework's and the jobs' records go through the Powertools Logger of
    :func:`jobframework.telemetry.job_logger`, as JSON with ``json_logs``, else through
    :class:`ReadableFormatter`, without the routine hand-backs but the first of each job type and
    reason and one line per 30 s (:class:`~jobframework.local.handbacks.QuietHandBacks`) unless
    ``every_handback``.
    """
    from jobframework.local.handbacks import QuietHandBacks
    from jobframework.telemetry import METRICS_DISABLED_ENV, job_logger

    os.environ.setdefault(METRICS_DISABLED_ENV, "true")
    handler = job_logger().registered_handler
    if not json_logs:
        handler.setFormatter(ReadableFormatter())
        handler.addFilter(NoRestatements())
        if not every_handback:
            handler.addFilter(QuietHandBacks())
    return outcome_listener()


def duration_text(ms: float) -> str:
    """A job's run time for an outcome line: whole milliseconds, tenths under one (a batched job's
    items share its call's time, often under 1 ms each: they read ``0 ms``).

    Example:
        >>> duration_text(1234.5), duration_text(7.24), duration_text(0.2), duration_text(0.01)
        ('1,234 ms', '7 ms', '0.2 ms', '<0.1 ms')
    """
    if ms < 0.05:
        return "<0.1 ms"
    if ms < 1:
        return f"{ms:.1f} ms"
    return f"{ms:,.0f} ms"
