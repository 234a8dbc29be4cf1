"""jobframework: background jobs on AWS serverless (SQS, Lambda, DynamoDB, CDK).

>>> from jobframework import job, JobContext, Priority, RetryPolicy
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jobframework.envelope import Envelope
from jobframework.errors import (
    ConfigurationError,
    EnqueueError,
    PayloadTooLargeError,
    PayloadValidationError,
    PermanentError,
    RetryableError,
)
from jobframework.jobs import Job, JobContext, JobRegistry, Priority, Schedule, job, registry
from jobframework.retry import Jitter, RetryPolicy

if TYPE_CHECKING:
    from jobframework.client import EnqueueRequest, EnqueueResult, JobClient
    from jobframework.consumer import consumer

__all__ = [
    "ConfigurationError",
    "EnqueueError",
    "EnqueueRequest",
    "EnqueueResult",
    "Envelope",
    "Jitter",
    "Job",
    "JobClient",
    "JobContext",
    "JobRegistry",
    "PayloadTooLargeError",
    "PayloadValidationError",
    "PermanentError",
    "Priority",
    "RetryPolicy",
    "RetryableError",
    "Schedule",
    "consumer",
    "job",
    "registry",
]

_LAZY = {
    "JobClient": "jobframework.client",
    "EnqueueRequest": "jobframework.client",
    "EnqueueResult": "jobframework.client",
    "consumer": "jobframework.consumer",
}


def __getattr__(name: str) -> Any:
    # boto3 and Powertools load only when the client or the consumer is used.
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'jobframework' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
