"""CPU per message of ``consumer()`` against a bare Powertools BatchProcessor.

Both process the same batch of 10 no-op jobs. The baseline's record handler only
parses the body with the same pydantic models; the records are as ``JobClient`` sends them (with
the producer's ``traceparent``); ``consumer()`` adds what it is for:
registry lookup, payload validation, the job context, log correlation, the trace
span, classification and metrics (EMF, written to a buffer). No AWS call happens
on the success path. Runs alternate between the two and the ratio of the medians
is printed. Target: at most 2.0x (issue 13).

A third handler is a reference, not a product: the least a consumer that does the same observable
work costs, written by hand from the framework's own parts with nothing else (no gates, no
settling, no outcome objects, no heartbeat, no classification): parse the envelope and validate its
payload in one pass (the record's ``jf-type`` names the job), continue the producer's trace in a
span of the job's own, put the job's keys on the logger, call it, time it, and count it in the
batch's EMF. Its ratio to the bare baseline is the lowest the target could be met at with those
features; ``consumer()``'s ratio to it is the framework's own overhead.

    python bench/consumer_overhead.py [--rounds 30] [--batches 200]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import sys
import time
from typing import Any

os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from pydantic import BaseModel

from jobframework.admission import read_envelope
from jobframework.consumer import consumer
from jobframework.envelope import Envelope
from jobframework.jobs import JobRegistry, job
from jobframework.telemetry import BatchMetrics, log_keys_context, put_log_keys, reset_log_keys
from jobframework.testing import FakeLambdaContext, sqs_event, sqs_record
from jobframework.topology import QueueEndpoints, RuntimeConfig
from jobframework.tracing import extract, job_span, new_trace

ARN = "arn:aws:sqs:us-east-1:123456789012:bench-default"


class Ping(BaseModel):
    user_id: str
    count: int = 0


class BareEnvelope(BaseModel):
    v: int
    id: str
    type: str
    payload: Ping
    payload_version: int
    key: str
    enqueued_at: str


registry = JobRegistry()


@job("bench.noop", registry=registry)
def noop(ping: Ping) -> None:
    """Does nothing: the bench measures the framework around it."""


def make_event() -> dict[str, Any]:
    """Ten records as ``JobClient`` sends them: the envelope, its ``jf-type`` and the producer's
    ``traceparent`` (the client always sends one; the consumer continues it)."""
    return sqs_event(
        *(
            sqs_record(
                Envelope.new("bench.noop", {"user_id": f"u{i}", "count": i}),
                queue_arn=ARN,
                message_attributes={"traceparent": new_trace().traceparent},
            )
            for i in range(10)
        )
    )


def bare_handler() -> Any:
    processor = BatchProcessor(event_type=EventType.SQS)

    def record_handler(record: Any) -> None:
        BareEnvelope.model_validate_json(record.body)

    def handler(event: dict[str, Any], context: Any) -> Any:
        return process_partial_response(event, record_handler, processor, context)

    return handler


def floor_handler() -> Any:
    """The reference: the same observable work as ``consumer()``'s success path, and nothing else."""

    def handler(event: dict[str, Any], context: Any) -> Any:
        keys, metrics = log_keys_context(), BatchMetrics()
        for record in event["Records"]:
            env = read_envelope(record, record["body"], registry, signed=False)  # payload and all
            found = registry.find(env.type)
            assert found is not None
            payload = found.validate(env.payload)
            trace = extract(record, env.traceparent)
            token = put_log_keys(
                {
                    "job_id": env.id,
                    "job_type": env.type,
                    "job_key": env.key,
                    "attempt": 1,
                    "trace_id": trace.trace_id,
                },
                keys,
            )
            started = time.perf_counter()
            with job_span(trace, env.type, env.id, 1, otel=None):
                found(payload)
            elapsed_ms = (time.perf_counter() - started) * 1000
            reset_log_keys(token, keys)
            wait_ms = time.time() * 1000 - float(record["attributes"]["SentTimestamp"])
            end_to_end_ms = (time.time() - env.enqueued_at.timestamp()) * 1000
            metrics.succeeded(
                env.type, found.priority.value, wait_ms, elapsed_ms, end_to_end_ms=end_to_end_ms
            )
            metrics.first_attempt(env.type, found.priority.value, failed=False)
        metrics.flush()
        return {"batchItemFailures": []}

    return handler


def framework_handler() -> Any:
    config = RuntimeConfig(
        queues={"default": QueueEndpoints(url="https://sqs/bench-default", dlq_url="https://sqs/dlq")}
    )
    return consumer(registry, config=config, sqs_client=object())  # type: ignore[arg-type]


def cpu_per_message(handler: Any, event: dict[str, Any], batches: int) -> float:
    context = FakeLambdaContext(900)
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink):
        started = time.process_time()
        for _ in range(batches):
            response = handler(event, context)
        elapsed = time.process_time() - started
    assert not response["batchItemFailures"], response
    return elapsed / (batches * len(event["Records"]))


def measure(rounds: int = 30, batches: int = 200) -> dict[str, float]:
    event = make_event()
    bare, floor, framework = bare_handler(), floor_handler(), framework_handler()
    for handler in (bare, floor, framework):  # warm up each
        cpu_per_message(handler, event, 20)
    bare_runs, floor_runs, framework_runs = [], [], []
    for _ in range(rounds):
        bare_runs.append(cpu_per_message(bare, event, batches))
        floor_runs.append(cpu_per_message(floor, event, batches))
        framework_runs.append(cpu_per_message(framework, event, batches))
    bare_us = statistics.median(bare_runs) * 1e6
    floor_us = statistics.median(floor_runs) * 1e6
    framework_us = statistics.median(framework_runs) * 1e6
    return {
        "bare_us": bare_us,
        "framework_us": framework_us,
        "ratio": framework_us / bare_us,
        "floor_us": floor_us,
        "floor_ratio": floor_us / bare_us,
        "over_floor": framework_us / floor_us,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--batches", type=int, default=200)
    args = parser.parse_args(argv)
    r = measure(args.rounds, args.batches)
    print(
        f"consumer overhead: bare BatchProcessor {r['bare_us']:.1f} us/msg, "
        f"consumer() {r['framework_us']:.1f} us/msg, ratio {r['ratio']:.2f}x (target <= 2.0x)"
    )
    print(
        f"reference: the same observable work by hand {r['floor_us']:.1f} us/msg, "
        f"ratio {r['floor_ratio']:.2f}x the bare (the least the features cost)"
    )
    print(f"consumer() over that reference: ratio {r['over_floor']:.2f}x (the framework's own overhead)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
