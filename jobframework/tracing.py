"""Trace context across the queue: W3C ``traceparent``/``tracestate`` and the X-Ray header.

The producer injects the active context (OpenTelemetry's when the ``otel`` extra is
installed; else the Lambda X-Ray trace; else a fresh trace) as message attributes
and, when an X-Ray trace is active, the ``AWSTraceHeader`` system attribute. The
consumer extracts it per record and runs the job inside a span (OpenTelemetry)
and a Powertools Tracer subsegment (in Lambda), so that enqueues from inside a job
continue the same trace.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import random
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from jobframework.envelope import (
    ATTR_TRACEPARENT,
    ATTR_TRACESTATE,
    MAX_TRACE_ATTRIBUTE_CHARS,
    record_attribute,
)

logger = logging.getLogger(__name__)

_ids = random.Random()
"""Trace and span ids (as OpenTelemetry's SDK makes them: random bits, not ``os.urandom``, which costs
tens of microseconds a call on some hosts). Reseeded in a forked child so processes never share ids."""
os.register_at_fork(after_in_child=_ids.seed)


_HEX_FORMATS = {64: "%016x", 128: "%032x"}
"""(``%`` with a fixed width: an f-string's nested width spec took three times as long, per record.)"""


def _hex_id(bits: int) -> str:
    """A random id of ``bits`` (64 or 128) bits as lowercase hex, never all zeros (W3C forbids it)."""
    return _HEX_FORMATS[bits] % (_ids.getrandbits(bits) or 1)


_TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")
_XRAY = re.compile(r"Root=1-([0-9a-f]{8})-([0-9a-f]{24})(?:;Parent=([0-9a-f]{16}))?(?:;Sampled=([01?]))?")
XRAY_ENV = "_X_AMZN_TRACE_ID"


@dataclass(slots=True, unsafe_hash=True)
class TraceContext:
    """A W3C trace context plus, when one travelled, the X-Ray header.

    Read it, do not change it (not a frozen dataclass: a job's own one is made for every record, and a
    frozen one took twice as long to make)."""

    traceparent: str
    tracestate: str | None = None
    xray_header: str | None = None

    @property
    def trace_id(self) -> str:
        return self.traceparent[3:35]

    @property
    def span_id(self) -> str:
        return self.traceparent[36:52]

    @property
    def sampled(self) -> bool:
        return self.traceparent.endswith("01")

    def as_attributes(self) -> dict[str, str]:
        attrs = {ATTR_TRACEPARENT: self.traceparent}
        if self.tracestate:
            attrs[ATTR_TRACESTATE] = self.tracestate
        return attrs

    def child(self) -> TraceContext:
        """The same trace with a new span id (a job's own span)."""
        parent = self.traceparent
        return TraceContext(
            f"{parent[:36]}{_HEX_FORMATS[64] % (_ids.getrandbits(64) or 1)}{parent[52:]}",
            self.tracestate,
            self.xray_header,
        )


_current: contextvars.ContextVar[TraceContext | None] = contextvars.ContextVar("jf_trace", default=None)
_continued: contextvars.ContextVar[TraceContext | None] = contextvars.ContextVar("jf_continued", default=None)


@contextlib.contextmanager
def continue_trace(ctx: TraceContext) -> Iterator[TraceContext]:
    """Jobs enqueued inside this block continue ``ctx`` (e.g. a saga's root trace), whatever is active."""
    token = _continued.set(ctx)
    try:
        yield ctx
    finally:
        _continued.reset(token)


def valid_traceparent(value: str | None) -> bool:
    return (
        bool(value)
        and len(value or "") <= MAX_TRACE_ATTRIBUTE_CHARS
        and bool(_TRACEPARENT.match(value or ""))
    )


def record_trace_id(record: dict[str, Any], fallback: str | None = None) -> str | None:
    """The W3C trace id a record carries in its ``traceparent`` attribute, else in ``fallback`` (the
    envelope's ``traceparent``, for a message EventBridge Scheduler sent), or ``None``."""
    parent = record_attribute(record, ATTR_TRACEPARENT)
    if parent is None or not valid_traceparent(parent):
        parent = fallback
    return parent[3:35] if parent is not None and valid_traceparent(parent) else None


_ZERO_TRACE_ID, _ZERO_SPAN_ID = "0" * 32, "0" * 16


def new_trace() -> TraceContext:
    ids = f"{_ids.getrandbits(192):048x}"  # the trace id and the span id in one draw
    if ids[:32] == _ZERO_TRACE_ID or ids[32:] == _ZERO_SPAN_ID:  # W3C forbids all zeros
        return TraceContext(f"00-{_hex_id(128)}-{_hex_id(64)}-01")
    return TraceContext(f"00-{ids[:32]}-{ids[32:]}-01")


def from_xray_header(header: str) -> TraceContext | None:
    """The W3C form of an X-Ray header (``Root=1-5759e988-bd862e3fe1be46a994272793;Parent=...``)."""
    match = _XRAY.search(header)
    if not match:
        return None
    epoch, unique, parent, sampled = match.groups()
    flags = "00" if sampled == "0" else "01"
    return TraceContext(f"00-{epoch}{unique}-{parent or _hex_id(64)}-{flags}", None, header)


def to_xray_header(ctx: TraceContext) -> str:
    tid = ctx.trace_id
    return f"Root=1-{tid[:8]}-{tid[8:]};Parent={ctx.span_id};Sampled={'1' if ctx.sampled else '0'}"


_otel: Any = None
_otel_checked = False


def _opentelemetry() -> Any:
    """The ``opentelemetry`` API modules when installed and in use (checked once: a failed import is
    slow).

    Until something has imported ``opentelemetry.trace`` (an SDK set up by the service or the
    OpenTelemetry Lambda layer's wrapper, or the service's own spans), no provider can be recording
    and no span active: nothing is imported then (``opentelemetry.propagate`` alone costs ~4 ms of a
    cold start, reading its entry points).
    """
    global _otel, _otel_checked
    if not _otel_checked:
        if "opentelemetry.trace" not in sys.modules:
            return None
        _otel_checked = True
        try:
            from types import SimpleNamespace

            from opentelemetry import propagate, trace
            from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

            _otel = SimpleNamespace(
                propagate=propagate,
                trace=trace,
                w3c=TraceContextTextMapPropagator(),
                no_sdk=trace.ProxyTracerProvider,
            )
        except ImportError:
            _otel = None
    return _otel


def _otel_recording() -> Any:
    """The OpenTelemetry API when an SDK tracer provider is configured (spans would be recorded)."""
    otel = _opentelemetry()
    if otel is None or isinstance(otel.trace.get_tracer_provider(), otel.no_sdk):
        return None
    return otel


def _otel_context() -> TraceContext | None:
    otel = _otel_recording()
    if otel is None:
        return None
    propagate, trace = otel.propagate, otel.trace
    span = trace.get_current_span()
    if not (span.is_recording() and span.get_span_context().is_valid):
        return None
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    parent = carrier.get(ATTR_TRACEPARENT)
    if not valid_traceparent(parent):
        return None
    state = carrier.get(ATTR_TRACESTATE)
    return TraceContext(str(parent), state if state and len(state) <= MAX_TRACE_ATTRIBUTE_CHARS else None)


def current() -> TraceContext:
    """The trace context to send with a new job.

    Order: a context given to :func:`continue_trace`, OpenTelemetry's active (recording) span, the
    running job's span, the Lambda X-Ray trace, a fresh trace.
    """
    continued = _continued.get()
    if continued is not None:
        return continued
    active = _otel_context() or _current.get()
    if active is None:
        header = os.environ.get(XRAY_ENV)
        active = from_xray_header(header) if header else None
    if active is None:
        return new_trace()
    header = os.environ.get(XRAY_ENV)
    if header and active.xray_header is None:
        active = TraceContext(active.traceparent, active.tracestate, header)
    return active


def extract(record: dict[str, Any], fallback: str | None = None) -> TraceContext:
    """The producer's trace context from a Lambda SQS record, else from ``fallback`` (the envelope's
    ``traceparent``, for a message EventBridge Scheduler sent), else a fresh one."""
    parent = record_attribute(record, ATTR_TRACEPARENT)
    valid = valid_traceparent(parent)
    if not valid and valid_traceparent(fallback):
        parent, valid = fallback, True
    attributes = record.get("attributes")
    xray = attributes.get("AWSTraceHeader") if isinstance(attributes, dict) else None
    xray = xray if isinstance(xray, str) and len(xray) <= MAX_TRACE_ATTRIBUTE_CHARS else None
    if valid:
        state = record_attribute(record, ATTR_TRACESTATE)
        if state and len(state) > MAX_TRACE_ATTRIBUTE_CHARS:
            state = None
        return TraceContext(str(parent), state, xray)
    if xray:
        from_xray = from_xray_header(xray)
        if from_xray:
            return from_xray
    return new_trace()


# --- running a job inside its trace --------------------------------------------------------------

_tracer: Any = None
_tracer_checked = False


def _powertools_tracer() -> Any:
    """Powertools Tracer, created once and only in Lambda (it costs ~0.5 s even when disabled)."""
    global _tracer, _tracer_checked
    if not _tracer_checked:
        _tracer_checked = True
        if os.environ.get("AWS_LAMBDA_FUNCTION_NAME") and os.environ.get(
            "POWERTOOLS_TRACE_DISABLED", ""
        ).lower() not in (
            "1",
            "true",
        ):
            try:
                from aws_lambda_powertools import Tracer

                _tracer = Tracer()
            except Exception:  # the tracer extra (aws-xray-sdk) may be missing
                logger.warning("Powertools Tracer unavailable; X-Ray subsegments are off", exc_info=True)
    return _tracer


_LOOK_UP: Any = object()


def recording_api() -> Any:
    """The OpenTelemetry API when spans would be recorded, else ``None`` (look it up once a batch and
    pass it to :func:`job_span`: the tracer provider does not change between a batch's records)."""
    return _otel_recording()


def job_span(
    parent: TraceContext,
    job_type: str,
    job_id: str,
    attempt: int,
    *,
    otel: Any = _LOOK_UP,
    message_id: str | None = None,
    queue: str | None = None,
) -> contextlib.AbstractContextManager[TraceContext]:
    """Run a job in a span whose parent is the producer's context; yields the job's own context.

    ``otel``: what :func:`recording_api` gave for this batch (looked up here when not given).
    ``message_id``: the SQS message id (``messaging.message.id``; none for a batched job's run,
    which has many). ``queue``: the source queue's name (``messaging.destination.name``).
    """
    if otel is _LOOK_UP:
        otel = _otel_recording()
    tracer = _powertools_tracer()
    if otel is None and tracer is None:  # the plain path: no span machinery to enter
        return _Current(parent.child())
    return _recorded_span(
        parent, job_type, job_id, attempt, otel=otel, tracer=tracer, message_id=message_id, queue=queue
    )


class _Current:
    """Makes ``own`` the running job's trace context for the ``with`` block (the plain path of
    :func:`job_span`: a class, not a generator, as it runs for every record)."""

    __slots__ = ("own", "token")

    def __init__(self, own: TraceContext) -> None:
        self.own = own
        self.token: contextvars.Token[TraceContext | None] | None = None

    def __enter__(self) -> TraceContext:
        self.token = _current.set(self.own)
        return self.own

    def __exit__(self, *exc: object) -> None:
        if self.token is not None:
            _current.reset(self.token)


@contextlib.contextmanager
def _recorded_span(
    parent: TraceContext,
    job_type: str,
    job_id: str,
    attempt: int,
    *,
    otel: Any,
    tracer: Any,
    message_id: str | None,
    queue: str | None,
) -> Iterator[TraceContext]:
    """A job's span (OpenTelemetry's when ``otel``) and X-Ray subsegment (when ``tracer``)."""
    own = parent.child()
    with contextlib.ExitStack() as stack:
        if otel is not None:
            trace = otel.trace
            otel_parent = otel.w3c.extract(parent.as_attributes())
            span = stack.enter_context(
                trace.get_tracer("jobframework").start_as_current_span(
                    f"job {job_type}",
                    context=otel_parent,
                    kind=trace.SpanKind.CONSUMER,
                    attributes={
                        "messaging.system": "aws_sqs",
                        "messaging.operation.type": "process",
                        "messaging.operation": "process",  # the name before semantic conventions 1.26
                        **({"messaging.message.id": message_id} if message_id else {}),
                        **({"messaging.destination.name": queue} if queue else {}),
                        "jobframework.job.id": job_id,
                        "jobframework.job.type": job_type,
                        "jobframework.job.attempt": attempt,
                    },
                )
            )
            span_ctx = span.get_span_context()
            if span.is_recording() and span_ctx.is_valid:
                own = TraceContext(
                    f"00-{span_ctx.trace_id:032x}-{span_ctx.span_id:016x}-{int(span_ctx.trace_flags):02x}",
                    parent.tracestate,
                    parent.xray_header,
                )
        if tracer is not None:
            try:
                subsegment = stack.enter_context(tracer.provider.in_subsegment(f"## job {job_type}"))
                subsegment.put_annotation("job_type", job_type)
                subsegment.put_annotation("job_id", job_id)
                subsegment.put_annotation("trace_id", parent.trace_id)
            except Exception:
                logger.warning("X-Ray subsegment for job %s failed", job_id, exc_info=True)
        token = _current.set(own)
        try:
            yield own
        finally:
            _current.reset(token)
