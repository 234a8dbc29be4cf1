"""``enqueue_many`` of tracked, keyed jobs: its DynamoDB writes made together against one at a time.

A backfill of tracked jobs with a dedup key makes two DynamoDB writes a job around its
``SendMessageBatch`` (the key's claim before, the ``queued`` status after). Made one after another
they cost a round trip each; ``send_many`` makes up to ``WRITES_AT_ONCE`` at once. The embedded AWS
answers in well under a millisecond, so each DynamoDB request here waits ``--latency-ms`` first (a
botocore ``before-send`` hook), as a request to DynamoDB in the same region waits for the network.
Rounds alternate between one write at a time and ``WRITES_AT_ONCE``; the ratio of the medians of
the wall times is printed (lower is better).

    python bench/enqueue_many.py [--jobs 200] [--rounds 3] [--latency-ms 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")

from pydantic import BaseModel

from jobframework import sender
from jobframework.client import JobClient
from jobframework.jobs import JobRegistry, job
from jobframework.local.aws import EmbeddedAWS
from jobframework.testing import provision_fresh


class Row(BaseModel):
    n: int


registry = JobRegistry()


@job("bench.backfill", registry=registry, track=True, key=lambda r: f"row:{r.n}")
def backfill(row: Row) -> None:
    """Never run: the bench measures the enqueue."""


def seconds_to_enqueue(aws: EmbeddedAWS, jobs: int, latency_s: float, at_once: int) -> float:
    """Wall time of one ``enqueue_many`` of ``jobs`` on a fresh topology, ``at_once`` writes at a time."""
    sender.WRITES_AT_ONCE = at_once
    sender.reset_pool()
    _, config = provision_fresh(aws.endpoint_url, registry)
    dynamodb = aws.client("dynamodb")

    def network(**_: Any) -> None:
        time.sleep(latency_s)

    dynamodb.meta.events.register("before-send.dynamodb.*", network)
    client = JobClient(
        config, registry=registry, sqs_client=aws.client("sqs"), clients={"dynamodb": dynamodb}
    )
    requests = [backfill.request(Row(n=n), dedup_window=3600) for n in range(jobs)]
    started = time.perf_counter()
    results = client.enqueue_many(requests)
    elapsed = time.perf_counter() - started
    assert all(r.ok for r in results), [r.error for r in results if not r.ok][:3]
    return elapsed


def measure(jobs: int = 200, rounds: int = 3, latency_ms: float = 10.0) -> dict[str, float]:
    together = sender.WRITES_AT_ONCE
    one, many = [], []
    try:
        with EmbeddedAWS() as aws:
            seconds_to_enqueue(aws, 20, latency_ms / 1000, together)  # (warm up)
            for _ in range(rounds):
                one.append(seconds_to_enqueue(aws, jobs, latency_ms / 1000, 1))
                many.append(seconds_to_enqueue(aws, jobs, latency_ms / 1000, together))
    finally:
        sender.WRITES_AT_ONCE = together
        sender.reset_pool()
    one_s, many_s = statistics.median(one), statistics.median(many)
    return {"jobs": jobs, "at_once": together, "one_s": one_s, "many_s": many_s, "ratio": many_s / one_s}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency-ms", type=float, default=10.0)
    args = parser.parse_args(argv)
    r = measure(args.jobs, args.rounds, args.latency_ms)
    print(
        f"enqueue_many of {r['jobs']} tracked, keyed jobs ({args.latency_ms:g} ms a DynamoDB request): "
        f"one write at a time {r['one_s']:.2f} s, {r['at_once']:.0f} at once {r['many_s']:.2f} s"
    )
    print(f"ratio {r['ratio']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
