"""The producer side of flow control: what an enqueue's ``expires_in``, ``debounce`` and ``tenant``
add to the message (the envelope's ``deadline`` and ``debounce``, the ``MessageGroupId``)."""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from jobframework.errors import ConfigurationError, EnqueueOptionError
from jobframework.errortext import shown
from jobframework.flow.debounce import MAX_DEBOUNCE_SECONDS, delay_to_close, join
from jobframework.flow.expiry import deadline_of
from jobframework.flow.options import expiry_seconds

if TYPE_CHECKING:
    from jobframework.catalog import RoutedJob
    from jobframework.client import EnqueueRequest
    from jobframework.envelope import Envelope
    from jobframework.jobs import Job
    from jobframework.state import StateStore

_GROUP = re.compile(r"^[A-Za-z0-9!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~]{1,128}$")
MAX_DEBOUNCE_KEY_CHARS = 980
"""A debounced job's idempotency key is ``<key>#<window id>``: it must stay within 1024 characters."""


def debounce_seconds(value: float | timedelta) -> float:
    """A debounce window as seconds (more than 0, at most 900).

    Raises:
        EnqueueOptionError: not a number or timedelta, or out of range.
    """
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or math.isnan(seconds):
        raise EnqueueOptionError(f"debounce must be seconds (a number) or a timedelta, got {value!r}")
    if not 0 < seconds <= MAX_DEBOUNCE_SECONDS:
        raise EnqueueOptionError(
            f"debounce must be more than 0 and at most {MAX_DEBOUNCE_SECONDS} seconds (SQS's longest "
            f"delay), got {seconds:g}"
        )
    return float(seconds)


@dataclass(frozen=True, slots=True)
class FlowRequest:
    """An enqueue's flow options, checked: its lifetime and debounce window (seconds, or ``None``)."""

    expires: float | None
    debounce: float | None


def check_flow_request(job: Job[Any] | RoutedJob, request: EnqueueRequest, delay: int) -> FlowRequest:
    """Check an enqueue's ``expires_in`` and ``debounce`` (with its key and delay); stores nothing.

    Raises:
        EnqueueOptionError: a bad ``expires_in`` or ``debounce``, a debounce without a key or with a
            ``delay`` of its own, or a deadline that comes before the delay ends (it could never run).
    """
    options = getattr(job, "flow", None)
    expires = expiry_seconds(request.expires_in)
    if expires is None and options is not None:
        expires = options.expires_after
    if expires is not None and delay >= expires and request.debounce is None:
        # (a debounced one may be its window's last)
        raise EnqueueOptionError(
            f"{job.name} would expire ({expires:g} s after the enqueue) before its delay ends "
            f"({delay} s): it could never run; give it a deadline after the delay"
        )
    if request.debounce is None:
        return FlowRequest(expires, None)
    seconds = debounce_seconds(request.debounce)
    key = request.key
    if key is None:
        raise EnqueueOptionError(
            f"debounce of {job.name} needs key= (jf enqueue: --key): the enqueues of one key are debounced"
        )
    if len(key) > MAX_DEBOUNCE_KEY_CHARS:
        raise EnqueueOptionError(f"a debounce key has at most {MAX_DEBOUNCE_KEY_CHARS} characters")
    if delay:
        raise EnqueueOptionError("debounce= delays the job to its window's close: do not pass delay= too")
    if expires is not None and expires <= seconds:  # before joining: the window's last would not run
        raise EnqueueOptionError(
            f"{job.name} would expire ({expires:g} s after the enqueue) before its debounce window "
            f"({seconds:g} s) closes: it could never run; give it a deadline after the window"
        )
    return FlowRequest(expires, seconds)


def flow_fields(
    state: StateStore | None,
    flow: FlowRequest,
    env: Envelope,
    *,
    delay: int,
    window: float | None,
) -> tuple[Envelope, int, float | None]:
    """The envelope with its deadline and debounce window, the delay, and the dedup window, for an
    enqueue whose options :func:`check_flow_request` checked (``flow``).

    A debounced enqueue joins (or opens) its key's window here, is delayed to the window's close, and
    is not deduplicated by key (every enqueue of the window is sent; the last one runs).

    Raises:
        ConfigurationError: a debounce without a state table.
    """
    from jobframework.envelope import DebounceRef

    update: dict[str, Any] = {}
    if flow.expires is not None:
        update["deadline"] = deadline_of(env.enqueued_at, flow.expires)
    if flow.debounce is not None:
        if state is None:
            raise ConfigurationError("debounce needs the state table: set JF_STATE_TABLE")
        key = env.key  # (the request's key: a debounce needs one)
        now = time.time()
        window_id, closes = join(state, key, env.id, flow.debounce, now)
        update["debounce"] = DebounceRef(key=key, window=window_id)
        update["key"] = f"{key}#{window_id}"
        delay, window = delay_to_close(closes, now), None
    return (env.model_copy(update=update) if update else env), delay, window


def tenant_of(job: Job[Any] | RoutedJob, request: EnqueueRequest, data: dict[str, Any]) -> str | None:
    """The ``MessageGroupId`` of an enqueue: ``tenant=``, else the job's ``tenant`` function of the payload.

    Raises:
        EnqueueOptionError: ``tenant=`` is not 1 to 128 letters, digits and punctuation (SQS's rule).
        ConfigurationError: the job's ``tenant`` function gave no such str.
    """
    tenant = request.tenant
    options = getattr(job, "flow", None)
    source = "tenant"
    if tenant is None and options is not None and options.tenant is not None:
        tenant = options.tenant(job.validate(data))
        source = f"job {job.name}: its tenant= function"
        if not isinstance(tenant, str) and tenant is not None:
            raise ConfigurationError(
                f"{source} must return a str (SQS's MessageGroupId), got {type(tenant).__name__} "
                f"{shown(tenant)}: return str(...) of it"
            )
    if tenant is None:
        return None
    if not isinstance(tenant, str) or not _GROUP.match(tenant):
        verb, bad = (
            ("must be", EnqueueOptionError) if source == "tenant" else ("must return", ConfigurationError)
        )
        raise bad(
            f"{source} {verb} 1 to 128 letters, digits or punctuation (SQS's MessageGroupId), got "
            f"{shown(tenant)}"
        )
    return tenant
