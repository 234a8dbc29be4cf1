"""Wall time of a batch of I/O-bound jobs: ``consumer()`` against a bare Powertools BatchProcessor.

A batch of ten jobs, each waiting 100 ms on a simulated downstream (an HTTP call, an email API):
the bare ``BatchProcessor`` runs its record handler (parse the body, wait) one record after the
other, as Powertools does; ``consumer()`` runs the batch's records concurrently (an ``io`` lane).
No AWS call happens on the success path. Rounds alternate between the two; the ratio of the median
wall times is printed. Target: at most 0.2x.

    python bench/io_batch.py [--rounds 5] [--wait-ms 100]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from pydantic import BaseModel

from jobframework.consumer import consumer
from jobframework.envelope import Envelope
from jobframework.jobs import JobRegistry, job
from jobframework.testing import FakeLambdaContext, sqs_event
from jobframework.topology import QueueEndpoints, RuntimeConfig

ARN = "arn:aws:sqs:us-east-1:123456789012:bench-default"
BATCH = 10
WAIT = {"seconds": 0.1}


class Call(BaseModel):
    url: str


class BareEnvelope(BaseModel):
    v: int
    id: str
    type: str
    payload: Call
    payload_version: int
    key: str
    enqueued_at: str


def downstream() -> None:
    """The simulated downstream: answers after the wait."""
    time.sleep(WAIT["seconds"])


registry = JobRegistry()


@job("bench.call", registry=registry)
def call_downstream(c: Call) -> None:
    """Waits on the downstream, as a webhook or an email job does."""
    downstream()


def make_event() -> dict[str, Any]:
    return sqs_event(
        *(Envelope.new("bench.call", {"url": f"https://example.test/{i}"}) for i in range(BATCH)),
        queue_arn=ARN,
    )


def bare_handler() -> Any:
    processor = BatchProcessor(event_type=EventType.SQS)

    def record_handler(record: Any) -> None:
        BareEnvelope.model_validate_json(record.body)
        downstream()

    def handler(event: dict[str, Any], context: Any) -> Any:
        return process_partial_response(event, record_handler, processor, context)

    return handler


def framework_handler() -> Any:
    config = RuntimeConfig(
        queues={"default": QueueEndpoints(url="https://sqs/bench-default", dlq_url="https://sqs/dlq")}
    )
    return consumer(registry, config=config, sqs_client=object())  # type: ignore[arg-type]


def wall(handler: Any, event: dict[str, Any]) -> float:
    with contextlib.redirect_stdout(io.StringIO()):
        started = time.perf_counter()
        response = handler(event, FakeLambdaContext(900))
        elapsed = time.perf_counter() - started
    assert not response["batchItemFailures"], response
    return elapsed


def measure(rounds: int = 5, wait_ms: float = 100) -> dict[str, float]:
    WAIT["seconds"] = wait_ms / 1000
    event = make_event()
    bare, framework = bare_handler(), framework_handler()
    wall(framework, event)  # warm up: imports, the thread pool
    bare_runs, framework_runs = [], []
    for _ in range(rounds):
        bare_runs.append(wall(bare, event))
        framework_runs.append(wall(framework, event))
    bare_ms = statistics.median(bare_runs) * 1000
    framework_ms = statistics.median(framework_runs) * 1000
    return {"bare_ms": bare_ms, "framework_ms": framework_ms, "ratio": framework_ms / bare_ms}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--wait-ms", type=float, default=100)
    args = parser.parse_args(argv)
    r = measure(args.rounds, args.wait_ms)
    print(
        f"io batch ({BATCH} jobs waiting {args.wait_ms:g} ms each): "
        f"bare BatchProcessor {r['bare_ms']:.0f} ms, "
        f"consumer() {r['framework_ms']:.0f} ms, ratio {r['ratio']:.2f}x (target <= 0.2x)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
