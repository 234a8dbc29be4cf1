"""A dead letter of a message at the largest size the client sends keeps its signature, its trace and
all its reason attributes (issue 12, item 8): the client keeps room for them at enqueue."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from jobframework import envelope as wire
from jobframework.client import MAX_ENQUEUE_BYTES, EnqueueRequest, JobClient
from jobframework.consumer import consumer
from jobframework.dead_letter import KEPT_ATTRIBUTES, REASON_ATTRIBUTES_BYTES
from jobframework.dlq import REASON_ATTRIBUTES, DeadLetters
from jobframework.errors import PayloadTooLargeError
from jobframework.testing import receive_all
from jobframework.tracing import TraceContext, continue_trace, new_trace
from tests.functional import jobs_under_test
from tests.functional.conftest import Runtime


@pytest.fixture
def signed(rt: Runtime, jf_aws: Any) -> Runtime:
    """The runtime with signing on and no payload bucket (nothing is offloaded: the limit is SQS's)."""
    name = f"/jf/test/{uuid.uuid4().hex[:8]}/signing-keys"
    keys = {"current": "k1", "keys": {"k1": "secret-0123456789abcdef"}}
    jf_aws.client("ssm").put_parameter(Name=name, Value=json.dumps(keys), Type="SecureString")
    rt.config = rt.config.model_copy(update={"signing_keys": f"ssm:{name}", "payload_bucket": None})
    rt.client = JobClient(
        rt.config, registry=jobs_under_test.registry, sqs_client=rt.sqs, session=jf_aws.session()
    )
    rt.handler = consumer(jobs_under_test.registry, config=rt.config, sqs_client=rt.sqs)
    return rt


def _name_for(client: JobClient, size: int) -> str:
    """A ``name`` that makes the t.declined message exactly ``size`` bytes, signature included."""
    base = client.prepare(EnqueueRequest("t.declined", {"name": ""}))
    return "n" * (size - wire.message_size(base.body, base.attributes))


def test_the_largest_signed_traced_message_dead_letters_with_everything_kept(signed: Runtime):
    rt = signed
    trace = TraceContext(new_trace().traceparent, tracestate="vendor=" + "s" * 200)
    with continue_trace(trace):
        name = _name_for(rt.client, MAX_ENQUEUE_BYTES)
        prepared = rt.client.prepare(EnqueueRequest("t.declined", {"name": name}))
        assert wire.message_size(prepared.body, prepared.attributes) == MAX_ENQUEUE_BYTES
        with pytest.raises(PayloadTooLargeError, match="reason attributes"):
            rt.client.enqueue("t.declined", {"name": name + "n"})  # one byte more: refused, nothing sent
        rt.client.enqueue("t.declined", {"name": name})
    (sent,) = receive_all(rt.sqs, rt.url("high"))
    rt.sqs.change_message_visibility(
        QueueUrl=rt.url("high"), ReceiptHandle=sent["ReceiptHandle"], VisibilityTimeout=0
    )

    rt.consume("high")  # PermanentError whose message is the whole name: jf-error is cut, nothing else

    (dead,) = receive_all(rt.sqs, rt.dlq("high"))
    assert dead["Body"] == sent["Body"]
    kept = {k: wire.message_attribute(dead, k) for k in KEPT_ATTRIBUTES}
    assert kept == {k: wire.message_attribute(sent, k) for k in KEPT_ATTRIBUTES}
    assert kept["jf-sig"] and kept["jf-kid"] == "k1"
    assert kept["traceparent"] == trace.traceparent and kept["tracestate"] == trace.tracestate
    assert all(wire.message_attribute(dead, k) for k in REASON_ATTRIBUTES)
    assert wire.message_attribute(dead, "jf-reason") == "permanent"
    assert wire.message_size(dead["Body"], dead["MessageAttributes"]) <= wire.SQS_MAX_MESSAGE_BYTES

    # Redriven, it still verifies: it fails as itself again (permanent), never as a bad signature.
    rt.sqs.change_message_visibility(
        QueueUrl=rt.dlq("high"), ReceiptHandle=dead["ReceiptHandle"], VisibilityTimeout=0
    )
    assert DeadLetters(rt.config, rt.sqs).redrive("high").moved == 1
    rt.consume("high")
    (again,) = receive_all(rt.sqs, rt.dlq("high"))
    assert wire.message_attribute(again, "jf-reason") == "permanent"
    assert wire.message_attribute(again, "traceparent") == trace.traceparent


def test_the_room_kept_covers_the_longest_reason_attributes():
    longest = {
        "jf-reason": "payload-missing",
        "jf-error": "\U0001f4a5" * 100,  # cut to 100 characters of up to 4 bytes
        "jf-attempts": "9" * 10,
        "jf-source": "q" * 80,
        "jf-dead-at": "2026-12-31T23:59:59.999+00:00",
    }
    attributes = {k: wire.string_attribute(v) for k, v in longest.items()}
    assert wire.message_size("", attributes) <= REASON_ATTRIBUTES_BYTES
