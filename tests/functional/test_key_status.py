"""A tracked, idempotent job keyed by its id starts with its key's claim, not a start claim (issue 13:
one DynamoDB write less a job), reads the cancel marker right after that claim, and its status reads
as any tracked job's: queued, running (from its key record), retrying, succeeded, cancelled."""

from __future__ import annotations

import threading
import time
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from jobframework.dlq import DeadLetters
from jobframework.envelope import Envelope, lambda_record
from jobframework.flow.cancel import CancelOutcome, cancellable
from jobframework.status import STATUS_TTL_SECONDS, JobState
from jobframework.stores import key_records
from jobframework.stores.items import from_item
from jobframework.ui.records import activity, find_jobs

from .conftest_local import send_duplicate
from .jobs_under_test import Nap, Work, calls, keyed, nap
from .jobs_under_test import result as result_job


def _consumer_writes(rt: Any) -> Counter[tuple[str, str]]:
    """The consumer's DynamoDB writes (and reads, ``GetItem`` and ``Query``) from now on, by (operation,
    table)."""
    rt.handler._features()
    made: Counter[tuple[str, str]] = Counter()

    def note(event_name: str, params: dict[str, Any], **_: Any) -> None:
        operation = event_name.rsplit(".", 1)[-1]
        if operation in ("PutItem", "UpdateItem", "DeleteItem", "GetItem", "Query"):
            made[(operation, params["TableName"])] += 1
        elif operation == "BatchWriteItem":
            for table, requests in params["RequestItems"].items():
                made[(operation, table)] += len(requests)

    rt.handler.state.client.meta.events.register("before-parameter-build.dynamodb.*", note)
    return made


def _record(rt: Any, job_type: str, job_id: str) -> dict[str, Any]:
    rt.handler._features()
    item = rt.handler.state.client.get_item(
        TableName=rt.config.idempotency_table, Key={"id": {"S": key_records.record_id(job_type, job_id)}}
    )["Item"]
    return from_item(item)


def _received(rt: Any, lane: str) -> list[dict[str, Any]]:
    """The lane's messages, received (held a minute) as the Lambda records a handler is given."""
    url = rt.url(lane)
    arn = rt.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    messages = rt.sqs.receive_message(
        QueueUrl=url,
        MaxNumberOfMessages=10,
        VisibilityTimeout=60,
        AttributeNames=["All"],
        MessageAttributeNames=["All"],
    )["Messages"]
    return [lambda_record(m, queue_arn=arn) for m in messages]


def test_its_run_claims_its_key_not_its_start_writes_no_outcome_and_the_status_reads_succeeded(rt):
    writes = _consumer_writes(rt)
    sent = rt.client.enqueue(result_job, Work(name="floor"))
    rt.consume("high")
    status = rt.client.status(sent.id)
    assert status is not None
    assert (status.status, status.attempts, status.result) == (
        JobState.SUCCEEDED,
        1,
        {"name": "floor", "attempt": 1},
    )
    assert status.enqueued_at and status.started_at and status.finished_at
    assert status.enqueued_at <= status.started_at <= status.finished_at == status.updated_at
    keys, state = rt.config.idempotency_table, rt.config.state_table
    assert writes == {
        ("PutItem", keys): 1,  # the key's claim: its start
        ("Query", state): 1,  # the cancel marker and the status item, read after the claim
        ("UpdateItem", keys): 1,  # the completion, which holds the outcome
    }, writes  # no start claim (UpdateItem of the state table), no outcome (BatchWriteItem)
    item = rt.handler.state.client.get_item(
        TableName=state, Key={"pk": {"S": f"job#{sent.id}"}, "sk": {"S": "status"}}
    )["Item"]
    assert item["status"]["S"] == "queued"  # as the enqueue wrote it: every read merges the record
    record = _record(rt, "t.result", sent.id)  # Powertools' record, at the id the status reads
    assert record["status"] == "COMPLETED"
    assert abs(record["expiration"] - (time.time() + STATUS_TTL_SECONDS)) < 60  # kept as long as the status


def test_a_job_sent_with_track_by_another_producer_writes_its_outcome_as_it_has_no_status_item(rt):
    # Another language's producer (or Envelope.new(track=True) sent by hand) writes no queued item:
    # the key's record alone would leave nothing for a status read to find by the job's id.
    writes = _consumer_writes(rt)
    env = Envelope.new("t.result", {"name": "foreign"}, track=True)
    rt.sqs.send_message(QueueUrl=rt.url("high"), MessageBody=env.model_dump_json())
    rt.consume("high")
    status = rt.client.status(env.id)
    assert status is not None, "a tracked job with no queued item had no status after its run"
    assert (status.status, status.attempts, status.result) == (
        JobState.SUCCEEDED,
        1,
        {"name": "foreign", "attempt": 1},
    )
    assert status.started_at and status.finished_at
    state = rt.config.state_table
    assert writes[("Query", state)] == 1 and writes[("BatchWriteItem", state)] == 1, writes


def test_the_status_says_running_while_the_key_is_held(rt):
    sent = rt.client.enqueue(result_job, Work(name="held"))
    seen: list[Any] = []

    def after_claim(model: Any, **_: Any) -> None:
        if model.name == "PutItem" and not seen:  # the key's claim: the job runs next
            seen.append(rt.client.status(sent.id))

    rt.handler._features()
    rt.handler.state.client.meta.events.register("after-call.dynamodb.PutItem", after_claim)
    rt.consume("high")
    running = seen[0]
    assert (running.status, running.attempts) == (JobState.RUNNING, 1)
    assert running.started_at and running.started_at >= running.enqueued_at  # (the record keeps seconds)
    assert rt.client.status(sent.id).status is JobState.SUCCEEDED


def test_a_retry_reads_retrying_then_succeeded_with_its_attempts(rt):
    sent = rt.client.enqueue(result_job, Work(name="again", fail_times=1))
    rt.consume("high")
    first = rt.client.status(sent.id)
    assert (first.status, first.attempts, first.error) == (
        JobState.RETRYING,
        1,
        "ConnectionError: downstream reset the connection",
    )
    time.sleep(1.2)
    rt.consume("high")
    done = rt.client.status(sent.id)
    assert (done.status, done.attempts, done.error) == (JobState.SUCCEEDED, 2, None)
    assert done.result == {"name": "again", "attempt": 2} and calls["again"] == 2


def test_a_run_that_claims_the_key_after_a_cancel_finds_the_marker_and_does_not_start(rt):
    sent = rt.client.enqueue(result_job, Work(name="cancelled"))
    assert rt.client.cancel(sent.id).outcome is CancelOutcome.CANCELLED
    records, response = rt.consume("high")
    assert len(records) == 1 and response == {"batchItemFailures": []}
    assert calls["cancelled"] == 0
    status = rt.client.status(sent.id)
    # (the reason jf cancel wrote, kept by the run that found the marker)
    assert (status.status, status.reason) == (JobState.CANCELLED, "cancelled before it started")
    record = _record(rt, "t.result", sent.id)  # a later copy of it finds this and does not start either
    assert record["status"] == "COMPLETED" and '"cancelled": true' in record["data"]
    assert rt.client.cancel(sent.id).outcome is CancelOutcome.CANCELLED  # again: nothing changes


def test_a_finished_job_is_not_cancelled_and_a_job_with_its_own_key_claims_its_start(rt):
    done = rt.client.enqueue(result_job, Work(name="done"))
    own_key = rt.client.enqueue(keyed, Work(name="own-key"))
    writes = _consumer_writes(rt)
    rt.consume("high")
    assert rt.client.cancel(done.id).outcome is CancelOutcome.FINISHED
    assert rt.client.status(done.id).status is JobState.SUCCEEDED
    # key= names another key than the id: the status table keeps its run (start claim, finished status).
    status = rt.client.status(own_key.id)
    assert (status.status, status.attempts) == (JobState.SUCCEEDED, 1)
    assert writes[("UpdateItem", rt.config.state_table)] == 1  # the start claim of the keyed job only
    assert writes[("BatchWriteItem", rt.config.state_table)] == 1  # the keyed job's outcome only


def test_a_dead_job_redriven_reads_succeeded(rt):
    sent = rt.client.enqueue(result_job, Work(name="refused-once", fail_times=1))
    rt.consume("high")
    dead = rt.client.status(sent.id)
    assert (dead.status, dead.reason) == (JobState.DEAD, "permanent")
    letters = DeadLetters(rt.config, rt.sqs, wait_time_seconds=0)
    assert letters.redrive("high").moved == 1
    rt.consume("high")
    status = rt.client.status(sent.id)
    assert (status.status, status.error, status.reason) == (JobState.SUCCEEDED, None, None)
    assert status.result == {"name": "refused-once", "attempt": 1} and calls["refused-once"] == 2


def test_a_redriven_job_keeps_count_of_its_redrives_through_its_deaths_and_its_success(rt):
    sent = rt.client.enqueue(result_job, Work(name="refused-twice", fail_times=2))
    letters = DeadLetters(rt.config, rt.sqs, wait_time_seconds=0)
    rt.consume("high")
    assert rt.client.status(sent.id).redrives == 0
    assert letters.redrive("high").moved == 1
    queued = rt.client.status(sent.id)
    assert (queued.status, queued.redrives) == (JobState.QUEUED, 1)
    rt.consume("high")  # dead again: the consumer's own status write, and its letter, keep the count
    dead = rt.client.status(sent.id)
    assert (dead.status, dead.attempts, dead.redrives) == (JobState.DEAD, 1, 1)
    [letter] = letters.peek("high")
    assert letter.redrives == 1 and letter.summary()["redrives"] == 1
    assert letters.redrive("high").moved == 1
    rt.consume("high")
    done = rt.client.status(sent.id)
    assert (done.status, done.attempts, done.redrives) == (JobState.SUCCEEDED, 1, 2)
    assert calls["refused-twice"] == 3


def test_a_letter_with_no_room_for_its_redrive_count_takes_it_from_the_jobs_status(rt):
    """A signed job with a tracestate fills SQS's ten attributes: its letter drops jf-redrives, and the
    next redrive's count went back to 1 (a review); the job's status has it."""
    sent = rt.client.enqueue(result_job, Work(name="refused-crowded", fail_times=3))
    letters = DeadLetters(rt.config, rt.sqs, wait_time_seconds=0)
    rt.consume("high")
    assert letters.redrive("high").moved == 1
    rt.consume("high")  # dead again, once redriven
    dlq = rt.config.endpoints("high").dlq_url
    [message] = rt.sqs.receive_message(QueueUrl=dlq, MessageAttributeNames=["All"])["Messages"]
    crowded = {k: v for k, v in message["MessageAttributes"].items() if k != "jf-redrives"}
    rt.sqs.send_message(QueueUrl=dlq, MessageBody=message["Body"], MessageAttributes=crowded)
    rt.sqs.delete_message(QueueUrl=dlq, ReceiptHandle=message["ReceiptHandle"])
    assert letters.redrive("high").moved == 1
    rt.consume("high")  # dead a third time: the consumer's status write takes the message's count
    dead = rt.client.status(sent.id)
    assert (dead.status, dead.redrives) == (JobState.DEAD, 2)


def test_a_record_that_lapsed_or_holds_garbage_leaves_the_status_item_as_it_is():
    from jobframework.status import JobStatus

    queued = JobStatus(id="j", type="t", status=JobState.QUEUED, updated_at="2026-01-01T00:00:00.000+00:00")
    now = time.time()
    lapsed = {"status": "INPROGRESS", "expiration": now + 100, "in_progress_expiration": (now - 1) * 1000}
    assert key_records.merged_with(queued, lapsed, now) == queued
    expired = {"status": "COMPLETED", "expiration": now - 1, "data": "{}"}
    assert key_records.merged_with(queued, expired, now) == queued
    garbage = {"status": "COMPLETED", "expiration": now + 100, "data": "not json"}
    assert key_records.merged_with(queued, garbage, now).status is JobState.SUCCEEDED
    for final in (JobState.SUCCEEDED, JobState.CANCELLED, JobState.EXPIRED):  # the status item's own
        done = queued.model_copy(update={"status": final})
        assert key_records.merged_with(done, {"status": "COMPLETED", "expiration": now + 100}, now) == done


def test_only_a_tracked_unbatched_idempotent_run_keyed_by_its_id_claims_its_key_instead_of_its_start():
    from jobframework.envelope import Envelope
    from jobframework.jobs import BatchOptions, JobRegistry, job

    registry = JobRegistry()

    @job("k.one", registry=registry)
    def one(work: Work) -> None: ...

    @job("k.lean", registry=registry, idempotent=False)
    def lean(work: Work) -> None: ...

    @job("k.many", registry=registry, batch=BatchOptions(max_size=10, max_wait=0))
    def many(works: list[Work]) -> list[None]:
        return [None for _ in works]

    def env(job_type: str, **options: Any) -> Envelope:
        return Envelope.new(job_type, {"name": "n"}, track=True, payload_version=1, **options)

    claims = key_records.claims_key
    assert claims("keys", "keys", env("k.one"), one)
    assert claims("keys", "keys", env("k.one", key=None, job_id="j-1"), one)
    assert not claims("keys", "keys", env("k.one", key="order:1"), one)  # shared by the key's jobs
    assert not claims("keys", "keys", Envelope.new("k.one", {"name": "n"}, payload_version=1), one)
    assert not claims("keys", "keys", env("k.lean"), lean)  # no key to claim
    assert not claims("keys", "keys", env("k.many"), many)  # batched jobs are not wrapped
    assert not claims(None, "keys", env("k.one"), one)  # a consumer without an idempotency table
    assert not claims("keys", None, env("k.one"), one)  # statuses that do not read the key records


def test_a_duplicate_delivery_leaves_the_runs_status_as_it_was(rt):
    sent = rt.client.enqueue(result_job, Work(name="once"))
    send_duplicate(rt.sqs, rt.url("high"))
    rt.consume("high", max_messages=1)
    first = rt.client.status(sent.id)
    assert first.status is JobState.SUCCEEDED and first.started_at and first.finished_at
    records, _ = rt.consume("high")  # the duplicate: skipped, the job does not run again
    assert len(records) == 1 and calls["once"] == 1
    after = rt.client.status(sent.id)
    # (the copy received to make the duplicate ran as attempt 2: its receive count; the duplicate is 1)
    assert (after.started_at, after.finished_at, after.attempts, after.result) == (
        first.started_at,
        first.finished_at,
        first.attempts,
        first.result,
    )


def test_a_copy_handed_back_while_its_job_runs_elsewhere_leaves_the_outcome_alone(rt):
    """A duplicate that finds the job running in another delivery is handed back unrun; its batch ends
    after that run succeeded, and writes nothing over the outcome (it wrote retrying, attempt 0)."""
    running = rt.client.enqueue(nap, Nap(name="running", seconds=1.0))
    rt.client.enqueue(nap, Nap(name="beside", seconds=2.5))
    url = rt.url("high")
    records = {r["body"].count('"running"') > 0: r for r in _received(rt, "high")}
    first, beside = records[True], records[False]
    duplicate = {**first, "messageId": "duplicate-of-" + first["messageId"]}
    run = threading.Thread(target=rt.handler, args=({"Records": [first]}, None))
    run.start()
    time.sleep(0.4)  # the first delivery holds the key: the duplicate finds it in progress
    response = rt.handler({"Records": [duplicate, beside]}, None)  # ends after the first run's outcome
    run.join()
    assert response == {"batchItemFailures": []} and calls["running"] == 1
    status = rt.client.status(running.id)
    assert (status.status, status.attempts, status.result) == (JobState.SUCCEEDED, 1, "running")
    listed = find_jobs(rt.client.state, status=JobState.SUCCEEDED)  # what the console's lists show
    assert [(j.id, j.attempts) for j in listed.jobs if j.id == running.id] == [(running.id, 1)]
    delayed = rt.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessagesDelayed"])
    assert delayed["Attributes"]["ApproximateNumberOfMessagesDelayed"] == "1"  # the duplicate, handed back


def test_the_consoles_lists_and_counts_and_a_bulk_cancel_read_the_outcome_in_the_key_record(rt):
    """A succeeded run keyed by its id leaves its status item as it was (queued, or retrying): the
    console's filtered lists, its last-hour counts and ``jf cancel --type`` merge the key records."""
    done = rt.client.enqueue(result_job, Work(name="listed"))
    again = rt.client.enqueue(result_job, Work(name="listed-again", fail_times=1))
    rt.consume("high")
    time.sleep(1.2)
    between = datetime.now(UTC)  # after the first run's end and the second's failure, before its end
    rt.consume("high")
    waiting = rt.client.enqueue(result_job, Work(name="waiting"), delay=60)
    state = rt.client.state

    succeeded = find_jobs(state, status=JobState.SUCCEEDED)
    assert sorted((j.id, j.attempts) for j in succeeded.jobs) == sorted([(done.id, 1), (again.id, 2)])
    assert [j.id for j in find_jobs(state, status=JobState.QUEUED).jobs] == [waiting.id]
    assert find_jobs(state, status=JobState.RETRYING).jobs == []
    recent = find_jobs(state, updated_since=between)  # the retried run's end is in its key record
    assert [j.id for j in recent.jobs] == [waiting.id, again.id]  # newest first

    (row,), _ = activity(state)
    assert (row.job_type, row.succeeded, row.retried, row.in_progress) == ("t.result", 2, 1, 1)
    assert [job.id for job in cancellable(state, "t.result", 0)] == [waiting.id]


def test_a_job_whose_key_had_completed_reads_succeeded_and_says_it_did_not_run(rt):
    first = rt.client.enqueue(keyed, Work(name="same-key"))
    rt.consume("high")
    second = rt.client.enqueue(keyed, Work(name="same-key"))  # key= keys it: no enqueue dedup
    rt.consume("high")
    assert calls["same-key"] == 1
    assert rt.client.status(first.id).reason is None
    status = rt.client.status(second.id)
    assert (status.status, status.reason) == (
        JobState.SUCCEEDED,
        "duplicate: key work:same-key had already completed, so this job did not run",
    )


def test_a_job_that_waits_for_its_keys_run_elsewhere_reads_queued_not_running(rt):
    """Two jobs of one key (``dedup_window=0``): the second's delivery finds the key held by the
    first's run and is handed back unrun. A trial's ``jf status`` said the waiting job was
    ``running``, attempt 1, for a minute (its start claim outlived the run that never started)."""
    first = rt.client.enqueue(nap, Nap(name="holder", seconds=1.0), key="shared", dedup_window=0)
    waiting = rt.client.enqueue(nap, Nap(name="waiter", seconds=0.0), key="shared", dedup_window=0)
    by_name = {("holder" if '"holder"' in r["body"] else "waiter"): r for r in _received(rt, "high")}
    run = threading.Thread(target=rt.handler, args=({"Records": [by_name["holder"]]}, None))
    run.start()
    try:
        deadline = time.monotonic() + 10  # the first job's run holds the key (on a busy machine, later)
        while (held := rt.client.status(first.id)) is None or held.status is not JobState.RUNNING:
            assert time.monotonic() < deadline, "the first job's run never started"
            time.sleep(0.05)
        time.sleep(0.2)  # (its key's claim follows its start claim at once; its nap lasts 1 s)
        assert rt.handler({"Records": [by_name["waiter"]]}, None) == {"batchItemFailures": []}
        status = rt.client.status(waiting.id)
        assert status is not None
        assert (status.status, status.attempts) == (JobState.QUEUED, 0)
        holder = rt.client.status(first.id)
        assert holder is not None and holder.status is JobState.RUNNING
    finally:
        run.join()
    assert calls["holder"] == 1 and "waiter" not in calls


def test_two_jobs_of_one_key_in_one_batch_run_one_after_the_other_not_a_minute_apart(rt):
    """The second record of a key its batch is running waits its turn in the batch and finds the
    first's completion: a duplicate, acknowledged at once. It was handed back for the in-progress
    record's expiry (61 s), its status ``queued`` all that minute."""
    first = rt.client.enqueue(nap, Nap(name="holder", seconds=0.3), key="shared", dedup_window=0)
    second = rt.client.enqueue(nap, Nap(name="waiter", seconds=0.0), key="shared", dedup_window=0)
    records = _received(rt, "high")
    assert len(records) == 2
    assert rt.handler({"Records": records}, None) == {"batchItemFailures": []}
    statuses = {job.id: rt.client.status(job.id) for job in (first, second)}
    ran = [i for i, s in statuses.items() if s is not None and s.reason is None]
    skipped = [s for s in statuses.values() if s is not None and s.reason is not None]
    assert len(ran) == 1 and len(skipped) == 1
    assert all(s is not None and s.status is JobState.SUCCEEDED for s in statuses.values())
    assert skipped[0].reason == ("duplicate: key shared had already completed, so this job did not run")
    assert sum(calls.values()) == 1
