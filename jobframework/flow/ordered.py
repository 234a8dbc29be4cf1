"""The producer side of ordered jobs (``@job(ordered_by=...)``): what a send to a FIFO lane carries.

An ordered job's lane is a FIFO queue (``default-fifo``). Each send carries:

* ``MessageGroupId``: the job's ``ordered_by`` function of the payload (or ``enqueue(..., group=...)``,
  which a job known only from the catalog needs): the jobs of one group run one after another, in the
  order they were sent;
* ``MessageDeduplicationId``: the SHA-256 of the job's id, so that SQS drops a second send of the same
  job (a retried send, a saga's outbox sent again) within its 5-minute deduplication interval. Not of
  its key: a second job of one key is delivered, and its run is skipped as a duplicate by the
  consumer's idempotency, its status saying so, as on a standard queue (SQS dropped it unseen, and a
  tracked job's status read ``queued`` for as long as it is kept);
* no ``DelaySeconds``: a FIFO queue delays whole queues, not messages, so a ``delay=`` (or a
  ``debounce=``, which is a delay) on an ordered job is refused.

The consumer side (order kept through failures) is :mod:`jobframework.fifo`.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Any

from jobframework.errors import ConfigurationError, EnqueueOptionError
from jobframework.errortext import shown

if TYPE_CHECKING:
    from jobframework.catalog import RoutedJob
    from jobframework.client import EnqueueRequest
    from jobframework.jobs import Job

_GROUP = re.compile(r"^[A-Za-z0-9!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~]{1,128}$")
"""SQS's rule for ``MessageGroupId``: 1 to 128 letters, digits and punctuation."""


def is_ordered(job: Job[Any] | RoutedJob) -> bool:
    """Whether the job goes to a FIFO lane (``ordered_by=``, or a catalog route marked ``fifo``)."""
    route = getattr(job, "route", None)
    if route is not None:
        return bool(route.fifo)
    return getattr(job, "ordered", False) is True


def check_ordered_request(job: Job[Any] | RoutedJob, request: EnqueueRequest, delay: int) -> None:
    """Refuse what a FIFO lane cannot do, before anything is sent or recorded.

    Raises:
        EnqueueOptionError: a ``delay``, ``debounce`` or ``tenant`` on an ordered job; or a ``group``
            on a job that is not ordered (the caller's options, as every bad enqueue option).
    """
    if not is_ordered(job):
        if request.group is not None:
            raise EnqueueOptionError(
                f"group= applies to ordered jobs (@job(ordered_by=...)); {job.name} is not one: use "
                "tenant= for the message group of a standard queue"
            )
        return
    for option, given in (("delay", delay > 0), ("debounce", request.debounce is not None)):
        if given:
            raise EnqueueOptionError(
                f"{job.name} is an ordered job (a FIFO lane) and cannot take {option}=: a FIFO queue "
                "cannot delay one message (only the whole queue), and a later send of its group would "
                "overtake it; enqueue it when it is due, or drop ordered_by="
            )
    if request.tenant is not None:
        raise EnqueueOptionError(
            f"{job.name} is an ordered job: its message group is its ordered_by value (or group=), "
            "not tenant="
        )


def message_group(job: Job[Any] | RoutedJob, request: EnqueueRequest, data: dict[str, Any]) -> str:
    """The ``MessageGroupId`` of an ordered job's send: ``group=``, else ``ordered_by(payload)``.

    Raises:
        EnqueueOptionError: no group (a catalog job without ``group=``), or a ``group=`` that is not 1 to
            128 letters, digits or punctuation, or not the one ``ordered_by`` gives.
        ConfigurationError: ``ordered_by`` gave no such group.
    """
    group: object = request.group
    options = getattr(job, "flow", None)
    if options is not None and options.ordered_by is not None:
        ordered = options.ordered_by(job.validate(data))
        if group is not None and group != ordered:  # it would join another group's order
            raise EnqueueOptionError(
                f"group={shown(group)} is not the group {job.name}'s ordered_by= gives this payload "
                f"({ordered!r}): leave group= out (it is for a job known only from the job catalog)"
            )
        group, where = ordered, "ordered_by="
    else:
        where = "group="
    if group is None:
        raise EnqueueOptionError(
            f"{job.name} is an ordered job known here only from the job catalog: pass group= "
            "(jf enqueue --group) with the value its ordered_by function gives, so that it joins the right "
            "message group"
        )
    if not isinstance(group, str) or not _GROUP.match(group):
        bad = EnqueueOptionError if where == "group=" else ConfigurationError  # the caller's, or the code's
        raise bad(
            f"job {job.name}: {where} must give a non-empty str of at most 128 letters, digits or "
            f"punctuation (SQS's MessageGroupId), got {shown(group)}"
        )
    return group


def deduplication_id(job_id: str) -> str:
    """The ``MessageDeduplicationId`` of a send: the SHA-256 of the job's id, in hex.

    Example:
        >>> deduplication_id("invoice:123")[:12]
        'd2d02fd48b09'
    """
    return hashlib.sha256(job_id.encode("utf-8")).hexdigest()
