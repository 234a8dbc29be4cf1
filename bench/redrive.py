"""Messages per second of `jf dlq redrive` against a plain boto3 receive/send/delete loop.

Both run on the embedded AWS, from the same DLQ to the same source queue, in rounds of
ROUND messages (queues kept shallow: moto slows as a queue deepens). Prints the ratio;
target: redrive >= 0.8x the loop. Run: .venv/bin/python bench/redrive.py
"""

from __future__ import annotations

import time

from jobframework.dlq import DeadLetters
from jobframework.envelope import Envelope, string_attribute
from jobframework.local.aws import EmbeddedAWS
from jobframework.testing import provision_fresh

ROUND = 100
ROUNDS = 3


def fill(sqs, dlq_url: str, source: str) -> None:
    for start in range(0, ROUND, 10):
        sqs.send_message_batch(
            QueueUrl=dlq_url,
            Entries=[
                {
                    "Id": str(i),
                    "MessageBody": Envelope.new("crm.sync", {"account_id": f"a-{start + i}"}).to_body(),
                    "MessageAttributes": {
                        "jf-type": string_attribute("crm.sync"),
                        "jf-reason": string_attribute("exhausted"),
                        "jf-source": string_attribute(source),
                    },
                }
                for i in range(10)
            ],
        )


def drain(sqs, url: str) -> None:
    while True:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0).get("Messages", [])
        if not got:
            return
        sqs.delete_message_batch(
            QueueUrl=url,
            Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)],
        )


def plain_loop(sqs, dlq_url: str, url: str) -> int:
    moved = 0
    while True:
        got = sqs.receive_message(
            QueueUrl=dlq_url, MaxNumberOfMessages=10, WaitTimeSeconds=0, MessageAttributeNames=["All"]
        ).get("Messages", [])
        if not got:
            return moved
        for m in got:
            sqs.send_message(QueueUrl=url, MessageBody=m["Body"])
            sqs.delete_message(QueueUrl=dlq_url, ReceiptHandle=m["ReceiptHandle"])
            moved += 1


def main() -> None:
    with EmbeddedAWS() as aws:
        _, config = provision_fresh(aws.endpoint_url)
        sqs = aws.client("sqs")
        ep = config.endpoints("default")
        letters = DeadLetters(config, sqs, empty_receives=1)
        timings = {"jf dlq redrive": 0.0, "boto3 loop": 0.0}
        for _ in range(ROUNDS):
            fill(sqs, ep.dlq_url, ep.name)
            t = time.perf_counter()
            moved = letters.redrive("default").moved
            timings["jf dlq redrive"] += time.perf_counter() - t
            assert moved == ROUND, moved
            drain(sqs, ep.url)
            fill(sqs, ep.dlq_url, ep.name)
            t = time.perf_counter()
            assert plain_loop(sqs, ep.dlq_url, ep.url) == ROUND
            timings["boto3 loop"] += time.perf_counter() - t
            drain(sqs, ep.url)
    rates = {name: ROUND * ROUNDS / seconds for name, seconds in timings.items()}
    for name, rate in rates.items():
        print(f"{name:16s} {rate:8.0f} msg/s")
    print(
        f"ratio redrive / boto3 loop: {rates['jf dlq redrive'] / rates['boto3 loop']:.2f}x (target >= 0.8x)"
    )


if __name__ == "__main__":
    main()
