"""Ordered jobs on a FIFO lane: a group's jobs run in enqueue order, one at a time; a failure holds
back only its own group, and a held-back job does not use an attempt."""

from __future__ import annotations

import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from jobframework.client import EnqueueRequest, JobClient
from jobframework.consumer import Consumer, consumer
from jobframework.delivery import RecordOutcome
from jobframework.fifo import HELD_BACK
from jobframework.local.console import outcome_keys, outcome_text
from jobframework.testing import consume_once, provision_fresh, receive_all
from jobframework.topology import RuntimeConfig

from . import fifo_jobs

LANE = "default-fifo"


@dataclass
class Fifo:
    config: RuntimeConfig
    sqs: Any
    client: JobClient
    handler: Consumer
    outcomes: list[RecordOutcome] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.config.endpoints(LANE).url

    def consume(self) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        return consume_once(self.handler, self.sqs, self.url)

    def send(self, *entries: tuple[str, int, dict[str, Any]]) -> None:
        requests = [
            EnqueueRequest(fifo_jobs.apply, {"account_id": a, "seq": n, **extra}) for a, n, extra in entries
        ]
        assert all(r.ok for r in self.client.enqueue_many(requests))


@pytest.fixture
def fifo(jf_aws: Any) -> Fifo:
    fifo_jobs.ledger.clear()
    _, config = provision_fresh(jf_aws.endpoint_url, fifo_jobs.registry)
    sqs = jf_aws.client("sqs")
    outcomes: list[RecordOutcome] = []
    handler = consumer(fifo_jobs.registry, config=config, sqs_client=sqs, listeners=[outcomes.append])
    client = JobClient(
        config, registry=fifo_jobs.registry, sqs_client=sqs, clients={"dynamodb": jf_aws.client("dynamodb")}
    )
    return Fifo(config, sqs, client, handler, outcomes)


def runs(account: str) -> list[tuple[int, int, bool]]:
    return [(e["seq"], e["attempt"], e["ok"]) for e in fifo_jobs.ledger if e["account"] == account]


def test_a_failing_job_holds_back_the_rest_of_its_group_only(fifo):
    fifo.send(("A", 1, {"fail_times": 1}), ("A", 2, {}), ("A", 3, {}), ("B", 1, {}), ("B", 2, {}))

    records, response = fifo.consume()
    assert len(records) == 5
    failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
    by_seq = {
        (json.loads(r["body"])["payload"]["account_id"], json.loads(r["body"])["payload"]["seq"]): r
        for r in records
    }
    assert failed == {by_seq["A", n]["messageId"] for n in (1, 2, 3)}
    assert runs("A") == [(1, 1, False)]  # 2 and 3 were handed back unrun
    assert runs("B") == [(1, 1, True), (2, 1, True)]
    held = [o for o in fifo.outcomes if o.reason == HELD_BACK]
    assert {o.message_id for o in held} == {by_seq["A", 2]["messageId"], by_seq["A", 3]["messageId"]}
    assert receive_all(fifo.sqs, fifo.config.endpoints(LANE).dlq_url) == []

    time.sleep(1.2)  # the retry's backoff: the group is blocked until then
    fifo.consume()
    assert runs("A") == [(1, 1, False), (1, 2, True), (2, 1, True), (3, 1, True)]


def test_a_groups_jobs_never_overlap_and_groups_run_side_by_side(fifo):
    fifo.send(*[(account, n, {"sleep": 0.2}) for n in range(3) for account in ("A", "B")])
    records, response = fifo.consume()
    assert len(records) == 6 and response["batchItemFailures"] == []
    spans = {a: [(e["started"], e["ended"]) for e in fifo_jobs.ledger if e["account"] == a] for a in "AB"}
    for account in "AB":
        assert [e["seq"] for e in fifo_jobs.ledger if e["account"] == account] == [0, 1, 2]
        ordered = spans[account]
        assert all(ordered[i][1] <= ordered[i + 1][0] for i in range(2)), ordered
    assert any(a0 < b1 and b0 < a1 for a0, a1 in spans["A"] for b0, b1 in spans["B"])


def test_a_dead_lettered_job_lets_its_group_go_on_and_lands_in_the_fifo_dlq(fifo):
    fifo.send(("A", 1, {"fail_times": 9, "permanent": True}), ("A", 2, {}))
    _, response = fifo.consume()
    assert response["batchItemFailures"] == []
    assert runs("A") == [(1, 1, False), (2, 1, True)]
    (letter,) = receive_all(fifo.sqs, fifo.config.endpoints(LANE).dlq_url)
    assert letter["Attributes"]["MessageGroupId"] == "A"
    assert json.loads(letter["Body"])["payload"]["seq"] == 1
    assert letter["MessageAttributes"]["jf-reason"]["StringValue"] == "permanent"
    # Its outcome names the lane whose DLQ holds it (what `jf dlq peek` takes, and `jf dev` prints).
    dead = [o for o in fifo.outcomes if o.outcome == "dead_lettered"]
    assert [(o.priority, o.lane) for o in dead] == [("default", LANE)]
    assert f"  {LANE}  attempt 1" in outcome_text(outcome_keys(dead[0]))


def test_a_redriven_fifo_dead_letter_goes_back_to_its_group_and_runs_again(fifo):
    from jobframework.dlq import DeadLetters

    fifo.send(("A", 1, {"fail_times": 1, "permanent": True}))
    fifo.consume()
    result = DeadLetters(fifo.config, fifo.sqs, wait_time_seconds=0).redrive(LANE)
    assert result.moved == 1
    records, _ = fifo.consume()
    assert [r["attributes"]["MessageGroupId"] for r in records] == ["A"]
    assert runs("A") == [(1, 1, False), (1, 1, False)]  # ran again: a redrive starts the attempts again


def test_through_the_emulator_a_failing_group_keeps_its_order_and_delays_no_other_group(jf_aws):
    """What `jf dev` and `jf worker` run: the event-source-mapping emulator, four workers, on the FIFO
    lane. Group A's second job fails twice then succeeds; group B's jobs do not wait for it."""
    from jobframework.local.emulator import Emulator, pollers_for

    fifo_jobs.ledger.clear()
    topology, config = provision_fresh(jf_aws.endpoint_url, fifo_jobs.registry)
    sqs = jf_aws.client("sqs")
    client = JobClient(config, registry=fifo_jobs.registry, sqs_client=sqs)
    handler = consumer(fifo_jobs.registry, config=config, sqs_client=sqs)
    requests = [
        EnqueueRequest(
            fifo_jobs.apply, {"account_id": account, "seq": n, "fail_times": 2 * ((account, n) == ("A", 2))}
        )
        for n in range(1, 6)
        for account in ("A", "B")
    ]
    assert all(r.ok for r in client.enqueue_many(requests))

    pollers = pollers_for(config, topology, [LANE])
    assert [p.url.endswith(".fifo") for p in pollers] == [True]
    emulator = Emulator(pollers, handler, sqs, workers=4).start()
    try:
        deadline = time.monotonic() + 30
        while sum(e["ok"] for e in fifo_jobs.ledger) < 10 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        emulator.stop()

    a = [e for e in fifo_jobs.ledger if e["account"] == "A"]
    b = [e for e in fifo_jobs.ledger if e["account"] == "B"]
    assert [(e["seq"], e["attempt"], e["ok"]) for e in a] == [
        (1, 1, True),
        (2, 1, False),
        (2, 2, False),
        (2, 3, True),  # held-back jobs 3 to 5 used no attempt
        (3, 1, True),
        (4, 1, True),
        (5, 1, True),
    ]
    assert all(earlier["ended"] <= later["started"] for earlier, later in itertools.pairwise(a))
    assert [(e["seq"], e["attempt"], e["ok"]) for e in b] == [(n, 1, True) for n in range(1, 6)]
    retried = next(e for e in a if (e["seq"], e["attempt"]) == (2, 2))
    assert max(e["ended"] for e in b) < retried["started"]  # B finished before A's first retry
    assert receive_all(sqs, config.endpoints(LANE).dlq_url) == []


def test_redrive_empties_a_fifo_dlq_group_of_more_than_ten_letters_in_order(fifo):
    from jobframework.dlq import DeadLetters

    fifo.send(*[("A", n, {"fail_times": 1, "permanent": True}) for n in range(15)])
    while fifo.consume()[0]:
        pass
    assert len(runs("A")) == 15
    letters = DeadLetters(fifo.config, fifo.sqs, wait_time_seconds=0)
    # an id behind ten letters of its group held unselected is not seen: not said to be missing
    unseen = letters.redrive(LANE, message_ids=["no-such-letter"], dry_run=True)
    assert unseen.matched == 0 and unseen.not_found == []
    result = letters.redrive(LANE)
    assert result.moved == 15
    fifo_jobs.ledger.clear()
    while fifo.consume()[0]:
        pass
    assert [seq for seq, _, _ in runs("A")] == list(range(15))


def test_a_fifo_dlq_read_whole_names_the_ids_given_that_no_letter_carries(fifo):
    """An on-call's mistyped id beside a real one: named (exit 1 in the CLI) once every letter was
    seen; it passed unsaid on a FIFO DLQ whatever its depth."""
    from jobframework.dlq import DeadLetters

    fifo.send(*[("A", n, {"fail_times": 1, "permanent": True}) for n in range(3)])
    while fifo.consume()[0]:
        pass
    letters = DeadLetters(fifo.config, fifo.sqs, wait_time_seconds=0)
    [first, *_] = letters.peek(LANE, limit=None)
    dry = letters.redrive(LANE, message_ids=[first.job_id, "typo"], dry_run=True)
    assert (dry.matched, dry.not_found) == (1, ["typo"])
    purged = letters.purge(LANE, ids=[first.job_id, "typo"])
    assert (purged.deleted, purged.not_found) == (1, ["typo"])
    assert len(letters.peek(LANE, limit=None)) == 2


def test_peek_and_export_of_a_fifo_dlq_see_ten_letters_of_a_group_at_a_time(fifo):
    import io

    from jobframework.dlq import DeadLetters

    fifo.send(*[("A", n, {"fail_times": 1, "permanent": True}) for n in range(12)])
    while fifo.consume()[0]:
        pass
    letters = DeadLetters(fifo.config, fifo.sqs, wait_time_seconds=0)
    assert len(letters.peek(LANE, limit=None)) == 10
    assert letters.export(LANE, io.StringIO()) == 10


def test_jf_dlq_reads_and_redrives_a_fifo_lanes_dead_letters_by_lane_name(fifo):
    """`jf dlq peek|redrive default-fifo`: the CLI takes a lane as well as a priority."""
    from tests.functional.conftest_local import cli_env, invoke

    fifo.send(("A", 1, {"fail_times": 1, "permanent": True}))
    fifo.consume()
    env = {**cli_env(fifo.config), "JF_JOBS": "tests.functional.fifo_jobs"}
    peeked = invoke(["dlq", "peek", LANE, "--json"], env)
    assert peeked.exit_code == 0, peeked.output
    assert [letter["type"] for letter in json.loads(peeked.output)] == ["ledger.apply"]
    moved = invoke(["dlq", "redrive", LANE, "--json"], env)
    assert moved.exit_code == 0 and json.loads(moved.output)["moved"] == 1, moved.output
    records, _ = fifo.consume()
    assert [r["attributes"]["MessageGroupId"] for r in records] == ["A"]
    bad = invoke(["dlq", "peek", "nope-fifo"], env)
    assert bad.exit_code == 2 and "'nope-fifo': name a priority" in bad.output
    misspelt = invoke(["dlq", "peek", "hgh"], env)
    assert misspelt.exit_code == 2 and "did you mean high?" in misspelt.output
    underscored = invoke(["dlq", "peek", "default_fifo"], env)  # (it suggested default: another DLQ)
    assert underscored.exit_code == 2 and "did you mean default-fifo?" in underscored.output
    absent = invoke(["dlq", "peek", "low-cpu"], env)  # a lane this topology does not have: a bad argument
    assert absent.exit_code == 2 and "'low-cpu': no such queue here (its lanes: " in absent.output
    assert "JF_QUEUE_URL" not in absent.output  # (a trial was told to set a variable for a lane no job has)


def test_a_handler_given_sqs_event_of_an_ordered_job_holds_back_the_group_as_aws_would(fifo):
    """A team's test builds the event with sqs_event (no queue between): its records had no
    MessageGroupId, so each was a group of its own and seq 2 ran after seq 1 failed."""
    from jobframework.envelope import Envelope
    from jobframework.testing import FakeLambdaContext, sqs_event

    first, second = (
        Envelope.new("ledger.apply", {"account_id": "A", "seq": n, "fail_times": 2 - n}) for n in (1, 2)
    )
    other = Envelope.new("ledger.apply", {"account_id": "B", "seq": 1})
    event = sqs_event(first, second, other, config=fifo.config, registry=fifo_jobs.registry)

    assert all(r["eventSourceARN"].endswith(".fifo") for r in event["Records"])
    groups = [r["attributes"]["MessageGroupId"] for r in event["Records"]]
    assert groups == ["A", "A", "B"]
    numbers = [int(r["attributes"]["SequenceNumber"]) for r in event["Records"]]
    assert numbers == sorted(numbers) and len(set(numbers)) == 3
    response = fifo.handler(event, FakeLambdaContext())
    failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
    assert failed == {r["messageId"] for r in event["Records"][:2]}
    assert runs("A") == [(1, 1, False)] and runs("B") == [(1, 1, True)]  # seq 2 held back unrun


def test_an_ordered_job_that_arrives_on_a_plain_queue_runs_and_says_its_order_is_lost(fifo, caplog):
    """A trial put an ordered job's message on the plain default queue (a producer from before the job
    was made ordered): it ran unordered and nothing said so. It runs, and one warning says why."""
    import logging

    from jobframework.envelope import Envelope

    plain = fifo.config.endpoints("default").url
    for seq in (1, 2):
        fifo.sqs.send_message(
            QueueUrl=plain,
            MessageBody=Envelope.new("ledger.apply", {"account_id": "A", "seq": seq}).to_body(),
        )
    with caplog.at_level(logging.WARNING, logger="jobframework.consumer"):
        consume_once(fifo.handler, fifo.sqs, plain)
    assert sorted(seq for seq, _, ok in runs("A") if ok) == [1, 2]
    said = [r.getMessage() for r in caplog.records if "is ordered (ordered_by=)" in r.getMessage()]
    assert said == [
        "job type ledger.apply is ordered (ordered_by=), but a job of it came on the default queue, not a "
        "FIFO one: it runs without its group's order (sent before the job was made ordered, or by a "
        "producer that routes it the old way; redeploy producers with the job's module or catalog)"
    ]
