"""The consumer against the embedded AWS: every record ends succeeded, retried or dead-lettered."""

from __future__ import annotations

import json
import logging
import time

import pytest

from jobframework.consumer import consumer
from jobframework.envelope import Envelope, lambda_record, message_attribute
from jobframework.testing import FakeLambdaContext, consume_once, receive_all, sqs_event

from .jobs_under_test import calls, child_client, registry, seen


def attrs(message):
    return {name: message_attribute(message, name) for name in message.get("MessageAttributes", {})}


def test_a_job_succeeds_and_its_message_is_deleted(rt):
    result = rt.client.enqueue("t.ok", {"name": "a"})
    records, response = rt.consume("high")
    assert [json.loads(r["body"])["id"] for r in records] == [result.id]
    assert response == {"batchItemFailures": []}
    assert calls["a"] == 1
    assert receive_all(rt.sqs, rt.url("high")) == []


def test_a_transient_failure_hides_the_message_for_the_backoff_then_succeeds(rt):
    rt.client.enqueue("t.flaky", {"name": "f", "fail_times": 1})
    records, response = rt.consume("default")
    assert response["batchItemFailures"] == [{"itemIdentifier": records[0]["messageId"]}]
    assert calls["f"] == 1
    hidden_at = time.monotonic()
    assert rt.consume("default")[0] == []  # invisible for the 2 s backoff
    while not (again := rt.consume("default"))[0]:
        time.sleep(0.1)
        assert time.monotonic() - hidden_at < 6, "the message never came back"
    assert time.monotonic() - hidden_at >= 1.5
    assert again[0][0]["attributes"]["ApproximateReceiveCount"] == "2"
    assert again[1] == {"batchItemFailures": []}
    assert calls["f"] == 2


def test_an_explicit_retry_delay_sets_the_visibility(rt):
    rt.client.enqueue("t.flaky", {"name": "r", "fail_times": 1, "delay": 1})
    rt.consume("default")
    started = time.monotonic()  # the retry's visibility is set as that batch settles: time from there
    while not rt.consume("default")[0]:
        time.sleep(0.1)
        assert time.monotonic() - started < 5
    elapsed = time.monotonic() - started
    assert 0.8 <= elapsed < 2, "came back after the job's own delay (1 s), not the policy's (2 s)"
    assert calls["r"] == 2


def test_a_permanent_failure_goes_to_the_dlq_at_once_with_its_reason_and_body_intact(rt, caplog):
    rt.client.enqueue("t.declined", {"name": "card"})
    with caplog.at_level(logging.INFO, logger="jobframework.consumer"):
        records, response = rt.consume("high")
    # The job's own refusal is expected (Celery's `throws`): a WARNING with where it raised, not an
    # ERROR line that error-log alerts count (two trials: every 410 paged as an error)
    [line] = [r for r in caplog.records if "dead-lettered (permanent)" in r.getMessage()]
    assert line.levelno == logging.WARNING and line.exc_info is not None
    sent = records[0]
    assert response == {"batchItemFailures": []}  # acknowledged: it is in the DLQ now
    dead = receive_all(rt.sqs, rt.dlq("high"))
    assert len(dead) == 1
    assert dead[0]["Body"] == sent["body"]  # byte for byte
    a = attrs(dead[0])
    assert a["jf-reason"] == "permanent"
    assert a["jf-error"] == "PermanentError: card declined"
    assert a["jf-attempts"] == "1"
    assert a["jf-source"] == rt.topology.queue("high").name
    assert a["jf-type"] == "t.declined"
    assert a["traceparent"] == sent["messageAttributes"]["traceparent"]["stringValue"]
    assert a["jf-dead-at"].endswith("+00:00")
    assert a["jf-message-id"] == sent["messageId"]  # the id the consumer's log names
    assert receive_all(rt.sqs, rt.url("high")) == []
    assert calls["card"] == 1


def test_a_failure_of_a_type_declared_permanent_is_a_warning_too(rt, caplog):
    """A trial's 400s, declared permanent=(UpstreamRejected,), were ERROR lines with tracebacks while a
    PermanentError was a WARNING: every 400 counted in error-log alerts."""
    rt.client.enqueue("t.declined", {"name": "declared-400"})
    with caplog.at_level(logging.INFO, logger="jobframework.consumer"):
        rt.consume("high")
    [declared] = [r for r in caplog.records if "Rejected: declared-400" in r.getMessage()]
    assert declared.levelno == logging.WARNING and "dead-lettered (permanent)" in declared.getMessage()
    assert declared.exc_info is not None  # (where it raised)


def test_a_permanent_function_dead_letters_a_404_and_retries_a_503_of_one_error_type(rt, caplog):
    """permanent= takes a function of the error: one HTTP error type carries both a 404 (no retry
    mends it) and a 503 (a retry does)."""
    rt.client.enqueue("t.declined", {"name": "status-404"})
    rt.client.enqueue("t.declined", {"name": "status-503"})
    with caplog.at_level(logging.INFO, logger="jobframework.consumer"):
        rt.consume("high")
    [dead] = receive_all(rt.sqs, rt.dlq("high"))
    assert attrs(dead)["jf-reason"] == "permanent" and attrs(dead)["jf-attempts"] == "1"
    assert "UpstreamStatus: HTTP 404" in attrs(dead)["jf-error"]
    [line] = [r for r in caplog.records if "HTTP 404" in r.getMessage()]
    assert line.levelno == logging.WARNING  # (asked for, as a PermanentError)
    assert calls["status-404"] == 1 and calls["status-503"] == 1
    [retried] = [r for r in caplog.records if "retry in" in r.getMessage()]
    assert retried.exc_info is not None and str(retried.exc_info[1]) == "HTTP 503"


def test_a_job_is_dead_lettered_as_exhausted_after_its_max_attempts(rt, caplog):
    rt.client.enqueue("t.broken", {"name": "b"})
    for _ in range(20):
        rt.consume("default")
        if calls["b"] >= 2 and not receive_all(rt.sqs, rt.url("default"), attempts=1):
            break
        time.sleep(0.3)
    dead = receive_all(rt.sqs, rt.dlq("default"))
    assert calls["b"] == 2
    assert len(dead) == 1
    assert attrs(dead[0])["jf-reason"] == "exhausted"
    assert attrs(dead[0])["jf-attempts"] == "2"
    assert "RuntimeError: b always fails" in attrs(dead[0])["jf-error"]
    assert any(  # (an unexpected failure's dead letter is an ERROR)
        r.levelno == logging.ERROR and "dead-lettered (exhausted)" in r.getMessage() for r in caplog.records
    )


def test_bad_records_are_dead_lettered_each_with_its_reason_and_never_fail_their_neighbours(rt):
    url = rt.url("high")
    rt.client.enqueue("t.ok", {"name": "before"})
    bad_bodies = {
        "malformed": json.dumps({"v": 1, "id": "x", "type": "t.ok"}),
        "not-json": "this is not json {",
        "unknown-type": Envelope.new("t.nobody", {"name": "x"}).to_body(),
        "invalid-payload": Envelope.new("t.ok", {"name": 42, "fail_times": -1}).to_body(),
    }
    for body in bad_bodies.values():
        rt.sqs.send_message(QueueUrl=url, MessageBody=body)
    rt.client.enqueue("t.ok", {"name": "after"})

    records, response = rt.consume("high")
    assert len(records) == 6
    assert response == {"batchItemFailures": []}
    assert calls["before"] == 1 and calls["after"] == 1
    dead = {m["Body"]: attrs(m) for m in receive_all(rt.sqs, rt.dlq("high"))}
    assert dead[bad_bodies["malformed"]]["jf-reason"] == "malformed"
    assert dead[bad_bodies["not-json"]]["jf-reason"] == "malformed"
    assert "not JSON" in dead[bad_bodies["not-json"]]["jf-error"]
    assert dead[bad_bodies["unknown-type"]]["jf-reason"] == "unknown-type"
    assert dead[bad_bodies["invalid-payload"]]["jf-reason"] == "invalid-payload"
    # One line naming each bad field (pydantic's own text is a line per field, with links).
    assert dead[bad_bodies["invalid-payload"]]["jf-error"] == (
        "payload does not match Work: ValidationError: name: Input should be a valid string; "
        "fail_times: Input should be greater than or equal to 0"
    )
    assert len(dead) == 4
    assert "x" not in calls  # nothing bad was executed


def test_trace_context_received_by_the_job_is_what_the_producer_sent(rt):
    rt.client.enqueue("t.ok", {"name": "traced"})
    sent = receive_all(rt.sqs, rt.url("high"))[0]
    rt.sqs.change_message_visibility(
        QueueUrl=rt.url("high"), ReceiptHandle=sent["ReceiptHandle"], VisibilityTimeout=0
    )
    producer = message_attribute(sent, "traceparent")
    assert producer
    rt.consume("high")
    job_ctx = seen[0]
    assert job_ctx["trace_id"] == producer.split("-")[1]
    assert job_ctx["traceparent"].split("-")[1] == producer.split("-")[1]
    assert job_ctx["traceparent"].split("-")[2] != producer.split("-")[2]  # the job has its own span


def test_a_job_enqueued_from_inside_a_job_continues_the_trace(rt):
    child_client[:] = [rt.client]
    rt.client.enqueue("t.parent", {"name": "parent"})
    rt.consume("default")
    child = receive_all(rt.sqs, rt.url("high"))[0]
    assert message_attribute(child, "traceparent") == seen[0]["traceparent"]


def test_otel_span_of_the_job_has_the_producers_span_as_parent(rt):
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    previous = trace._TRACER_PROVIDER
    trace._TRACER_PROVIDER = provider
    try:
        with tracer.start_as_current_span("http POST /orders") as producer_span:
            sent = rt.client.enqueue("t.ok", {"name": "otel"})
        records, _ = rt.consume("high")
    finally:
        trace._TRACER_PROVIDER = previous
    job_span = next(s for s in exporter.get_finished_spans() if s.name == "job t.ok")
    assert job_span.parent is not None
    assert job_span.parent.span_id == producer_span.get_span_context().span_id
    assert job_span.context.trace_id == producer_span.get_span_context().trace_id
    assert job_span.attributes["jobframework.job.type"] == "t.ok"
    assert job_span.attributes["jobframework.job.id"] == sent.id
    assert job_span.attributes["messaging.message.id"] == records[0]["messageId"]  # SQS's id, not ours
    assert job_span.attributes["messaging.operation.type"] == "process"
    assert job_span.attributes["messaging.destination.name"] == records[0]["eventSourceARN"].split(":")[-1]
    assert seen[0]["traceparent"].split("-")[2] == f"{job_span.context.span_id:016x}"


def test_a_record_is_released_unstarted_when_the_invocation_lacks_time(rt):
    rt.client.enqueue("t.slow", {"name": "late"})
    records, response = rt.consume("default", context=FakeLambdaContext(timeout=10))
    # Handed back as a fresh copy (the original is acknowledged), so the release is not an attempt.
    assert response["batchItemFailures"] == []
    assert calls["late"] == 0
    (copy,) = receive_all(rt.sqs, rt.url("default"))  # visible again at once
    assert copy["Body"] == records[0]["body"] and copy["MessageId"] != records[0]["messageId"]
    assert attrs(copy)["jf-executions"] == "0"
    assert attrs(copy)["traceparent"] == records[0]["messageAttributes"]["traceparent"]["stringValue"]


def test_when_the_dlq_cannot_be_reached_the_record_is_retried_not_lost(rt, jf_aws):
    rt.client.enqueue("t.declined", {"name": "lost?"})
    rt.sqs.delete_queue(QueueUrl=rt.dlq("high"))
    records, response = rt.consume("high")
    assert response["batchItemFailures"] == [{"itemIdentifier": records[0]["messageId"]}]


def test_consumer_as_a_decorator_runs_the_function_first_on_each_invocation(rt):
    order = []

    @consumer(registry, config=rt.config, sqs_client=rt.sqs)
    def lambda_handler(event, context):
        order.append(("setup", len(event["Records"])))

    rt.client.enqueue("t.ok", {"name": "deco"})
    consume_once(lambda_handler, rt.sqs, rt.url("high"))
    assert order == [("setup", 1)]
    assert calls["deco"] == 1


def test_an_event_of_the_documented_aws_shape_is_consumed(rt):
    # The example event of the AWS Lambda developer guide ("Using Lambda with Amazon SQS"), with our
    # envelope as the body and this stage's queue in the ARN.
    arn = rt.sqs.get_queue_attributes(QueueUrl=rt.url("high"), AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    body = Envelope.new("t.ok", {"name": "documented"}).to_body()
    event = {
        "Records": [
            {
                "messageId": "059f36b4-87a3-44ab-83d2-661975830a7d",
                "receiptHandle": "AQEBwJnKyrHigUMZj6rYigCgxlaS3SLy0a...",
                "body": body,
                "attributes": {
                    "ApproximateReceiveCount": "1",
                    "SentTimestamp": "1545082649183",
                    "SenderId": "AIDAIENQZJOLO23YVJ4VO",
                    "ApproximateFirstReceiveTimestamp": "1545082649185",
                },
                "messageAttributes": {
                    "jf-type": {
                        "stringValue": "t.ok",
                        "stringListValues": [],
                        "binaryListValues": [],
                        "dataType": "String",
                    }
                },
                "md5OfBody": "e4e68fb7bd0e697a0ae8f1bb342846b3",
                "eventSource": "aws:sqs",
                "eventSourceARN": arn,
                "awsRegion": "us-east-1",
            }
        ]
    }
    assert rt.handler(event, FakeLambdaContext()) == {"batchItemFailures": []}
    assert calls["documented"] == 1


def test_an_event_that_is_not_from_sqs_is_refused_clearly(rt):
    with pytest.raises(ValueError, match="Records"):
        rt.handler({"detail-type": "Scheduled Event"}, FakeLambdaContext())


def test_listeners_hear_every_outcome(rt):
    heard = []
    handler = consumer(registry, config=rt.config, sqs_client=rt.sqs, listeners=[heard.append])
    rt.client.enqueue("t.ok", {"name": "l1"})
    rt.client.enqueue("t.declined", {"name": "l2"})
    consume_once(handler, rt.sqs, rt.url("high"))
    assert sorted((o.job_type, o.outcome) for o in heard) == [
        ("t.declined", "dead_lettered"),
        ("t.ok", "succeeded"),
    ]
    assert all(o.priority == "high" for o in heard)


def test_the_documented_event_factory_builds_records_the_consumer_accepts(rt):
    arn = rt.sqs.get_queue_attributes(QueueUrl=rt.url("high"), AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    event = sqs_event(Envelope.new("t.ok", {"name": "factory"}), queue_arn=arn)
    assert rt.handler(event, FakeLambdaContext()) == {"batchItemFailures": []}
    assert calls["factory"] == 1


def test_a_job_that_calls_sys_exit_is_retried_alone(rt):
    rt.client.enqueue("t.ok", {"name": "before-exit"})
    rt.client.enqueue("t.exits", {"name": "exiter"})
    records, response = rt.consume("high")
    by_id = {r["messageId"]: json.loads(r["body"])["type"] for r in records}
    assert [by_id[f["itemIdentifier"]] for f in response["batchItemFailures"]] == ["t.exits"]
    assert calls["before-exit"] == 1
    assert calls["exiter"] == 1


def test_a_message_in_the_batch_twice_runs_once_under_its_later_receipt(rt):
    """Received again while a batch filled (its visibility lapsed in the batching window): Lambda's
    partial batch response names records by messageId, so the two receipts are one record. Both ran,
    and each settled the other's job (a trial in jf dev saw two dead letters for one job)."""
    heard = []
    handler = consumer(registry, config=rt.config, sqs_client=rt.sqs, listeners=[heard.append])
    sent = rt.client.enqueue("t.ok", {"name": "twice"})
    url = rt.url("high")
    arn = rt.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    receipts = [
        lambda_record(m, queue_arn=arn)
        for _ in range(2)
        for m in rt.sqs.receive_message(
            QueueUrl=url, VisibilityTimeout=0, AttributeNames=["All"], MessageAttributeNames=["All"]
        )["Messages"]
    ]
    assert [r["attributes"]["ApproximateReceiveCount"] for r in receipts] == ["1", "2"]
    assert handler(sqs_event(*receipts), FakeLambdaContext()) == {"batchItemFailures": []}
    assert calls["twice"] == 1
    assert [(o.job_id, o.outcome, o.attempt) for o in heard] == [(sent.id, "succeeded", 2)]
