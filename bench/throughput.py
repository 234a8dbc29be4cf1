"""Jobs per second end to end on the embedded AWS, against the raw boto3 ceiling and Celery.

- jobframework: enqueue_many (ten per SendMessageBatch), the event-source-mapping emulator,
  the real consumer, a no-op job; produced in waves of WAVE so the queue stays shallow.
- raw boto3 ceiling: SendMessageBatch, ReceiveMessage (10) and DeleteMessageBatch in one
  loop, no framework (the most a client can push through this endpoint): lean mode's floor.
- raw idempotent floor: the same loop plus, per message, the two DynamoDB writes idempotent
  execution needs (a conditional PutItem claim and an UpdateItem completion) on the same endpoint:
  idempotent mode's floor (issue 13: the framework at least 0.8x of it).
- Celery 5 with its SQS transport (kombu) on the same endpoint, a no-op task, one worker process
  with the solo pool, tuned: polling_interval=0.01 (the default 1 s throttles it badly locally).

Each loop runs ROUNDS times, the four one after the other in each round; jobs/s are the medians, and
each ratio the median of its rounds' (its two sides a moment apart). Prints jobs/s and both ratios;
never asserted. Run: .venv/bin/python bench/throughput.py
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from pydantic import BaseModel

from jobframework.client import EnqueueRequest, JobClient
from jobframework.consumer import consumer
from jobframework.jobs import JobRegistry, job
from jobframework.local.aws import EmbeddedAWS
from jobframework.local.emulator import Emulator, pollers_for
from jobframework.testing import provision_fresh

TOTAL = 400
WAVE = 50
ROUNDS = 3
"""Rounds of the four loops, one after the other in each: a ratio is the median of its rounds' (the
embedded AWS's rate drifts over a run; one round each read 0.78x to 0.99x for the same code)."""
bench_registry = JobRegistry()


class Noop(BaseModel):
    n: int


@job("bench.noop", priority="default", registry=bench_registry)
def noop(item: Noop) -> None:
    """Does nothing: the benchmark measures the framework."""


def raw_ceiling(sqs, url: str) -> float:
    started = time.perf_counter()
    done = 0
    while done < TOTAL:
        for _ in range(WAVE // 10):
            sqs.send_message_batch(
                QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": "{}"} for i in range(10)]
            )
        pending = WAVE
        while pending:
            got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0).get(
                "Messages", []
            )
            if got:
                sqs.delete_message_batch(
                    QueueUrl=url,
                    Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)],
                )
                pending -= len(got)
        done += WAVE
    return TOTAL / (time.perf_counter() - started)


def raw_idempotent_floor(sqs, dynamodb, url: str, table: str, tag: str) -> float:
    """The raw loop making idempotent mode's floor requests: per message a claim and a completion
    (of keys new to the table: ``tag`` sets each round's apart)."""
    started = time.perf_counter()
    done = 0
    while done < TOTAL:
        for b in range(WAVE // 10):
            sqs.send_message_batch(
                QueueUrl=url,
                Entries=[{"Id": str(i), "MessageBody": f"{tag}-{done + b * 10 + i}"} for i in range(10)],
            )
        pending = WAVE
        while pending:
            got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0).get(
                "Messages", []
            )
            for m in got:
                key = {"id": {"S": m["Body"]}}
                dynamodb.put_item(
                    TableName=table,
                    Item={**key, "status": {"S": "INPROGRESS"}},
                    ConditionExpression="attribute_not_exists(id)",
                )
                dynamodb.update_item(
                    TableName=table,
                    Key=key,
                    UpdateExpression="SET #s = :done",
                    ExpressionAttributeNames={"#s": "status"},
                    ExpressionAttributeValues={":done": {"S": "COMPLETED"}},
                )
            if got:
                sqs.delete_message_batch(
                    QueueUrl=url,
                    Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)],
                )
                pending -= len(got)
        done += WAVE
    return TOTAL / (time.perf_counter() - started)


def framework(aws, *, lean: bool = False) -> float:
    """Jobs/s of the framework; ``lean`` turns off idempotency (what Celery does not do either: no
    DynamoDB per job); the default is idempotent mode. The job is untracked (no status) either way."""
    topology, config = provision_fresh(aws.endpoint_url, bench_registry)
    if lean:
        config = config.model_copy(update={"state_table": None, "idempotency_table": None})
    sqs = aws.client("sqs")
    finished = [0]
    lock = threading.Lock()

    def count(outcome) -> None:
        with lock:
            finished[0] += 1

    handler = consumer(bench_registry, config=config, sqs_client=sqs, listeners=[count])
    emulator = Emulator(
        # The job's queue only, as the raw loops poll one queue (on AWS the pollers are not ours).
        pollers_for(config, topology, ["default"]),
        handler,
        sqs,
        idle_seconds=0.005,
        max_idle_seconds=0.02,
    )
    client = JobClient(config, registry=bench_registry, sqs_client=sqs)
    emulator.start()
    started = time.perf_counter()
    for wave in range(0, TOTAL, WAVE):
        client.enqueue_many([EnqueueRequest("bench.noop", {"n": n}) for n in range(wave, wave + WAVE)])
        while finished[0] < wave + WAVE // 2:  # keep the queue shallow
            time.sleep(0.002)
    while finished[0] < TOTAL:
        time.sleep(0.002)
    rate = TOTAL / (time.perf_counter() - started)
    emulator.stop(2)
    return rate


def make_celery_app(port: int, url: str, name: str):
    from celery import Celery

    app = Celery("bench", broker=f"sqs://testing:testing@127.0.0.1:{port}")
    app.conf.update(
        broker_transport_options={
            "region": "us-east-1",
            "is_secure": False,
            "polling_interval": 0.01,
            "predefined_queues": {name: {"url": url}},
        },
        task_default_queue=name,
        worker_enable_remote_control=False,
        worker_send_task_events=False,
        task_ignore_result=True,
        broker_connection_retry_on_startup=True,
    )

    @app.task(name="bench.noop")
    def celery_noop(n: int) -> None:
        """Does nothing."""

    return app


celery_app = (
    make_celery_app(int(os.environ["BENCH_CELERY_PORT"]), os.environ["BENCH_CELERY_URL"], "bench-celery")
    if os.environ.get("BENCH_CELERY_PORT")
    else None
)


def celery(aws, sqs, url: str, name: str) -> float:
    """A Celery worker process (solo pool, the default for one slot) against the same endpoint."""
    env = {
        **os.environ,
        "BENCH_CELERY_PORT": str(aws.port),
        "BENCH_CELERY_URL": url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "PYTHONPATH": os.getcwd(),
    }
    app = make_celery_app(aws.port, url, name)
    task = app.tasks["bench.noop"]
    worker = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("celery")),
            "-A",
            "bench.throughput:celery_app",
            "worker",
            "--pool",
            "solo",
            "--loglevel",
            "ERROR",
            "--without-heartbeat",
            "--without-mingle",
            "--without-gossip",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def depth() -> int:
        attrs = sqs.get_queue_attributes(
            QueueUrl=url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attrs["ApproximateNumberOfMessages"]) + int(attrs["ApproximateNumberOfMessagesNotVisible"])

    try:
        task.delay(-1)  # warm-up: wait until the worker consumes
        deadline = time.monotonic() + 30
        while depth() and time.monotonic() < deadline:
            time.sleep(0.05)
        started = time.perf_counter()
        for wave in range(0, TOTAL, WAVE):
            for n in range(wave, wave + WAVE):
                task.delay(n)
            while depth() > WAVE // 2:
                time.sleep(0.005)
        while depth():
            time.sleep(0.005)
        return TOTAL / (time.perf_counter() - started)
    finally:
        worker.terminate()
        worker.wait(10)


def main() -> None:
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    # moto in a process of its own, as Celery's worker is: the measured side shares no GIL with it.
    with EmbeddedAWS(separate_process=True) as aws:
        sqs = aws.client("sqs")
        raw_url = sqs.create_queue(QueueName="bench-raw")["QueueUrl"]
        dynamodb = aws.client("dynamodb")
        dynamodb.create_table(
            TableName="bench-floor",
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        runs: dict[str, list[float]] = {"floor": [], "ours": [], "ceiling": [], "lean": []}
        for n in range(ROUNDS):  # each ratio's two sides a moment apart, in every round
            runs["floor"].append(raw_idempotent_floor(sqs, dynamodb, raw_url, "bench-floor", tag=f"r{n}"))
            runs["ours"].append(framework(aws))
            runs["ceiling"].append(raw_ceiling(sqs, raw_url))
            runs["lean"].append(framework(aws, lean=True))
        ceiling, floor, ours, lean = (
            statistics.median(runs[k]) for k in ("ceiling", "floor", "ours", "lean")
        )
        idempotent = [o / f for o, f in zip(runs["ours"], runs["floor"], strict=True)]
        lean_ratios = [v / c for v, c in zip(runs["lean"], runs["ceiling"], strict=True)]
        print(f"raw boto3 ceiling     {ceiling:8.0f} jobs/s   (medians of {ROUNDS} rounds)")
        print(f"raw idempotent floor  {floor:8.0f} jobs/s   (that loop + a claim and a completion per job)")
        print(f"jobframework          {ours:8.0f} jobs/s   ratio to raw ceiling: {ours / ceiling:.2f}x")
        print(
            f"ratio {statistics.median(idempotent):.2f}x  idempotent jobframework vs the raw idempotent "
            f"floor (target >= 0.8x; rounds {', '.join(f'{r:.2f}' for r in idempotent)})"
        )
        print(
            f"jobframework (lean)   {lean:8.0f} jobs/s   ratio to raw ceiling: {lean / ceiling:.2f}x"
            "   (no idempotency records, no job status)"
        )
        print(
            f"ratio {statistics.median(lean_ratios):.2f}x  lean jobframework vs the raw ceiling "
            f"(target >= 0.9x; rounds {', '.join(f'{r:.2f}' for r in lean_ratios)})"
        )
        try:
            celery_url = sqs.create_queue(QueueName="bench-celery")["QueueUrl"]
            theirs = celery(aws, sqs, celery_url, "bench-celery")
            print(f"celery (solo, tuned)  {theirs:8.0f} jobs/s   jobframework / celery: {ours / theirs:.2f}x")
            print(f"                                        lean jobframework / celery: {lean / theirs:.2f}x")
        except Exception as exc:
            print(f"celery: skipped ({type(exc).__name__}: {exc})")


if __name__ == "__main__":
    main()
