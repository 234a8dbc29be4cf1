"""SQS's own redrive (``StartMessageMoveTask``, the console's "Start DLQ redrive")."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jobframework.dlq.letter import DeadLetterError
from jobframework.errors import EndpointNotSupportedError

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

_NOT_IMPLEMENTED_CODES = frozenset(
    {
        "InternalFailure",
        "InternalError",
        "InternalServerError",
        "NotImplemented",
        "NotImplementedException",
        "UnknownOperationException",
        "InvalidAction",
        "UnsupportedOperation",
    }
)


def start_move_task(sqs: SQSClient, dlq_arn: str, *, rate: int | None = None) -> str:
    """Start a message move task from the DLQ back to its source(s); returns the task handle.

    Raises:
        EndpointNotSupportedError: the endpoint does not implement StartMessageMoveTask (the
            embedded AWS); use ``jf dlq redrive`` without ``--native`` there.
        DeadLetterError: SQS refused the task (the message says why).
    """
    kwargs: dict[str, Any] = {"SourceArn": dlq_arn}
    if rate:
        kwargs["MaxNumberOfMessagesPerSecond"] = int(rate)
    response = _native(sqs, "StartMessageMoveTask", lambda: sqs.start_message_move_task(**kwargs))
    return str(response.get("TaskHandle", ""))


def move_tasks(sqs: SQSClient, dlq_arn: str) -> list[dict[str, Any]]:
    """The DLQ's recent message move tasks (status, moved, to move, ...)."""
    response = _native(
        sqs, "ListMessageMoveTasks", lambda: sqs.list_message_move_tasks(SourceArn=dlq_arn, MaxResults=10)
    )
    return [dict(r) for r in response.get("Results", [])]


def _native(sqs: SQSClient, operation: str, call: Callable[[], Any]) -> Any:
    from botocore.exceptions import ClientError

    try:
        return call()
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        if code in _NOT_IMPLEMENTED_CODES or status in (500, 501):
            endpoint = sqs.meta.endpoint_url
            raise EndpointNotSupportedError(
                f"{operation} is not supported by this endpoint ({endpoint}); "
                "use `jf dlq redrive` without --native"
            ) from exc
        raise DeadLetterError(f"{operation} failed: {code}: {error.get('Message', '')}") from exc
