"""The settler on the embedded AWS: a batch's verdicts applied together, in the fewest SQS requests.

Requests are counted, and faults injected, with botocore event hooks on the real SQS client.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from jobframework.consumer import DEFAULT_GATES, Admitted, Consumer, consumer
from jobframework.envelope import message_attribute
from jobframework.gates import release
from jobframework.testing import consume_once, receive_all

from . import jobs_under_test as Q
from .conftest import Runtime
from .jobs_under_test import Work, calls, registry


@contextmanager
def counted(client: Any) -> Iterator[Counter[str]]:
    """Every SQS operation ``client`` makes inside the block, by name."""
    seen: Counter[str] = Counter()

    def count(model: Any, **_: Any) -> None:
        seen[model.name] += 1

    client.meta.events.register("before-call.sqs.*", count)
    try:
        yield seen
    finally:
        client.meta.events.unregister("before-call.sqs.*", count)


def _own_consumer(rt: Runtime, jf_aws: Any, **options: Any) -> tuple[Consumer, Any]:
    sqs = jf_aws.client("sqs")  # the consumer's own client: only its requests are counted
    return consumer(registry, config=rt.config, sqs_client=sqs, **options), sqs


def test_a_batch_of_retries_is_one_visibility_request_and_of_dead_letters_one_send(rt, jf_aws):
    handler, sqs = _own_consumer(rt, jf_aws)
    rt.client.enqueue_many([Q.flaky.request(Work(name=f"f{n}", fail_times=1)) for n in range(4)])
    rt.client.enqueue_many([Q.declined.request(Work(name=f"d{n}")) for n in range(3)])
    rt.client.enqueue("t.ok", Work(name="fine"))
    with counted(sqs) as requests:
        records, response = consume_once(handler, rt.sqs, rt.url("default"))
    assert len(records) == 4 and len(response["batchItemFailures"]) == 4
    assert requests == Counter({"ChangeMessageVisibilityBatch": 1})
    with counted(sqs) as requests:
        records, response = consume_once(handler, rt.sqs, rt.url("high"))
    assert len(records) == 4 and response == {"batchItemFailures": []}
    assert requests == Counter({"SendMessageBatch": 1})
    letters = receive_all(rt.sqs, rt.dlq("high"))
    assert sorted(json.loads(m["Body"])["payload"]["name"] for m in letters) == ["d0", "d1", "d2"]
    assert {message_attribute(m, "jf-reason") for m in letters} == {"permanent"}
    assert calls["fine"] == 1


def test_a_dead_letter_the_dlq_refuses_comes_back_and_its_neighbours_settle(rt, jf_aws):
    heard: list[Any] = []
    handler, sqs = _own_consumer(rt, jf_aws, listeners=[heard.append])
    rt.client.enqueue_many([Q.declined.request(Work(name=f"d{n}")) for n in range(3)])

    def refuse_first(parsed: dict[str, Any], **_: Any) -> None:
        # SQS reports the first entry failed (as it does for a throttled or invalid entry).
        first = next(e for e in parsed["Successful"] if e["Id"] == "0")
        parsed["Successful"].remove(first)
        parsed["Failed"] = [{"Id": "0", "SenderFault": False, "Code": "InternalError", "Message": "injected"}]

    sqs.meta.events.register("after-call.sqs.SendMessageBatch", refuse_first)
    try:
        records, response = consume_once(handler, rt.sqs, rt.url("high"))
    finally:
        sqs.meta.events.unregister("after-call.sqs.SendMessageBatch", refuse_first)
    assert response["batchItemFailures"] == [{"itemIdentifier": records[0]["messageId"]}]
    dead = sorted(o.message_id for o in heard if o.outcome == "dead_lettered")
    assert dead == sorted(r["messageId"] for r in records[1:])  # the refused one is not told as settled


def test_a_gate_ends_a_record_with_its_verdict_and_the_others_run(rt, jf_aws):
    def hold_gate(admitted: Admitted, _consumer: Consumer) -> Any:
        if admitted.payload.name.startswith("hold"):
            return release(admitted.delivery, 0, why="held by the test's gate")
        return None

    handler, _sqs = _own_consumer(rt, jf_aws, gates=[*DEFAULT_GATES, hold_gate])
    rt.client.enqueue_many([Q.ok.request(Work(name="hold-1")), Q.ok.request(Work(name="go-1"))])
    records, response = consume_once(handler, rt.sqs, rt.url("high"))
    assert len(records) == 2 and response == {"batchItemFailures": []}
    assert calls == Counter({"go-1": 1})
    (copy,) = receive_all(rt.sqs, rt.url("high"))  # handed back as a fresh copy, not an attempt
    assert json.loads(copy["Body"])["payload"]["name"] == "hold-1"
    assert message_attribute(copy, "jf-executions") == "0"
