"""Logs and metrics: Powertools Logger with the job as correlation context, and EMF metrics.

The framework's own records come from loggers named ``jobframework.<module>`` (children of the
Powertools Logger of the default service ``jobframework``): they share its handler, JSON shape and
correlation keys, and ``JF_LOG_LEVEL`` sets their level apart from the jobs' (``ctx.logger``).

Metrics are aggregated per batch and written once per (job type, priority) group,
so a batch of ten records costs a handful of EMF lines, not thirty. A telemetry
failure is logged and never fails a job.
"""

from __future__ import annotations

import logging
import os
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jobframework.delivery import Outcome
from jobframework.emf import COUNT, MILLISECONDS, write_emf

if TYPE_CHECKING:
    from contextvars import ContextVar, Token

    from aws_lambda_powertools import Logger

    from jobframework.delivery import RecordOutcome

NAMESPACE_ENV = "POWERTOOLS_METRICS_NAMESPACE"
DEFAULT_NAMESPACE = "JobFramework"
METRICS_DISABLED_ENV = "JF_METRICS_DISABLED"
"""``true`` turns off the consumer's metrics alone (``POWERTOOLS_METRICS_DISABLED`` turns off every
Powertools metric of the process, a job's own too); the testing plugin sets it."""
LOG_LEVEL_ENV = "JF_LOG_LEVEL"
"""The level of the framework's own log records (``WARNING``, ``INFO``, ``DEBUG``...): the records of
the loggers named ``jobframework.<module>`` that set no level of their own. Unset, they follow the
Powertools Logger (``POWERTOOLS_LOG_LEVEL``), below which it cannot show them. The jobs' own records
(``ctx.logger``) and other loggers are not affected; the testing plugin sets ``WARNING``."""
SERVICE = "jobframework"
"""The service of every metric, and of the jobs' log lines unless ``POWERTOOLS_SERVICE_NAME`` names one."""
SERVICE_ENV = "POWERTOOLS_SERVICE_NAME"
JOB_LOGGER_NAME = "jobframework.job"
"""``ctx.logger`` of a job run inline (a std logger): the job's records, not the framework's."""

_FRAMEWORK_PREFIX = SERVICE + "."
_std_logger = logging.getLogger(__name__)
_logger: Logger | None = None


def job_logger() -> Logger:
    """The Powertools Logger that jobs and the consumer log through (one per process).

    Its handler carries :class:`FrameworkLevel`, which applies ``JF_LOG_LEVEL`` to the framework's
    records that reach it.
    """
    global _logger
    if _logger is None:
        from aws_lambda_powertools import Logger

        logger = Logger(service=os.environ.get(SERVICE_ENV, SERVICE))
        handler = logger.registered_handler
        if not any(isinstance(f, FrameworkLevel) for f in handler.filters):
            handler.addFilter(FrameworkLevel())
        if logger.name != SERVICE:
            _route_framework_records(handler, logger.log_level, logger.name)
        _keep_framework_records_off_root()
        _logger = logger
    return _logger


def log_keys_context() -> ContextVar[dict[str, Any]]:
    """The context variable that holds the job logger's thread-safe keys (Powertools'
    ``THREAD_LOCAL_KEYS``, which ``thread_safe_append_keys`` sets): the consumer sets a record's keys on
    it and resets it with the token, which also drops the keys the job appended, so that none outlives
    its record."""
    from aws_lambda_powertools.logging.formatter import THREAD_LOCAL_KEYS

    return THREAD_LOCAL_KEYS


def put_log_keys(keys: dict[str, Any], context: ContextVar[dict[str, Any]] | None = None) -> Token[Any]:
    """Add ``keys`` to every job-logger line of this context until :func:`reset_log_keys` with the
    token (``context``: :func:`log_keys_context`, when the caller looked it up already)."""
    var = context or log_keys_context()
    return var.set({**var.get(), **keys})


def reset_log_keys(token: Token[Any], context: ContextVar[dict[str, Any]] | None = None) -> None:
    """Back to the keys before :func:`put_log_keys` gave ``token``; keys a job appended meanwhile
    (``thread_safe_append_keys``) go too."""
    (context or log_keys_context()).reset(token)


def _route_framework_records(handler: logging.Handler, level: int, service: str) -> None:
    """With ``POWERTOOLS_SERVICE_NAME`` naming the app (as the stack sets it for every consumer), the
    Powertools Logger is that service's, no parent of the framework's ``jobframework.<module>`` loggers:
    their records went to the root logger as plain text, without the job's keys, and below WARNING not
    at all. The ``jobframework`` logger gets the Logger's handler (its JSON, keys and service) and level,
    and the root's handlers a filter against the same records coming through twice, as Powertools does
    for its own logger (pytest's capture handler keeps them). A service named under ``jobframework.``
    makes the Logger a child of that logger: it stops propagating, or its lines would print twice."""
    framework = logging.getLogger(SERVICE)
    if handler not in framework.handlers:
        framework.addHandler(handler)
    if framework.level == logging.NOTSET:
        framework.setLevel(level)
    if FrameworkRecords.ours(service):
        logging.getLogger(service).propagate = False


def _keep_framework_records_off_root() -> None:
    """Each root handler gets :class:`FrameworkRecords` in place of the ``SuppressFilter`` Powertools
    puts there for a Logger of the default service (``jobframework``)."""
    from aws_lambda_powertools.logging.filters import SuppressFilter

    for root_handler in logging.root.handlers:
        if type(root_handler).__name__ == "LogCaptureHandler":
            continue
        for f in list(root_handler.filters):
            if isinstance(f, SuppressFilter) and f.logger == SERVICE:
                root_handler.removeFilter(f)
        if not any(isinstance(f, FrameworkRecords) for f in root_handler.filters):
            root_handler.addFilter(FrameworkRecords())


class FrameworkRecords(logging.Filter):
    """Keeps the framework's records (the ``jobframework`` logger's and its children's) out of a root
    handler. Powertools' ``SuppressFilter`` drops any logger whose name merely contains the text, a
    team's ``acme.jobframework_glue`` too."""

    @staticmethod
    def ours(name: str) -> bool:
        return name == SERVICE or name.startswith(SERVICE + ".")

    def filter(self, record: logging.LogRecord) -> bool:
        return not self.ours(record.name)


def framework_log_level() -> int:
    """``JF_LOG_LEVEL`` as a level number (:func:`log_level_of`); a value that is no level is said once
    at WARNING, and ignored."""
    text = os.environ.get(LOG_LEVEL_ENV) or ""
    level = _levels.get(text)
    if level is None:
        level = _levels[text] = log_level_of(text)
        if level == logging.NOTSET and text.strip():
            _std_logger.warning(
                "%s=%r is not a log level (DEBUG, INFO, WARNING, ERROR, CRITICAL); ignored",
                LOG_LEVEL_ENV,
                text,
            )
    return level


def log_level_of(text: str) -> int:
    """A level's number from its name, in any case, or its number; ``logging.NOTSET`` (0) for an empty
    text or one that is no level.

    Example:
        >>> log_level_of("warning") == logging.WARNING, log_level_of("10"), log_level_of("loud")
        (True, 10, 0)
    """
    text = text.strip()
    if text.isdigit():
        return int(text)
    level = logging.getLevelName(text.upper()) if text else logging.NOTSET
    return level if isinstance(level, int) else logging.NOTSET


_levels: dict[str, int] = {}
"""Each ``JF_LOG_LEVEL`` text read so far, to its level (a filter reads it for each framework record)."""


class FrameworkLevel(logging.Filter):
    """Drops the framework's records below ``JF_LOG_LEVEL``, keeping every other record.

    The framework's records are those of the loggers named ``jobframework.<module>`` (the consumer's,
    the client's, ``jf worker``'s...), except ``jobframework.job`` (a job's own, run inline). A logger
    of them given a level of its own (``jf dev`` sets ``jobframework.outcomes`` to ``INFO``) keeps it:
    ``JF_LOG_LEVEL`` is the level of those that have none, as a parent logger's would be.

    On the Powertools Logger's handler, it sees only the records that their logger let through (the
    framework's loggers inherit the Powertools Logger's level), and only those: the consumer calls it
    for no record it does not log.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        name = record.name
        if not name.startswith(_FRAMEWORK_PREFIX) or name == JOB_LOGGER_NAME:
            return True
        level = framework_log_level()
        if record.levelno >= level:
            return True
        return _own_level(name)


def _own_level(name: str) -> bool:
    """Whether the logger ``name`` or a parent of it below ``jobframework`` has a level set."""
    logger: logging.Logger | logging.PlaceHolder | None = logging.Logger.manager.loggerDict.get(name)
    while isinstance(logger, logging.Logger) and logger.name.startswith(_FRAMEWORK_PREFIX):
        if logger.level != logging.NOTSET:
            return True
        logger = logger.parent
    return False


_POWERTOOLS_SWITCHES = ("POWERTOOLS_METRICS_DISABLED", "POWERTOOLS_DEV")
_disabled: dict[tuple[str | None, ...], bool] = {}
"""The answer for each setting of the three variables (a batch asks; Powertools' rule is looked up once)."""


def metrics_namespace() -> str:
    """The namespace of the framework's metrics: ``POWERTOOLS_METRICS_NAMESPACE`` (the construct sets
    the deployment's, ``JobFramework/<app>-<stage>``), else the one a topology parameter
    ``/<app>/<stage>/topology`` (``JF_TOPOLOGY_PARAMETER``) names, so that a ``jf worker`` run outside
    the construct writes where the stack's alarms read, else ``JobFramework``."""
    given = os.environ.get(NAMESPACE_ENV)
    if given:
        return given
    parts = os.environ.get("JF_TOPOLOGY_PARAMETER", "").strip("/").split("/")
    if len(parts) == 3 and parts[2] == "topology" and all(parts[:2]):
        from jobframework.core import metrics_namespace as deployed

        return deployed(parts[0], parts[1])
    return DEFAULT_NAMESPACE


def metrics_disabled() -> bool:
    """Whether the framework's own metrics are off: ``JF_METRICS_DISABLED`` (``true`` or ``1``), or
    ``POWERTOOLS_METRICS_DISABLED`` (every Powertools metric; ``POWERTOOLS_DEV`` as Powertools has it)."""
    environ = os.environ
    switches = (environ.get(METRICS_DISABLED_ENV), *(environ.get(name) for name in _POWERTOOLS_SWITCHES))
    found = _disabled.get(switches)
    if found is None:
        from aws_lambda_powertools.metrics.functions import is_metrics_disabled

        ours = (switches[0] or "").lower() in ("1", "true")
        found = _disabled[switches] = ours or bool(is_metrics_disabled())
    return found


@dataclass(slots=True)
class _Group:
    succeeded: int = 0
    retried: int = 0
    dead_lettered: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    queue_wait_ms: list[float] = field(default_factory=list)
    processing_ms: list[float] = field(default_factory=list)
    end_to_end_ms: list[float] = field(default_factory=list)
    first_attempts: int = 0
    first_attempt_failures: int = 0


class BatchMetrics:
    """Counts and timings of one batch, flushed as EMF when the batch ends.

    Metrics (namespace ``JobFramework`` unless ``POWERTOOLS_METRICS_NAMESPACE`` says otherwise), with
    dimensions ``JobType`` and ``Priority``: ``Succeeded``, ``Retried``, ``DeadLettered``,
    ``QueueWait`` (ms, send onto the queue to start), ``ProcessingTime`` (ms), ``EndToEndLatency``
    (ms, the envelope's ``enqueued_at`` to the job's success; a redriven job keeps its first enqueue
    time, so its latency includes the time it spent dead-lettered), ``FirstAttempts`` (first
    executions that ended) and ``FirstAttemptFailures`` (those of them that failed: retried or
    dead-lettered after running); ``DeadLettered`` with dimensions ``Reason`` and ``Priority``; and for
    scheduled jobs ``Heartbeat``, ``ScheduleSkipped`` and ``ScheduleDeferred`` with dimension
    ``JobType``. Powertools adds ``service`` to every set.

    Example:
        >>> from jobframework.delivery import Outcome, RecordOutcome
        >>> metrics = BatchMetrics()
        >>> metrics.add(RecordOutcome("m-1", Outcome.SUCCEEDED, "a.job", "j-1", "high", 1,
        ...                           processing_ms=3.0))
        >>> metrics.pending()
        1
    """

    def __init__(self) -> None:
        self._groups: dict[tuple[str, str], _Group] = defaultdict(_Group)
        self._schedule_events: dict[tuple[str, str], int] = defaultdict(int)

    def pending(self) -> int:
        """How many (job type, priority) groups wait for :meth:`flush`."""
        return len(self._groups)

    def add(self, outcome: RecordOutcome) -> None:
        """Count what became of one record: its outcome, and whether it ended a first execution.

        A first execution is an outcome of attempt 1 after the job ran (it has a processing time and was
        not a duplicate delivery skipped by idempotency); records refused before running, released
        or deferred are not executions.
        """
        job_type = outcome.job_type or "-"
        priority = outcome.priority or "-"
        if outcome.outcome == Outcome.SUCCEEDED:
            end_to_end_ms = None
            if outcome.enqueued_at is not None and not outcome.duplicate:
                end_to_end_ms = max(0.0, (time.time() - outcome.enqueued_at.timestamp()) * 1000)
            self.succeeded(
                job_type,
                priority,
                outcome.queue_wait_ms,
                outcome.processing_ms or 0.0,
                end_to_end_ms=end_to_end_ms,
            )
        elif outcome.outcome == Outcome.RETRIED:
            self.retried(job_type, priority, outcome.processing_ms)
        elif outcome.outcome in (Outcome.DEAD_LETTERED, Outcome.FAILED):  # (a saga's step: counted alike)
            self.dead_lettered(job_type, priority, str(outcome.reason), processing_ms=outcome.processing_ms)
        else:
            return
        if outcome.attempt == 1 and outcome.processing_ms is not None and not outcome.duplicate:
            self.first_attempt(job_type, priority, failed=outcome.outcome != Outcome.SUCCEEDED)

    def first_attempt(self, job_type: str, priority: str, *, failed: bool) -> None:
        """A job's first execution ended (``failed``: it raised, and was retried or dead-lettered)."""
        group = self._groups[(job_type, priority)]
        group.first_attempts += 1
        group.first_attempt_failures += int(failed)

    def schedule_event(self, job_type: str, metric: str) -> None:
        """``Heartbeat`` (a scheduled job ran), ``ScheduleSkipped`` or ``ScheduleDeferred``, per job type."""
        self._schedule_events[(job_type, metric)] += 1

    def succeeded(
        self,
        job_type: str,
        priority: str,
        queue_wait_ms: float | None,
        processing_ms: float,
        *,
        end_to_end_ms: float | None = None,
    ) -> None:
        group = self._groups[(job_type, priority)]
        group.succeeded += 1
        if queue_wait_ms is not None:
            group.queue_wait_ms.append(queue_wait_ms)
        group.processing_ms.append(processing_ms)
        if end_to_end_ms is not None:
            group.end_to_end_ms.append(end_to_end_ms)

    def retried(self, job_type: str, priority: str, processing_ms: float | None) -> None:
        group = self._groups[(job_type, priority)]
        group.retried += 1
        if processing_ms is not None:
            group.processing_ms.append(processing_ms)

    def dead_lettered(
        self, job_type: str, priority: str, reason: str, *, processing_ms: float | None = None
    ) -> None:
        group = self._groups[(job_type, priority)]
        group.dead_lettered[reason] += 1
        if processing_ms is not None:  # it ran, then failed for good
            group.processing_ms.append(processing_ms)

    def flush(self) -> None:
        if not self._groups and not self._schedule_events:
            return
        try:
            self._flush()
        except Exception:
            _std_logger.warning("writing job metrics failed; the jobs are not affected", exc_info=True)
        finally:
            self._groups.clear()
            self._schedule_events.clear()

    def _flush(self) -> None:
        if metrics_disabled():
            return
        namespace = metrics_namespace()
        by_reason: dict[tuple[str, str], int] = defaultdict(int)
        for (job_type, priority), group in self._groups.items():
            dead = sum(group.dead_lettered.values())
            write_emf(
                namespace,
                SERVICE,
                {"JobType": job_type, "Priority": priority},
                {
                    "Succeeded": (COUNT, [group.succeeded] if group.succeeded else []),
                    "Retried": (COUNT, [group.retried] if group.retried else []),
                    "DeadLettered": (COUNT, [dead] if dead else []),
                    "QueueWait": (MILLISECONDS, group.queue_wait_ms),
                    "ProcessingTime": (MILLISECONDS, group.processing_ms),
                    "EndToEndLatency": (MILLISECONDS, group.end_to_end_ms),
                    "FirstAttempts": (COUNT, [group.first_attempts] if group.first_attempts else []),
                    "FirstAttemptFailures": (
                        COUNT,
                        [group.first_attempt_failures] if group.first_attempt_failures else [],
                    ),
                },
            )
            for reason, count in group.dead_lettered.items():
                by_reason[(reason, priority)] += count
        for (job_type, name), count in self._schedule_events.items():
            write_emf(namespace, SERVICE, {"JobType": job_type}, {name: (COUNT, [count])})
        for (reason, priority), count in by_reason.items():
            write_emf(
                namespace,
                SERVICE,
                {"Reason": reason, "Priority": priority},
                {"DeadLettered": (COUNT, [count])},
            )
