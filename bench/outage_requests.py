"""SQS requests per failed record during an outage, counted with the request hook.

On the embedded AWS: ``--jobs`` jobs whose downstream is down (each raises ``ConnectionError``) are
consumed by the real :func:`consumer` in batches of ten, twice: a first pass where each is retried
(the policy allows more attempts), and a pass over jobs with ``max_attempts=1`` where each is
dead-lettered ``exhausted``. Every SQS request the consumer's own client makes is counted with a
``before-call.sqs.*`` hook (the event source mapping's receives and deletes are the harness's and are
not counted). The figure is SQS requests per failed record; a consumer that settles each record on
its own makes one (a ``ChangeMessageVisibility`` or a ``SendMessage`` each). Target: at most 0.2.

    python bench/outage_requests.py [--jobs 50]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "CRITICAL")

from pydantic import BaseModel

from jobframework.local.aws import use_fake_credentials

BATCH = 10


class Call(BaseModel):
    n: int


def _registry() -> Any:
    from jobframework import RetryPolicy, job
    from jobframework.jobs import JobRegistry

    registry = JobRegistry()

    @job("outage.retried", registry=registry, retry=RetryPolicy(max_attempts=5, base_delay=30, max_delay=60))
    def retried(call: Call) -> None:
        raise ConnectionError("downstream unavailable")

    @job("outage.exhausted", registry=registry, retry=RetryPolicy(max_attempts=1))
    def exhausted(call: Call) -> None:
        raise ConnectionError("downstream unavailable")

    return registry


def measure(endpoint_url: str, client: Any, jobs: int) -> dict[str, float]:
    from jobframework.client import JobClient
    from jobframework.consumer import consumer
    from jobframework.jobs import Priority
    from jobframework.testing import consume_once, provision_fresh

    registry = _registry()
    _, config = provision_fresh(endpoint_url, registry)
    config = config.model_copy(update={"idempotency_table": None, "state_table": None})
    url = config.endpoints(Priority.DEFAULT).url
    own = client("sqs")  # the consumer's client: only its requests are counted
    counts: Counter[str] = Counter()

    def count(model: Any, **_: Any) -> None:
        counts[model.name] += 1

    own.meta.events.register("before-call.sqs.*", count)
    handler = consumer(registry, config=config, sqs_client=own)
    producer = JobClient(config, registry=registry, sqs_client=client("sqs"))
    harness = client("sqs")
    result: dict[str, float] = {}
    for name in ("outage.retried", "outage.exhausted"):
        counts.clear()
        failed = 0
        for start in range(0, jobs, BATCH):
            producer.enqueue_many(
                [registry.get(name).request(Call(n=n)) for n in range(start, min(jobs, start + BATCH))]
            )
            while True:
                records, _response = consume_once(handler, harness, url)
                if not records:
                    break
                failed += len(records)
        result[name] = sum(counts.values()) / max(1, failed)
        result[f"{name} records"] = failed
        result[f"{name} requests"] = sum(counts.values())
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--jobs", type=int, default=50)
    args = parser.parse_args(argv)
    logging.disable(logging.CRITICAL)
    use_fake_credentials()
    from jobframework.local.aws import EmbeddedAWS

    with EmbeddedAWS() as aws:
        r = measure(aws.endpoint_url, aws.client, args.jobs)
    for name, label in (("outage.retried", "retried"), ("outage.exhausted", "dead-lettered")):
        print(
            f"outage, {label}: {int(r[f'{name} requests'])} SQS requests for {int(r[f'{name} records'])} "
            f"failed records, {r[name]:.2f} per failed record (target <= 0.2; one a record settled alone)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
