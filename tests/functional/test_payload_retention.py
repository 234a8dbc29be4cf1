"""Offloaded payloads outlive everything that can still need them, and a job whose payload is gone is
dead-lettered ``payload-missing``, never ``exhausted`` (issue 12, item 2). On the embedded AWS, with S3
faults injected through botocore event hooks on the real clients."""

from __future__ import annotations

import json
import time
from typing import Any

from botocore.exceptions import ClientError

from jobframework import envelope as wire
from jobframework.dlq import DeadLetters
from jobframework.payloads import RETENTION_CLASSES_DAYS, retention_days
from jobframework.testing import receive_all
from tests.functional import jobs_under_test
from tests.functional.conftest import Runtime

BIG = "p" * 300_000  # over the 256 KiB offload threshold


def _ref(message: dict[str, Any]) -> dict[str, Any]:
    ref = json.loads(message["Body"])["payload_ref"]
    assert isinstance(ref, dict)
    return ref


def _s3_fails(client: Any, operation: str, code: str = "InternalError", status: int = 500) -> list[str]:
    """Make every ``operation`` of ``client`` fail with ``code``; returns the keys it was called for."""
    calls: list[str] = []

    def fail(params: dict[str, Any], **_: Any) -> None:
        calls.append(str(params.get("Key")))
        response: Any = {
            "Error": {"Code": code, "Message": "injected"},
            "ResponseMetadata": {"HTTPStatusCode": status},
        }
        raise ClientError(response, operation)

    client.meta.events.register(f"provide-client-params.s3.{operation}", fail)
    return calls


def test_the_key_of_an_offloaded_payload_names_a_class_that_covers_delay_retries_dlq_and_redrive(
    rt: Runtime, jf_aws
):
    now = rt.client.enqueue("t.ok", {"name": BIG})
    later = rt.client.enqueue("t.ok", {"name": BIG}, delay=200 * 86_400)  # via EventBridge Scheduler
    (message,) = receive_all(rt.sqs, rt.url("high"))
    ref = _ref(message)
    policy = jobs_under_test.ok.retry
    assert json.loads(message["Body"])["id"] == now.id
    assert ref["key"].startswith(f"keep-{retention_days(0, policy)}d/payloads/t.ok/")
    s3 = jf_aws.client("s3")
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=ref["bucket"], Prefix="keep-")["Contents"]]
    [delayed] = [k for k in keys if later.id in k]
    assert delayed.startswith(f"keep-{retention_days(200 * 86_400, policy)}d/")
    assert retention_days(200 * 86_400, policy) >= 200 + 14 > retention_days(0, policy)
    assert retention_days(0, policy) in RETENTION_CLASSES_DAYS


def test_a_job_whose_payload_is_gone_is_dead_lettered_payload_missing_at_once(rt: Runtime, jf_aws):
    sent = rt.client.enqueue("t.ok", {"name": BIG})
    ref = _object_of(rt, jf_aws.client("s3"), sent.id)
    jf_aws.client("s3").delete_object(Bucket=ref["bucket"], Key=ref["key"])  # what the lifecycle rule does

    (record,), response = rt.consume("high")

    assert response == {"batchItemFailures": []}
    (dead,) = receive_all(rt.sqs, rt.dlq("high"))
    assert dead["Body"] == record["body"]  # the pointer, byte for byte
    assert wire.message_attribute(dead, "jf-reason") == "payload-missing"
    assert "is gone" in (wire.message_attribute(dead, "jf-error") or "")
    assert wire.message_attribute(dead, "jf-attempts") == "1"
    assert jobs_under_test.calls == {}  # never ran
    status = rt.client.status(sent.id)
    assert status is not None and status.status == "dead"


def test_a_payload_store_that_fails_for_a_moment_is_retried_not_dead_lettered(rt: Runtime):
    rt.client.enqueue("t.ok", {"name": BIG})
    calls = _s3_fails(rt.handler._client("s3"), "GetObject")

    _, response = rt.consume("high")

    assert calls and len(response["batchItemFailures"]) == 1  # retried
    assert receive_all(rt.sqs, rt.dlq("high")) == []


def _object_of(rt: Runtime, s3: Any, job_id: str) -> dict[str, Any]:
    """The payload object of ``job_id``, found by listing (the queue is left untouched)."""
    listed = s3.list_objects_v2(Bucket=rt.config.payload_bucket)["Contents"]
    [key] = [o["Key"] for o in listed if job_id in o["Key"]]
    return {"bucket": rt.config.payload_bucket, "key": key}


def _dead_letter_an_offloaded_job(rt: Runtime, s3: Any, name: str) -> dict[str, Any]:
    sent = rt.client.enqueue("t.declined", {"name": name + BIG})  # a PermanentError: dead-lettered at once
    rt.consume("high")
    return _object_of(rt, s3, sent.id)


def test_redrive_refreshes_each_payload_and_keeps_a_letter_whose_payload_is_gone(rt: Runtime, jf_aws):
    s3 = jf_aws.client("s3")
    kept = _dead_letter_an_offloaded_job(rt, s3, "kept")
    gone = _dead_letter_an_offloaded_job(rt, s3, "gone")
    s3.delete_object(Bucket=gone["bucket"], Key=gone["key"])
    before = s3.head_object(Bucket=kept["bucket"], Key=kept["key"])["LastModified"]
    time.sleep(1.1)  # S3 dates objects to the second

    result = DeadLetters(rt.config, rt.sqs, s3_client=s3).redrive("high")

    assert (result.moved, result.payload_missing, result.failed) == (1, 1, 0)
    assert any("is gone" in e for e in result.errors)
    after = s3.head_object(Bucket=kept["bucket"], Key=kept["key"])
    assert after["LastModified"] > before  # its retention starts again from the redrive
    stored = s3.get_object(Bucket=kept["bucket"], Key=kept["key"])["Body"].read()
    assert json.loads(stored)["name"].startswith("kept")  # same body
    (back,) = receive_all(rt.sqs, rt.url("high"))
    assert _ref(back)["key"] == kept["key"]
    (left,) = receive_all(rt.sqs, rt.dlq("high"))
    assert _ref(left)["key"] == gone["key"]  # stays, to be exported and purged


def test_redrive_moves_a_letter_whose_payload_cannot_be_refreshed_now(rt: Runtime, jf_aws):
    s3 = jf_aws.client("s3")
    ref = _dead_letter_an_offloaded_job(rt, s3, "unrefreshable")
    calls = _s3_fails(s3, "CopyObject", code="AccessDenied", status=403)

    result = DeadLetters(rt.config, rt.sqs, s3_client=s3).redrive("high")

    assert calls == [ref["key"]]
    assert (result.moved, result.payload_missing) == (1, 0)  # its first horizon still covers this redrive


def test_a_payload_offloaded_to_another_bucket_is_dead_lettered_malformed_unread(rt: Runtime):
    """A trial sent a pointer to someone else's bucket: the consumer fetched from it (NoSuchBucket; deployed,
    AccessDenied), retried three times and dead-lettered `exhausted`."""
    from jobframework.envelope import Envelope, PayloadRef

    env = Envelope.new("t.ok", {}).model_copy(
        update={
            "payload_ref": PayloadRef(bucket="someone-elses-bucket", key="x/p.json", size=2, sha256="0" * 64)
        }
    )
    rt.sqs.send_message(QueueUrl=rt.url("high"), MessageBody=env.to_body())
    reads = _s3_fails(rt.handler._client("s3"), "GetObject")

    _, response = rt.consume("high")

    assert response == {"batchItemFailures": []} and reads == []  # settled at once, nothing read
    (dead,) = receive_all(rt.sqs, rt.dlq("high"))
    assert wire.message_attribute(dead, "jf-reason") == "malformed"
    error = wire.message_attribute(dead, "jf-error") or ""
    assert "offloaded to s3://someone-elses-bucket/x/p.json, not to this topology's payload bucket" in error
    assert jobs_under_test.calls == {}
