"""AWS requests per successful job, and US dollars per million jobs, measured end to end, per mode,
against each mode's floor.

Runs no-op jobs on the embedded AWS: enqueue with :meth:`JobClient.enqueue_many` in rounds of
``--batch`` (default 10, one event-source-mapping batch), consume each round with :func:`consumer`
through :func:`jobframework.testing.consume_once` (which stands in for the event source mapping: one
ReceiveMessage per batch, one DeleteMessageBatch for the batch's successes). Every AWS request of every
botocore client made during the run is counted with a ``before-call.*.*`` event hook, by phase
(producer, consumer, event source mapping).

Modes (issue 13's floors, per job, batches of ten): *lean* (no per-job record: 0.1 SendMessageBatch,
0.1 ReceiveMessage, 0.1 DeleteMessageBatch, 0.1 Lambda invocation), *idempotent* (lean + 2 DynamoDB
writes: claim and completion), *tracked* (lean + 1 write: the status at enqueue), *tracked +
idempotent* (lean + 3), *deduplicated* (tracked with an enqueue key: lean + 1, the marker and the
status being one item). ``ratio to floor`` compares the request charges (SQS, DynamoDB, Lambda
requests, S3), not Lambda's GB-seconds, which are the job's own.

What a deployment adds and this run does not see is listed under the table: the event source
mapping's empty long polls (a fixed cost per queue, not per job), CloudWatch Logs/EMF ingestion, data
transfer, free tiers.

    python bench/cost.py [--jobs 200] [--batch 10] [--duration-ms 100] [--memory-mb 512]
                         [--modes lean,tracked]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "ERROR")
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")

import botocore.session
from pydantic import BaseModel

from jobframework.local.aws import use_fake_credentials

PRICES_AS_OF = "2025-06 (AWS public pricing pages, us-east-1, list prices, no free tier)"
PRICES_USD: dict[str, float] = {
    "sqs_request": 0.40 / 1e6,  # SQS standard queue, per request (each 64 KB chunk of a payload)
    "dynamodb_wru": 0.625 / 1e6,  # DynamoDB on-demand, per write request unit (1 KB)
    "dynamodb_rru": 0.125 / 1e6,  # DynamoDB on-demand, per read request unit (4 KB, strongly consistent)
    "lambda_request": 0.20 / 1e6,  # Lambda, per invocation
    "lambda_gb_second": 0.0000166667,  # Lambda x86_64, per GB-second
    "s3_put": 0.005 / 1e3,  # S3 Standard PUT/COPY/POST/LIST, per request
    "s3_get": 0.0004 / 1e3,  # S3 Standard GET, per request
    "scheduler_invocation": 1.00 / 1e6,  # EventBridge Scheduler, per invocation (delays > 15 min)
}
"""The one price table. Check it against https://aws.amazon.com/<service>/pricing/ when you quote it."""

BATCH_ITEMS = "BatchWriteItem items"
"""A pseudo-operation: the items of BatchWriteItem calls, each billed as a write (one WRU up to 1 KB)."""
DYNAMODB_WRITES = {"PutItem", "UpdateItem", "DeleteItem", BATCH_ITEMS, "TransactWriteItems"}
DYNAMODB_READS = {"GetItem", "Query", "BatchGetItem", "Scan", "TransactGetItems"}
HARNESS_ONLY = {("sqs", "GetQueueAttributes")}
"""Calls ``consume_once`` makes to build Lambda records; a real event source mapping does not bill them."""

PRODUCER, CONSUMER, ESM = "producer", "consumer", "event source mapping"


class Noop(BaseModel):
    n: int = 0


@dataclass
class Counts:
    """Requests by (phase, service, operation)."""

    calls: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    phase: str = PRODUCER

    def hook(self, event_name: str, **kwargs: Any) -> None:
        # event_name is "before-call.<service>.<Operation>"
        _before_call, service, operation = event_name.split(".", 2)
        self.calls[(self.phase, service, operation)] += 1

    def items_hook(self, params: dict[str, Any], **kwargs: Any) -> None:
        """BatchWriteItem is billed per item, not per call: count its items too."""
        items = sum(len(requests) for requests in params.get("RequestItems", {}).values())
        self.calls[(self.phase, "dynamodb", BATCH_ITEMS)] += items


@contextmanager
def counting(counts: Counts) -> Iterator[None]:
    """Register the hook on every botocore client created inside the block."""
    original = botocore.session.Session.create_client

    def create_client(self: botocore.session.Session, *args: Any, **kwargs: Any) -> Any:
        client = original(self, *args, **kwargs)
        client.meta.events.register("before-call.*.*", counts.hook)
        client.meta.events.register("before-parameter-build.dynamodb.BatchWriteItem", counts.items_hook)
        return client

    botocore.session.Session.create_client = create_client  # type: ignore[method-assign]
    try:
        yield
    finally:
        botocore.session.Session.create_client = original  # type: ignore[method-assign]


@dataclass
class Scenario:
    name: str
    jobs: int
    invocations: int
    calls: Counter[tuple[str, str, str]]
    mode: Mode

    def per_job(self, service: str | None = None, operations: set[str] | None = None) -> float:
        total = sum(
            n
            for (_, svc, op), n in self.calls.items()
            if (svc, op) not in HARNESS_ONLY
            and (service is None or svc == service)
            and (operations is None or op in operations)
        )
        return total / self.jobs

    def billed_requests(self) -> float:
        """Billed units per job: SQS requests, DynamoDB write and read units, Lambda invocations, S3."""
        ddb = self.per_job("dynamodb", DYNAMODB_WRITES | DYNAMODB_READS) - self.per_job(
            "dynamodb", {"BatchWriteItem"}
        )
        return self.per_job("sqs") + ddb + self.invocations / self.jobs + self.per_job("s3")

    def request_usd(self) -> float:
        """Request charges per million jobs (no GB-seconds): what ``ratio to floor`` compares."""
        return sum(self.cost_per_million(0.0, 0).values())

    def cost_per_million(self, duration_ms: float, memory_mb: int) -> dict[str, float]:
        p = PRICES_USD
        invocations = self.invocations / self.jobs
        return {
            "SQS": self.per_job("sqs") * p["sqs_request"] * 1e6,
            "DynamoDB": (
                self.per_job("dynamodb", DYNAMODB_WRITES) * p["dynamodb_wru"]
                + self.per_job("dynamodb", DYNAMODB_READS) * p["dynamodb_rru"]
            )
            * 1e6,
            "Lambda": (
                invocations * p["lambda_request"]
                + invocations * (duration_ms / 1000) * (memory_mb / 1024) * p["lambda_gb_second"]
            )
            * 1e6,
            "S3": (
                self.per_job("s3", {"PutObject"}) * p["s3_put"]
                + self.per_job("s3", {"GetObject"}) * p["s3_get"]
            )
            * 1e6,
        }


@dataclass(frozen=True)
class Mode:
    """One way of running jobs, and its floor: the DynamoDB writes per job the guarantee needs."""

    name: str
    idempotency: bool
    track: bool
    dedup: bool
    floor_writes: int


MODES = (
    Mode("lean", idempotency=False, track=False, dedup=False, floor_writes=0),
    Mode("idempotent", idempotency=True, track=False, dedup=False, floor_writes=2),
    Mode("tracked", idempotency=False, track=True, dedup=False, floor_writes=1),
    Mode("tracked + idempotent", idempotency=True, track=True, dedup=False, floor_writes=3),
    Mode("deduplicated", idempotency=False, track=True, dedup=True, floor_writes=1),
)
FLOOR_SQS = 0.3
"""SQS requests per job at the floor: 0.1 SendMessageBatch, 0.1 ReceiveMessage, 0.1 DeleteMessageBatch."""
FLOOR_INVOCATIONS = 0.1


def floor_usd(mode: Mode) -> float:
    """The mode's floor in request charges, US dollars per million jobs."""
    p = PRICES_USD
    return (FLOOR_SQS * p["sqs_request"] + mode.floor_writes * p["dynamodb_wru"]) * 1e6 + (
        FLOOR_INVOCATIONS * p["lambda_request"] * 1e6
    )


def floor_requests(mode: Mode) -> float:
    return FLOOR_SQS + mode.floor_writes + FLOOR_INVOCATIONS


def run(mode: Mode, *, jobs: int, batch: int, endpoint_url: str) -> Scenario:
    import boto3

    from jobframework.client import JobClient
    from jobframework.consumer import consumer
    from jobframework.jobs import JobRegistry, Priority, job
    from jobframework.local.aws import REGION
    from jobframework.testing import consume_once, provision_fresh

    registry = JobRegistry()

    @job("bench.noop", priority=Priority.DEFAULT, registry=registry, track=mode.track)
    def noop(payload: Noop) -> None:
        return None

    _, config = provision_fresh(endpoint_url, registry)
    if not mode.idempotency:
        config = config.model_copy(update={"idempotency_table": None})
    url = config.endpoints(Priority.DEFAULT).url
    counts = Counts()
    with counting(counts):
        session = boto3.Session(region_name=REGION)
        producer = JobClient(
            config, registry=registry, sqs_client=session.client("sqs", endpoint_url=endpoint_url)
        )
        handler = consumer(
            registry, config=config, sqs_client=session.client("sqs", endpoint_url=endpoint_url)
        )
        esm_sqs = session.client("sqs", endpoint_url=endpoint_url)
        sent = invocations = consumed = 0
        while sent < jobs:
            counts.phase = PRODUCER
            size = min(batch, jobs - sent)
            keys = [f"bench:{mode.name}:{sent + i}" if mode.dedup else None for i in range(size)]
            results = producer.enqueue_many(
                [noop.request(Noop(n=sent + i), key=keys[i]) for i in range(size)]
            )
            assert not [r.error for r in results if r.error], results
            sent += size
            while consumed < sent:  # no empty receive: an idle queue's polls are a fixed cost, not per job
                counts.phase = ESM
                records, response = consume_once(handler, esm_sqs, url, max_messages=batch)
                consumed += len(records)
                invocations += 1 if records else 0
                assert not response["batchItemFailures"], response
    # ``consume_once`` counts under ESM; the handler's own calls happen inside it: split them apart.
    calls = Counter[tuple[str, str, str]]()
    for (phase, service, operation), n in counts.calls.items():
        esm_call = service == "sqs" and operation in (
            "ReceiveMessage",
            "DeleteMessageBatch",
            "GetQueueAttributes",
        )
        calls[
            (ESM if esm_call and phase == ESM else CONSUMER if phase == ESM else phase, service, operation)
        ] += n
    return Scenario(name=mode.name, jobs=jobs, invocations=invocations, calls=calls, mode=mode)


def table(scenarios: list[Scenario], *, duration_ms: float, memory_mb: int) -> str:
    operations = sorted({(phase, svc, op) for s in scenarios for (phase, svc, op) in s.calls})
    header = f"| requests per job | {' | '.join(s.name for s in scenarios)} |"
    lines = [header, "|---|" + "---:|" * len(scenarios)]
    for phase, svc, op in operations:
        note = " (harness only, not billed)" if (svc, op) in HARNESS_ONLY else ""
        values = " | ".join(f"{s.calls[(phase, svc, op)] / s.jobs:.2f}" for s in scenarios)
        lines.append(f"| {phase}: {svc} {op}{note} | {values} |")
    lines.append(
        "| Lambda invocations | " + " | ".join(f"{s.invocations / s.jobs:.2f}" for s in scenarios) + " |"
    )
    lines.append("")
    lines.append(
        f"| USD per million jobs ({duration_ms:g} ms, {memory_mb} MB) | "
        + " | ".join(s.name for s in scenarios)
        + " |"
    )
    lines.append("|---|" + "---:|" * len(scenarios))
    costs = [s.cost_per_million(duration_ms, memory_mb) for s in scenarios]
    for item in costs[0]:
        lines.append(f"| {item} | " + " | ".join(f"{c[item]:.2f}" for c in costs) + " |")
    lines.append("| **total** | " + " | ".join(f"**{sum(c.values()):.2f}**" for c in costs) + " |")
    return "\n".join(lines)


def floors(scenarios: list[Scenario]) -> str:
    """Each mode against its floor: billed requests per job, request charges, and the ratio."""
    lines = [
        "| mode | billed requests per job | floor | USD per million (requests) | floor |",
        "|---|---:|---:|---:|---:|",
    ]
    for s in scenarios:
        lines.append(
            f"| {s.name} | {s.billed_requests():.2f} | {floor_requests(s.mode):.2f} | "
            f"{s.request_usd():.2f} | {floor_usd(s.mode):.2f} |"
        )
    lines.append("")
    for s in scenarios:
        lines.append(f"ratio to floor {s.request_usd() / floor_usd(s.mode):.2f}x  {s.name}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=200, help="successful jobs per mode")
    parser.add_argument("--batch", type=int, default=10, help="jobs per enqueue round and per batch (1-10)")
    parser.add_argument("--duration-ms", type=float, default=100.0, help="billed duration of one invocation")
    parser.add_argument("--memory-mb", type=int, default=512, help="consumer memory (the topology's default)")
    parser.add_argument(
        "--modes",
        default=",".join(m.name for m in MODES),
        help=f"comma-separated, of: {', '.join(m.name for m in MODES)}",
    )
    args = parser.parse_args(argv)
    by_name = {m.name: m for m in MODES}
    wanted = [name.strip() for name in args.modes.split(",") if name.strip()]
    unknown = [name for name in wanted if name not in by_name]
    if unknown:
        parser.error(f"unknown mode(s) {', '.join(unknown)}; choose from: {', '.join(by_name)}")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    use_fake_credentials()

    from jobframework.local.aws import EmbeddedAWS

    with EmbeddedAWS() as aws:
        scenarios = [
            run(by_name[name], jobs=args.jobs, batch=args.batch, endpoint_url=aws.endpoint_url)
            for name in wanted
        ]
    print(f"{args.jobs} no-op jobs per mode, batches of {args.batch}; prices as of {PRICES_AS_OF}\n")
    print(table(scenarios, duration_ms=args.duration_ms, memory_mb=args.memory_mb))
    print()
    print(floors(scenarios))
    print(
        "\nNot counted: the event source mapping's empty long polls (about 5 pollers x 3 ReceiveMessage a "
        "minute per idle queue, a fixed cost), CloudWatch Logs and EMF ingestion, X-Ray, data transfer, "
        "free tiers; DynamoDB reads priced as strongly consistent (1 RRU), items under 1 KB (1 WRU)."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
