"""The embedded AWS gives a message to one receiver at a time, and keeps a FIFO group at one receiver
at a time, as SQS does (jf dev's workers, two jf worker processes and the emulator poll one queue at
once)."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

from tests.functional.conftest_local import jf_aws  # noqa: F401 (the fixture)


def test_a_long_poll_never_takes_a_group_another_receiver_holds(jf_aws):  # noqa: F811
    """A receiver long-polls before a group's messages are visible (the queue delays them 1 s);
    another polls for them the moment they show. Whichever takes the group first, the other, looking
    again, must not take the rest while those are in flight (moto's own receive looked once, at its
    start)."""
    sqs = jf_aws.client("sqs")
    url = sqs.create_queue(
        QueueName=f"jf-group-{uuid.uuid4().hex[:8]}.fifo",
        Attributes={
            "FifoQueue": "true",
            "ContentBasedDeduplication": "true",
            "VisibilityTimeout": "60",
            "DelaySeconds": "1",
        },
    )["QueueUrl"]
    long_poll: list[Any] = []
    polling = threading.Thread(
        target=lambda: long_poll.extend(
            jf_aws.client("sqs")
            .receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=3)
            .get("Messages", [])
        )
    )
    polling.start()
    time.sleep(0.2)  # the long poll has begun: nothing visible yet
    entries = [{"Id": str(n), "MessageBody": f"m{n}", "MessageGroupId": "g"} for n in range(4)]
    sqs.send_message_batch(QueueUrl=url, Entries=entries)
    first: list[Any] = []
    deadline = time.monotonic() + 5
    while not first and not long_poll and time.monotonic() < deadline:  # the moment they show
        first = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=2, WaitTimeSeconds=0).get(
            "Messages", []
        )
    polling.join()
    # Whichever receiver the group showed to first holds it (the long poll now wakes when a delayed
    # message comes due, so it may be that one); the other must take none of it while it is in flight.
    # (The batch's messages show a moment apart, each delayed from its own send: the holder may have
    # come when only m0 showed, and then holds the group with m0 alone.)
    assert not (first and long_poll), (first, long_poll)
    held = first or long_poll
    taken = [m["Body"] for m in held]
    assert taken and taken == [f"m{n}" for n in range(len(taken))], taken

    client = jf_aws.client("sqs")  # once they are, the rest of the group comes, in order
    client.delete_message_batch(
        QueueUrl=url,
        Entries=[{"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]} for n, m in enumerate(held)],
    )
    rest = client.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get("Messages", [])
    assert [m["Body"] for m in rest] == [f"m{n}" for n in range(len(taken), 4)]


def test_receivers_polling_one_queue_at_once_never_take_the_same_message(jf_aws):  # noqa: F811
    """A trial's two jf worker processes each received one message within 25 ms: its job ran twice,
    and a concurrency cap's count went one over."""
    sqs = jf_aws.client("sqs")
    url = sqs.create_queue(
        QueueName=f"jf-race-{uuid.uuid4().hex[:8]}", Attributes={"VisibilityTimeout": "60"}
    )["QueueUrl"]
    for start in range(0, 200, 10):
        sqs.send_message_batch(
            QueueUrl=url, Entries=[{"Id": str(n), "MessageBody": f"m{n}"} for n in range(start, start + 10)]
        )
    taken: list[str] = []
    lock = threading.Lock()
    go = threading.Barrier(6)

    def receive() -> None:
        client = jf_aws.client("sqs")
        go.wait()
        while True:
            got = client.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0).get(
                "Messages", []
            )
            if not got:
                return
            with lock:
                taken.extend(m["MessageId"] for m in got)

    threads = [threading.Thread(target=receive) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(taken) == 200 and len(set(taken)) == 200, len(taken) - len(set(taken))
