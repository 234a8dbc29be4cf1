"""A rate bucket that several consumers update at once: every acquisition ends in a token or a turn,
none in "the bucket kept changing" (a trial saw records handed back as "limits unavailable" with
three consumers at rate="5/second")."""

from __future__ import annotations

import threading
import time

from jobframework.flow.rate_bucket import RateLimit
from jobframework.state import StateStore


def test_six_consumers_taking_turns_of_one_bucket_at_once_all_get_one(flow):
    consumers = [RateLimit(StateStore(flow.config.state_table, flow.dynamodb)) for _ in range(6)]
    start = threading.Barrier(len(consumers), timeout=30)
    turns: list[float] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def take(limit: RateLimit) -> None:
        start.wait()
        for _ in range(12):
            try:
                wait = limit.acquire("limit#contended", 5, 1, time.time())
            except Exception as exc:
                with lock:
                    errors.append(exc)
                continue
            with lock:
                turns.append(wait)

    before = time.time()
    threads = [threading.Thread(target=take, args=(c,)) for c in consumers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors[:3]
    assert len(turns) == 6 * 12
    # Each acquisition moved the bucket one interval (0.2 s): 72 tokens and turns, none lost or doubled.
    item = flow.dynamodb.get_item(
        TableName=flow.config.state_table,
        Key={"pk": {"S": "limit#contended"}, "sk": {"S": "rate"}},
        ConsistentRead=True,
    )["Item"]
    assert before + 72 * 0.2 <= float(item["tat"]["N"]) <= time.time() + 72 * 0.2
