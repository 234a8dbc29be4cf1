"""The retry budget holds under concurrent consumers (issue 12, item 9): four batches failing at once,
each reading the window while the others do (the read is slowed with a botocore hook on each consumer's
real DynamoDB client), retry within 10 % of what the same batches retry one after another."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from jobframework import envelope as wire
from jobframework.budget import RetryBudget
from jobframework.client import JobClient
from jobframework.consumer import Consumer, Outcome, RecordOutcome, consumer
from jobframework.envelope import lambda_record
from jobframework.testing import FakeLambdaContext, provision_fresh, receive_all
from tests.functional import jobs_under_test

BATCHES = 4
BATCH = 10
BUDGET = RetryBudget(fraction=0.2, floor=10)  # 40 first attempts allow max(10, 8) = 10 retries


def _world(
    jf_aws: Any, outcomes: list[RecordOutcome]
) -> tuple[Any, list[dict[str, Any]], Callable[[], Consumer]]:
    """A fresh topology with BATCHES batches of always-failing jobs received, and a consumer factory."""
    _, config = provision_fresh(jf_aws.endpoint_url, jobs_under_test.registry)
    sqs = jf_aws.client("sqs")
    client = JobClient(config, registry=jobs_under_test.registry, sqs_client=sqs)
    client.enqueue_many(
        [jobs_under_test.flaky.request({"name": f"f{n}", "fail_times": 99}) for n in range(BATCHES * BATCH)]
    )
    url = config.endpoints("default").url
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events = []
    for _ in range(BATCHES):
        got = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=BATCH, VisibilityTimeout=300, AttributeNames=["All"]
        )["Messages"]
        assert len(got) == BATCH
        events.append({"Records": [lambda_record(m, queue_arn=arn) for m in got]})

    def make() -> Consumer:
        handler = consumer(
            jobs_under_test.registry, config=config, sqs_client=sqs, listeners=[outcomes.append]
        )
        handler._features()
        handler.retry_budget = BUDGET
        return handler

    return (sqs, config), events, make


def _retried(outcomes: list[RecordOutcome]) -> int:
    return sum(1 for o in outcomes if o.outcome == Outcome.RETRIED)


def _budget_dead_letters(sqs: Any, config: Any) -> int:
    dead = receive_all(sqs, config.endpoints("default").dlq_url)
    return sum(1 for m in dead if wire.message_attribute(m, "jf-reason") == "budget")


def _explain(outcomes: list[RecordOutcome]) -> str:
    return repr(sorted({(o.outcome, str(o.reason), (o.error or "")[:60]) for o in outcomes}))


def test_four_concurrent_batches_retry_within_ten_percent_of_four_sequential_ones(jf_aws):
    jobs_under_test.calls.clear()
    sequential: list[RecordOutcome] = []
    (sqs, config), events, make = _world(jf_aws, sequential)
    for event in events:
        make()(event, FakeLambdaContext(900))
    assert _budget_dead_letters(sqs, config) == BATCHES * BATCH - _retried(sequential)

    concurrent: list[RecordOutcome] = []
    (sqs, config), events, make = _world(jf_aws, concurrent)
    handlers = [make() for _ in events]
    reads = []

    def slow_read(**_: Any) -> None:  # every batch reads the window before any has reserved
        reads.append(time.monotonic())
        time.sleep(0.3)

    for handler in handlers:
        assert handler.state is not None
        hooks = handler.state.client.meta.events
        hooks.register("before-send.dynamodb.Query", slow_read)
    start = threading.Barrier(BATCHES)

    def run(i: int) -> None:
        start.wait()
        handlers[i](events[i], FakeLambdaContext(900))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(BATCHES)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)

    assert len(reads) >= BATCHES  # each batch read the window, concurrently
    retried = _retried(concurrent)
    assert _retried(sequential) == BUDGET.floor, _explain(sequential)
    assert abs(retried - _retried(sequential)) <= 0.1 * _retried(sequential), _explain(concurrent)
    assert retried + _budget_dead_letters(sqs, config) == BATCHES * BATCH  # every record: one outcome
