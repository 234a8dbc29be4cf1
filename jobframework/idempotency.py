"""Idempotent execution on Powertools' idempotency utility (DynamoDB persistence).

Each job runs at most once per ``(type, key)``: the envelope's key, never the SQS
messageId (which changes on redrive). The in-progress record expires with the
Lambda's remaining time, so a job whose invocation was killed can run again; a
job that raised leaves no record (Powertools deletes it), so its retry is not
blocked; a duplicate delivery of a completed job is skipped and reported.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jobframework.state import summarize

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

log = logging.getLogger(__name__)

DEFAULT_EXPIRY_SECONDS = 24 * 3600
"""How long a completed job's record keeps duplicates away (Powertools' default is one hour)."""

_current: contextvars.ContextVar[Callable[[], Any]] = contextvars.ContextVar("jf_idempotent_call")
_ran: contextvars.ContextVar[list[bool]] = contextvars.ContextVar("jf_idempotent_ran")


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

            config = IdempotencyConfig(
                event_key_jmespath="key",
                raise_on_no_idempotency_key=True,
                expires_after_seconds=self.expires_after,
            )

            @idempotent_function(  # type: ignore[untyped-decorator]
                data_keyword_argument="item",
                persistence_store=DynamoDBPersistenceLayer(table_name=self.table, boto3_client=self.client),
                config=config,
                key_prefix="jf",
            )
            def execute(item: dict[str, str]) -> dict[str, Any]:
                _ran.get().append(True)
                return {"result": summarize(_current.get()())}

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

    def run(self, job_type: str, key: str, fn: Callable[[], Any]) -> tuple[str | None, bool]:
        """Run ``fn`` unless ``(job_type, key)`` already completed.

        Returns ``(result summary, ran)``; ``ran`` is ``False`` for a skipped duplicate.

        Raises:
            AlreadyInProgress: another delivery holds the key right now.
            Exception: whatever ``fn`` raised (no record is left behind).
        """
        from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyAlreadyInProgressError

        ran: list[bool] = []
        token_fn, token_ran = _current.set(fn), _ran.set(ran)
        try:
            response = self._own()[1](item={"key": f"{job_type}:{key}"})
        except IdempotencyAlreadyInProgressError as exc:
            raise AlreadyInProgress(
                f"{job_type} {key} is being processed by another delivery", self._expires_in(str(exc))
            ) from exc
        finally:
            _current.reset(token_fn)
            _ran.reset(token_ran)
        result = response.get("result") if isinstance(response, dict) else None
        return result, bool(ran)
