"""Ordered jobs are sent to their FIFO lane with a message group and a deduplication id."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from jobframework.client import EnqueueRequest, JobClient
from jobframework.config import RuntimeConfig
from jobframework.errors import ConfigurationError, EnqueueOptionError
from jobframework.jobs import JobRegistry
from jobframework.testing import provision_fresh, receive_all

from . import fifo_jobs


@pytest.fixture
def fifo(jf_aws: Any) -> tuple[RuntimeConfig, Any, JobClient]:
    _, config = provision_fresh(jf_aws.endpoint_url, fifo_jobs.registry)
    sqs = jf_aws.client("sqs")
    client = JobClient(
        config, registry=fifo_jobs.registry, sqs_client=sqs, clients={"dynamodb": jf_aws.client("dynamodb")}
    )
    return config, sqs, client


def _received(sqs: Any, url: str) -> list[dict[str, Any]]:
    """Every message of the queue, deleting each receive's (a FIFO group stays blocked while one of its
    messages is in flight)."""
    messages: list[dict[str, Any]] = []
    while got := list(receive_all(sqs, url, attempts=1)):
        messages.extend(got)
        for m in got:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    return messages


def test_an_ordered_job_goes_to_the_fifo_lane_with_its_group_and_the_hash_of_its_id(fifo):
    config, sqs, client = fifo
    first = client.enqueue(fifo_jobs.apply, {"account_id": "acct-1", "seq": 1})
    keyed = client.enqueue(fifo_jobs.apply, {"account_id": "acct-2", "seq": 1}, key="acct-2:1")

    url = config.endpoints("default-fifo").url
    assert url.endswith(".fifo")
    got = {json.loads(m["Body"])["id"]: m["Attributes"] for m in _received(sqs, url)}
    assert got[first.id]["MessageGroupId"] == "acct-1"
    assert got[first.id]["MessageDeduplicationId"] == hashlib.sha256(first.id.encode()).hexdigest()
    assert got[keyed.id]["MessageGroupId"] == "acct-2"
    assert got[keyed.id]["MessageDeduplicationId"] == hashlib.sha256(keyed.id.encode()).hexdigest()
    assert _received(sqs, config.endpoints("default").url) == []


def test_a_second_job_of_one_key_is_delivered_and_its_status_ends_as_a_duplicate(fifo):
    """A producer's retry sent one event twice (two jobs of one key, no dedup window): SQS dropped the
    second (its deduplication id was the key's hash) and its status read ``queued`` for seven days."""
    from jobframework import consumer
    from jobframework.status import JobState
    from jobframework.testing import consume_once

    config, sqs, client = fifo
    fifo_jobs.ledger.clear()
    event = {"account_id": "acct-9", "seq": 4}
    first, again = client.enqueue(fifo_jobs.post, event), client.enqueue(fifo_jobs.post, event)
    assert first.id != again.id and not again.duplicate
    handler = consumer(fifo_jobs.registry, config=config, sqs_client=sqs)
    url = config.endpoints("default-fifo").url
    while consume_once(handler, sqs, url)[0]:
        pass
    assert len(fifo_jobs.ledger) == 1  # the key ran once
    statuses = [client.status(job.id) for job in (first, again)]
    assert [(s.status, s.reason) for s in statuses if s is not None] == [
        (JobState.SUCCEEDED, None),
        (JobState.SUCCEEDED, "duplicate: key post:acct-9:4 had already completed, so this job did not run"),
    ]


def test_enqueue_many_sends_a_groups_jobs_in_order_in_batches(fifo):
    config, sqs, client = fifo
    requests = [EnqueueRequest(fifo_jobs.apply, {"account_id": f"acct-{n % 2}", "seq": n}) for n in range(14)]
    results = client.enqueue_many(requests)
    assert all(r.ok for r in results)

    seen: dict[str, list[int]] = {}
    for m in _received(sqs, config.endpoints("default-fifo").url):
        seen.setdefault(m["Attributes"]["MessageGroupId"], []).append(json.loads(m["Body"])["payload"]["seq"])
    assert seen == {"acct-0": list(range(0, 14, 2)), "acct-1": list(range(1, 14, 2))}


def test_a_job_that_is_not_ordered_keeps_its_standard_queue(fifo):
    config, sqs, client = fifo
    client.enqueue(fifo_jobs.audit, {"account_id": "acct-1", "seq": 1})
    (message,) = _received(sqs, config.endpoints("default").url)
    assert "MessageGroupId" not in message["Attributes"]


def test_a_delay_or_debounce_on_an_ordered_job_is_refused_saying_why(fifo):
    # (the caller's options: EnqueueOptionError, as every bad enqueue option; jf enqueue exits 2)
    _, _, client = fifo
    with pytest.raises(EnqueueOptionError, match="cannot take delay=: a FIFO queue cannot delay one message"):
        client.enqueue(fifo_jobs.apply, {"account_id": "a", "seq": 1}, delay=5)
    with pytest.raises(EnqueueOptionError, match="cannot take debounce="):
        client.enqueue(fifo_jobs.apply, {"account_id": "a", "seq": 1}, key="k", debounce=5)
    with pytest.raises(EnqueueOptionError, match="not tenant="):
        client.enqueue(fifo_jobs.apply, {"account_id": "a", "seq": 1}, tenant="t")
    with pytest.raises(EnqueueOptionError, match="group= applies to ordered jobs"):
        client.enqueue(fifo_jobs.audit, {"account_id": "a", "seq": 1}, group="g")
    with pytest.raises(EnqueueOptionError, match=r"group='b' is not the group .* \('a'\): leave group= out"):
        client.enqueue(fifo_jobs.apply, {"account_id": "a", "seq": 1}, group="b")  # a's events, out of order


def test_a_catalog_producer_sends_an_ordered_job_with_the_group_it_gives(fifo):
    config, sqs, _ = fifo
    producer = JobClient(config, registry=JobRegistry(), sqs_client=sqs)
    with pytest.raises(ConfigurationError, match="pass group="):
        producer.enqueue("ledger.apply", {"account_id": "acct-9", "seq": 1})
    sent = producer.enqueue("ledger.apply", {"account_id": "acct-9", "seq": 1}, group="acct-9")
    (message,) = _received(sqs, config.endpoints("default-fifo").url)
    assert json.loads(message["Body"])["id"] == sent.id
    assert message["Attributes"]["MessageGroupId"] == "acct-9"


def test_jf_enqueue_sends_an_ordered_job_known_from_the_catalog_with_its_group(fifo):
    from tests.functional.conftest_local import FAKE_CREDENTIALS, invoke

    config, sqs, _ = fifo
    assert config.topology_parameter is not None
    env = {
        **FAKE_CREDENTIALS,
        **config.to_env(),
        "JF_JOBS": "",
        "JF_TOPOLOGY_PARAMETER": config.topology_parameter,
    }
    args = ["enqueue", "ledger.apply", '{"account_id": "acct-7", "seq": 1}']
    refused = invoke(args, env)
    assert refused.exit_code != 0 and "pass group=" in refused.output
    sent = invoke([*args, "--group", "acct-7"], env)
    assert sent.exit_code == 0, sent.output
    (message,) = _received(sqs, config.endpoints("default-fifo").url)
    assert json.loads(message["Body"])["id"] == sent.stdout.strip()
    assert message["Attributes"]["MessageGroupId"] == "acct-7"
