"""Idempotent execution on Powertools' idempotency utility (DynamoDB persistence).

Each job runs at most once per ``(type, key)``: the envelope's key, never the SQS
messageId (which changes on redrive). The in-progress record expires with the
Lambda's remaining time, so a job whose invocation was killed can run again; a
job that raised leaves no record (Powertools deletes it), so its retry is not
blocked; a duplicate delivery of a completed job is skipped and reported.

While the job runs, :mod:`jobframework.heartbeat` keeps its in-progress record from lapsing
(:meth:`KeyHold.extend`). The writes after the job are retried, bounded, with backoff
(``WRITE_ATTEMPTS``): the completion write, so that a passing fault does not leave the job to run
again, and the deletion after a failure. If the completion write still fails, the job did run: its
delivery is acknowledged as succeeded and the error logged; only another delivery of the same key that
arrives after the in-progress record lapses could run it again (see docs/effectively-once.md). If the
deletion after a failure still fails, the job's own exception is what the consumer classifies (a
``PermanentError`` is still dead-lettered), never Powertools' error.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from jobframework.status import STATUS_TTL_SECONDS, now_iso, summarize
from jobframework.stores.key_records import CANCELLED_FIELD, response_fields

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from jobframework.stores.job_records import StartCheck

log = logging.getLogger(__name__)

DEFAULT_EXPIRY_SECONDS = 24 * 3600
"""How long a completed job's record keeps duplicates away (Powertools' default is one hour)."""
WRITE_ATTEMPTS = 5
"""Tries of the completion write (and of the deletion after a failure) before giving up."""
WRITE_BACKOFF_SECONDS = 0.05
"""The first wait between those tries; it doubles (0.05 + 0.1 + 0.2 + 0.4 = 0.75 s in all)."""

_current: contextvars.ContextVar[Callable[[], Any]] = contextvars.ContextVar("jf_idempotent_call")
_ran: contextvars.ContextVar[list[bool]] = contextvars.ContextVar("jf_idempotent_ran")
_raised: contextvars.ContextVar[list[BaseException]] = contextvars.ContextVar("jf_idempotent_raised")
_hold: contextvars.ContextVar[KeyHold | None] = contextvars.ContextVar("jf_idempotent_hold", default=None)
_keyed: contextvars.ContextVar[KeyedStart | None] = contextvars.ContextVar("jf_keyed_start", default=None)


def _retried(what: str, write: Callable[[], None]) -> None:
    """Run a write, trying ``WRITE_ATTEMPTS`` times with doubling waits; the last failure raises."""
    for attempt in range(1, WRITE_ATTEMPTS + 1):
        try:
            write()
            return
        except Exception:
            if attempt == WRITE_ATTEMPTS:
                raise
            log.warning(
                "%s failed (try %d of %d); trying again", what, attempt, WRITE_ATTEMPTS, exc_info=True
            )
            time.sleep(WRITE_BACKOFF_SECONDS * 2 ** (attempt - 1))


class KeyHold:
    """The in-progress record of one run, once it is written; the heartbeat extends it."""

    def __init__(self, runner: IdempotentRunner) -> None:
        self._runner = runner
        self.record_id: str | None = None

    def extend(self, until: float) -> None:
        """Move the in-progress record's expiry to ``until`` (epoch seconds), while it is in progress."""
        if self.record_id is None:
            return
        from botocore.exceptions import ClientError

        try:
            self._runner.client.update_item(
                TableName=self._runner.table,
                Key={"id": {"S": self.record_id}},
                UpdateExpression="SET #expiry = :expiry",
                ConditionExpression="#status = :inprogress",
                ExpressionAttributeNames={"#expiry": "in_progress_expiration", "#status": "status"},
                ExpressionAttributeValues={
                    ":expiry": {"N": str(int(until * 1000))},
                    ":inprogress": {"S": "INPROGRESS"},
                },
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            # Completed (or deleted) meanwhile: nothing to hold.


class KeyCancelled(Exception):
    """The run found its job cancelled right after claiming its key: the job does not run."""


@dataclass(slots=True)
class KeyedStart:
    """A run whose key's claim is its job's start (:mod:`jobframework.stores.key_records`)."""

    attempt: int
    check: Callable[[], StartCheck]
    """Reads the job's cancel marker and whether it has a status item (consistently), after the claim
    and before the job's code."""
    status_kept: bool = False
    """Set by the check: the job has a status item, which the key's record moves on (no outcome write)."""


class RunResult(NamedTuple):
    """What :meth:`IdempotentRunner.run` did."""

    result: str | None
    """The JSON summary of the job's return value (the saved one for a skipped duplicate)."""
    ran: bool
    """``False`` for a skipped duplicate."""


def _cancel_found(keyed: KeyedStart) -> bool:
    try:
        found = keyed.check()
    except Exception:
        log.warning("checking the job for a cancel failed; running it", exc_info=True)
        return False
    keyed.status_kept = found.has_status
    return found.cancelled


class AlreadyInProgress(Exception):
    """Another delivery of the same job is running now (retry it later).

    ``retry_after`` is the seconds until that delivery's in-progress record expires, when known.
    """

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class _AttemptDeadline:
    """A Lambda context whose remaining time stops at one attempt's deadline."""

    def __init__(self, context: Any, seconds: float) -> None:
        self._context = context
        self._deadline = time.monotonic() + seconds

    def get_remaining_time_in_millis(self) -> int:
        own = max(0, int((self._deadline - time.monotonic()) * 1000))
        getter = getattr(self._context, "get_remaining_time_in_millis", None)
        return min(own, int(getter())) if getter is not None else own


class IdempotentRunner:
    """Runs callables at most once per key.

    Args:
        table: the idempotency table (partition key ``id``, TTL ``expiration``).
        client: a boto3 DynamoDB client.
        expires_after: seconds a completed record suppresses duplicates.
    """

    def __init__(
        self, table: str, client: DynamoDBClient, expires_after: int = DEFAULT_EXPIRY_SECONDS
    ) -> None:
        self.table = table
        self.client = client
        self.expires_after = expires_after
        # Powertools keeps the Lambda context on the config and configures its persistence once:
        # one set per thread, so that `jf worker`'s concurrent batches each expire on their own time.
        self._local = threading.local()

    def _own(self) -> tuple[Any, Callable[..., Any]]:
        """This thread's ``(IdempotencyConfig, idempotent function)``."""
        own = getattr(self._local, "own", None)
        if own is None:
            from aws_lambda_powertools.utilities.idempotency import (
                DynamoDBPersistenceLayer,
                IdempotencyConfig,
                idempotent_function,
            )

            class _Persistence(DynamoDBPersistenceLayer):
                """Powertools' DynamoDB store; notes the in-progress key, retries the writes after a run."""

                def _put_record(self, data_record: Any) -> None:
                    super()._put_record(data_record)
                    hold = _hold.get()
                    if hold is not None:
                        hold.record_id = data_record.idempotency_key

                def _get_expiry_timestamp(self) -> int:
                    # A record that is its job's start lasts as long as the status reading it.
                    if _keyed.get() is None:
                        return int(super()._get_expiry_timestamp())
                    return int(time.time()) + STATUS_TTL_SECONDS

                def _update_record(self, data_record: Any) -> None:
                    _retried(
                        "recording the completion",
                        lambda: super(_Persistence, self)._update_record(data_record),
                    )

                def _delete_record(self, data_record: Any) -> None:
                    _retried(
                        "deleting the in-progress record",
                        lambda: super(_Persistence, self)._delete_record(data_record),
                    )

            config = IdempotencyConfig(
                event_key_jmespath="key",
                raise_on_no_idempotency_key=True,
                expires_after_seconds=self.expires_after,
            )

            @idempotent_function(  # type: ignore[untyped-decorator]
                data_keyword_argument="item",
                persistence_store=_Persistence(table_name=self.table, boto3_client=self.client),
                config=config,
                key_prefix="jf",
            )
            def execute(item: dict[str, str]) -> dict[str, Any]:
                keyed = _keyed.get()
                if keyed is not None and _cancel_found(keyed):  # the key is ours: a cancel came first
                    return {CANCELLED_FIELD: True, "finished_at": now_iso()}
                _ran.get().append(True)
                try:
                    if keyed is None:
                        return {"result": summarize(_current.get()())}
                    started_at = now_iso()
                    return response_fields(summarize(_current.get()()), keyed.attempt, started_at)
                except BaseException as exc:
                    _raised.get().append(exc)
                    raise

            own = self._local.own = (config, execute)
        return own

    def register_context(self, context: Any) -> None:
        """Let in-progress records expire with this invocation's remaining time (this thread's)."""
        if context is not None and hasattr(context, "get_remaining_time_in_millis"):
            self._own()[0].register_lambda_context(context)

    def limit_attempt(self, context: Any, seconds: float) -> None:
        """The next record's in-progress record expires after ``seconds`` (its job's timeout) or with the
        invocation, whichever is first: a function sized for a whole batch must not hold a crashed
        job's key for the rest of its timeout."""
        self._own()[0].register_lambda_context(_AttemptDeadline(context, seconds))

    def _expires_in(self, message: str) -> float | None:
        """Seconds until the in-progress record named in Powertools' message expires (None if unknown).

        Waiting exactly that long spends one SQS receive, not one per job timeout, so a killed
        invocation's job cannot run out of receives (and be moved to the DLQ) while its record holds.
        """
        record_id = message.rsplit("=", 1)[-1].split(" and sort key", 1)[0].strip()
        try:
            item = self.client.get_item(
                TableName=self.table,
                Key={"id": {"S": record_id}},
                ProjectionExpression="in_progress_expiration",
            ).get("Item", {})
            expiry_ms = float(item["in_progress_expiration"]["N"])
        except Exception:
            return None
        return max(0.0, expiry_ms / 1000 - time.time())

    def run(
        self,
        job_type: str,
        key: str,
        fn: Callable[[], Any],
        hold: KeyHold | None = None,
        *,
        keyed: KeyedStart | None = None,
    ) -> RunResult:
        """Run ``fn`` unless ``(job_type, key)`` already completed.

        ``hold`` is told the in-progress record's id once it is written (for the heartbeat). With
        ``keyed`` the key's claim is the job's start (:mod:`jobframework.stores.key_records`): the
        cancel marker is read right after it, and the record keeps the attempt, start and finish times
        and lasts as long as a status.

        Raises:
            AlreadyInProgress: another delivery holds the key right now.
            KeyCancelled: the job was cancelled (found after the claim, or by an earlier delivery).
            Exception: whatever ``fn`` raised (its record is deleted, with retries; if that still
                fails, the record lapses with its in-progress expiry and ``fn``'s exception is raised).
        """
        from aws_lambda_powertools.utilities.idempotency.exceptions import (
            IdempotencyAlreadyInProgressError,
            IdempotencyPersistenceLayerError,
        )

        ran: list[bool] = []
        raised: list[BaseException] = []
        tokens = (_current.set(fn), _ran.set(ran), _raised.set(raised), _hold.set(hold))
        kept = _keyed.set(keyed)
        response: Any = None
        try:
            response = self._own()[1](item={"key": f"{job_type}:{key}"})
        except IdempotencyAlreadyInProgressError as exc:
            raise AlreadyInProgress(
                f"{job_type} {key} is being processed by another delivery", self._expires_in(str(exc))
            ) from exc
        except IdempotencyPersistenceLayerError as exc:
            if raised:  # the job failed and its record could not be deleted: the job's error wins
                log.warning(
                    "%s %s failed and its in-progress record could not be deleted; it lapses on its own",
                    job_type,
                    key,
                    exc_info=exc,
                )
                raise raised[0] from None
            if not ran:
                raise
            # The job ran; its completion could not be recorded even after retries.
            log.error(
                "%s %s ran but recording its completion failed %d times; acknowledged as succeeded "
                "(another delivery of this key after the in-progress record lapses would run again)",
                job_type,
                key,
                WRITE_ATTEMPTS,
                exc_info=exc,
            )
            return RunResult(None, True)
        finally:
            _keyed.reset(kept)
            _current.reset(tokens[0])
            _ran.reset(tokens[1])
            _raised.reset(tokens[2])
            _hold.reset(tokens[3])
        if not ran and isinstance(response, dict) and response.get(CANCELLED_FIELD):
            raise KeyCancelled(f"{job_type} {key} was cancelled before it started")
        result = response.get("result") if isinstance(response, dict) else None
        return RunResult(result, bool(ran))
