"""jobframework: background jobs on AWS serverless (SQS, Lambda, DynamoDB, CDK).

>>> from jobframework import job, JobContext, Priority, RetryPolicy
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

# Bound eagerly, after the names above: importing the submodule ``jobframework.consumer`` sets this
# package's attribute ``consumer`` to the module, so a lazy look-up would hand out the module once
# anything imported it. Binding the function here, after that import, keeps ``from jobframework import
# consumer`` the function, always (the import costs a few milliseconds over the package's own).
from jobframework.consumer import consumer
from jobframework.delivery import RecordOutcome
from jobframework.envelope import Envelope
from jobframework.errors import (
    ConfigurationError,
    EnqueueError,
    JobCancelled,
    PayloadTooLargeError,
    PayloadValidationError,
    PermanentError,
    RetryableError,
    StatusUnavailableError,
    Throttled,
    TopologyWarning,
)
from jobframework.job_options import BatchOptions
from jobframework.jobs import Job, JobContext, JobRegistry, Priority, Schedule, job, registry
from jobframework.outcome_listeners import on_outcome
from jobframework.retry import Jitter, RetryPolicy
from jobframework.status import JobState, JobStatus

if TYPE_CHECKING:
    from jobframework.client import EnqueueRequest, EnqueueResult, JobClient

__all__ = [
    "BatchOptions",
    "ConfigurationError",
    "EnqueueError",
    "EnqueueRequest",
    "EnqueueResult",
    "Envelope",
    "Jitter",
    "Job",
    "JobCancelled",
    "JobClient",
    "JobContext",
    "JobRegistry",
    "JobState",
    "JobStatus",
    "PayloadTooLargeError",
    "PayloadValidationError",
    "PermanentError",
    "Priority",
    "RecordOutcome",
    "RetryPolicy",
    "RetryableError",
    "Schedule",
    "StatusUnavailableError",
    "Throttled",
    "TopologyWarning",
    "consumer",
    "job",
    "on_outcome",
    "registry",
]

_LAZY = {
    "JobClient": "jobframework.client",
    "EnqueueRequest": "jobframework.client",
    "EnqueueResult": "jobframework.client",
}


def __getattr__(name: str) -> Any:
    # boto3 and Powertools load only when the client or the consumer is used.
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'jobframework' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
