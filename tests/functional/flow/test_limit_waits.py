"""A record over its concurrency cap waits in its process for a lease held there (flow/limits.py).

A trial's 300 jobs of 0.2 s on ``concurrency=3`` ran at 3.75 jobs/s where 15 were possible: a lease
was held until its batch settled, and every record over the cap went round the queue, 1 to 30 s.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest

from jobframework.consumer import consumer
from jobframework.errors import ConfigurationError
from jobframework.flow.local_leases import lease_name
from jobframework.state import JobState

from . import flow_jobs
from .flow_jobs import Item, ledger


@pytest.fixture(autouse=True)
def _fresh():
    ledger.clear()
    flow_jobs.hold.clear()
    yield
    flow_jobs.hold.set()  # (a run still held ends)


def _lease_item(flow, pk: str) -> dict[str, Any]:
    item: dict[str, Any] = flow.dynamodb.get_item(
        TableName=flow.config.state_table,
        Key={"pk": {"S": pk}, "sk": {"S": "concurrency"}},
        ConsistentRead=True,
    )["Item"]
    return item


def test_records_over_the_cap_wait_in_their_process_and_are_handed_the_lease(flow):
    """Four consumers of one process, eight jobs on concurrency=2: never more than two at once, and
    none goes round the queue; each run that ends hands its lease on in one write."""
    ids = [flow.client.enqueue("f.capped", Item(name=f"c{n}")).id for n in range(8)]
    stop = time.monotonic() + 30

    def poll() -> None:
        while len(flow_jobs.ran) < 8 and time.monotonic() < stop:
            flow.consume("default", max_messages=3)

    threads = [threading.Thread(target=poll) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(40)
    assert ledger.peak["all"] == 2
    assert sorted(r["name"] for r in flow_jobs.ran) == sorted(f"c{n}" for n in range(8))
    # (one at most: a take refused in the moment between another's take and its hold being noted)
    assert len([o for o in flow.outcomes if o.outcome == "released"]) <= 1, flow.outcomes
    assert all(flow.client.status(i).status is JobState.SUCCEEDED for i in ids)
    item = _lease_item(flow, "limit#f.capped")
    assert item["leases"]["M"] == {}
    # Each write adds one to the item's version: a take and a free a job would be 16; a hand-over is
    # both in one write.
    assert int(item["version"]["N"]) <= 13, item


def test_a_lease_is_freed_when_its_run_ends_not_when_its_batch_settles(flow):
    """Records run one at a time (a cpu lane's way): each takes the lease the one before it freed."""
    serial = consumer(
        flow_jobs.registry,
        config=flow.config,
        sqs_client=flow.sqs,
        concurrency=1,
        listeners=[flow.outcomes.append],
    )
    for n in range(4):
        flow.client.enqueue("f.capped_one", Item(name=f"s{n}"))
    from jobframework.testing import consume_once

    started = time.monotonic()
    records, response = consume_once(serial, flow.sqs, flow.url("default"), max_messages=4)
    assert len(records) == 4 and response == {"batchItemFailures": []}
    assert [o.outcome for o in flow.outcomes] == ["succeeded"] * 4
    assert time.monotonic() - started < 5  # (no record waited out JF_LIMIT_WAIT)


def test_a_wait_that_runs_out_hands_the_record_back(flow, monkeypatch, caplog):
    """JF_LIMIT_WAIT bounds the wait: past it, the record is handed back with the back-off."""
    monkeypatch.setenv("JF_LIMIT_WAIT", "0.5")
    for n in range(2):
        flow.client.enqueue("f.capped_one", Item(name=f"hold{n}"))
    release = threading.Timer(2.0, flow_jobs.hold.set)
    release.start()
    try:
        with caplog.at_level(logging.INFO, logger="jobframework.flow.limits"):
            records, response = flow.consume("default", max_messages=2)
    finally:
        release.cancel()
    assert len(records) == 2 and response == {"batchItemFailures": []}
    assert sorted((o.outcome, o.reason) for o in flow.outcomes) == [
        ("released", "concurrency limit"),
        ("succeeded", None),
    ]
    [over] = [r for r in caplog.records if "over its concurrency cap" in r.getMessage()]
    waited = over.created - ledger.starts[0]  # from the held run's start to the hand-back
    assert 0.4 <= waited < 1.9, waited
    assert ledger.peak["one"] == 1


def test_a_record_whose_cap_is_held_by_another_process_takes_the_lease_once_freed_there(flow):
    """Two processes (two consumers) on one cap: the record here looks again until the run elsewhere
    ends, then runs, unhanded-back (a trial's two jf worker processes ran at half their cap while
    each record over it went round the queue)."""
    other = consumer(
        flow_jobs.registry, config=flow.config, sqs_client=flow.sqs, listeners=[flow.outcomes.append]
    )
    from jobframework.testing import consume_once

    flow.client.enqueue("f.capped_one", Item(name="hold-elsewhere"))
    elsewhere = threading.Thread(target=consume_once, args=(other, flow.sqs, flow.url("default")))
    elsewhere.start()
    deadline = time.monotonic() + 10
    while ledger.peak["one"] == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    waiting = flow.client.enqueue("f.capped_one", Item(name="here")).id
    freed: list[float] = []
    release = threading.Timer(1.0, lambda: (freed.append(time.time()), flow_jobs.hold.set()))
    release.start()
    try:
        flow.consume("default")
    finally:
        release.cancel()
        flow_jobs.hold.set()
        elsewhere.join(10)
    assert [r["name"] for r in flow_jobs.ran] == ["hold-elsewhere", "here"]
    assert [o.outcome for o in flow.outcomes if o.job_id == waiting] == ["succeeded"]
    assert ledger.peak["one"] == 1
    took = ledger.starts[1] - freed[0]  # from the run's end elsewhere to this one's start
    assert 0 <= took < 2.0, took  # (a look at most every 0.5 s)


def _requests(flow) -> list[str]:
    """The state table's lease reads and writes made through ``flow.dynamodb`` from now on."""
    made: list[str] = []
    for operation in ("GetItem", "UpdateItem"):
        flow.dynamodb.meta.events.register(
            f"before-parameter-build.dynamodb.{operation}", lambda model, **_: made.append(model.name)
        )
    return made


def test_one_record_a_process_looks_again_while_its_cap_is_held_elsewhere(flow, monkeypatch):
    """Each look is one read (a refused write the first time), the pause doubling to 0.5 s; a second
    record waits in line behind the first, and is handed its lease when the first one's run ends."""
    from jobframework.envelope import Envelope
    from jobframework.flow import local_leases
    from jobframework.flow.limits import ConcurrencyLimit
    from jobframework.flow.outcome import HandBack
    from jobframework.state import StateStore

    gate, job = _gate_and_job(flow)
    pk = "limit#f.capped_one"
    elsewhere = ConcurrencyLimit(StateStore(str(flow.config.state_table), flow.dynamodb))
    assert elsewhere.acquire(pk, "elsewhere", 1, time.time() + 60, time.time())
    made = _requests(flow)
    a, b = (Envelope.new("f.capped_one", {"name": n}) for n in "ab")
    started = time.monotonic()
    assert isinstance(_take(gate, job, a, "h-a", may_wait=1.5), HandBack)  # nothing freed in time
    waited = time.monotonic() - started
    assert 1.4 <= waited < 3, waited
    # (about 1.5 s of looks, 0.025 to 0.5 s apart; a review found each look a refused write)
    assert made.count("UpdateItem") == 1 and 4 <= made.count("GetItem") <= 20, made

    monkeypatch.setattr(local_leases, "POLL_REST_SECONDS", 0.0)  # (no rest after that look ran out)
    results: dict[str, Any] = {}
    takes = [
        threading.Thread(target=lambda e=e, h=h: results.update({h: _take(gate, job, e, h)}))
        for e, h in ((a, "h-a"), (b, "h-b"))
    ]
    for take in takes:
        take.start()
    deadline = time.monotonic() + 5
    while gate.leases.waiting(pk) == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert gate.leases.waiting(pk) == 1  # one in line behind the other's looks
    time.sleep(1.0)
    made.clear()
    time.sleep(1.5)
    assert len(made) <= 7, made  # one record looks (0.25 to 0.5 s apart by now), not two
    elsewhere.release(pk, "elsewhere")
    deadline = time.monotonic() + 5
    while not results and time.monotonic() < deadline:
        time.sleep(0.01)
    [(first, taken)] = results.items()  # the one that looked took the lease freed elsewhere
    assert taken is None
    gate.release(first)  # its run ends: the lease is handed to the other
    for take in takes:
        take.join(5)
    [other] = {"h-a", "h-b"} - {first}
    assert results[other] is None
    other_id = a.id if other == "h-a" else b.id
    assert set(_lease_item(flow, pk)["leases"]["M"]) == {lease_name(other_id, other)}


def test_after_a_look_again_runs_out_its_cap_is_handed_back_at_once_a_while(flow, monkeypatch):
    """A lane that runs one record at a time had each record look for 5 s (50 s of a batch, billed):
    for POLL_REST_SECONDS after one ran out, a record is handed back after one read."""
    from jobframework.envelope import Envelope
    from jobframework.flow import limits, local_leases
    from jobframework.flow.outcome import HandBack

    monkeypatch.setattr(limits, "ELSEWHERE_WAIT_SECONDS", 0.4)
    monkeypatch.setattr(local_leases, "POLL_REST_SECONDS", 1.0)
    gate, job = _gate_and_job(flow)
    elsewhere = limits.ConcurrencyLimit(gate.leases.limit.store)
    assert elsewhere.acquire("limit#f.capped_one", "elsewhere", 1, time.time() + 60, time.time())
    envs = [Envelope.new("f.capped_one", {"name": f"r{n}"}) for n in range(3)]
    started = time.monotonic()
    assert isinstance(_take(gate, job, envs[0], "h-0"), HandBack)
    assert time.monotonic() - started >= 0.35  # it looked
    made = _requests(flow)
    started = time.monotonic()
    assert isinstance(_take(gate, job, envs[1], "h-1"), HandBack)
    assert time.monotonic() - started < 0.3 and made == ["GetItem"], made  # (one look: is it still full?)
    time.sleep(1.1)
    started = time.monotonic()
    assert isinstance(_take(gate, job, envs[2], "h-2"), HandBack)
    assert time.monotonic() - started >= 0.35  # rested: it looks again


def test_records_in_line_behind_a_look_that_fails_are_not_left_waiting(flow):
    """The look's read raised (throttled, say): the records in line behind it are woken, and hand back
    as it does, rather than wait out their job's timeout."""
    from jobframework.envelope import Envelope
    from jobframework.flow.limits import ConcurrencyLimit
    from jobframework.flow.outcome import HandBack
    from jobframework.state import StateStore

    gate, job = _gate_and_job(flow)
    pk = "limit#f.capped_one"
    elsewhere = ConcurrencyLimit(StateStore(str(flow.config.state_table), flow.dynamodb))
    assert elsewhere.acquire(pk, "elsewhere", 1, time.time() + 60, time.time())
    results: list[Any] = []
    takes = [
        threading.Thread(target=lambda e=e, h=h: results.append(_take(gate, job, e, h, may_wait=8.0)))
        for e, h in ((Envelope.new("f.capped_one", {"name": n}), f"h-{n}") for n in "ab")
    ]
    for take in takes:
        take.start()
    deadline = time.monotonic() + 5
    while gate.leases.waiting(pk) == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert gate.leases.waiting(pk) == 1

    def throttled(**_: Any) -> None:
        raise RuntimeError("ProvisionedThroughputExceededException (injected)")

    flow.dynamodb.meta.events.register("before-call.dynamodb.GetItem", throttled)
    started = time.monotonic()
    for take in takes:
        take.join(10)
    assert time.monotonic() - started < 3  # (not the 8 s they could wait)
    assert [(type(r), r.reason) for r in results] == [(HandBack, "limits unavailable")] * 2, results


def _gate_and_job(flow, name: str = "f.capped_one") -> tuple[Any, Any]:
    from jobframework.flow.limits import LimitGate
    from jobframework.state import StateStore

    job = flow_jobs.registry.find(name)
    assert job is not None
    return LimitGate(StateStore(str(flow.config.state_table), flow.dynamodb)), job


def _take(gate, job, env, holder: str, may_wait: float = 5.0) -> Any:
    from jobframework.flow.outcome import RateInputs

    return gate(env, job, Item(name="x"), 1, time.time(), rate=RateInputs(may_wait=may_wait, holder=holder))


def _waiting_in_thread(gate, job, env, holder: str) -> tuple[threading.Thread, list[Any]]:
    result: list[Any] = []
    waiter = threading.Thread(target=lambda: result.append(_take(gate, job, env, holder)))
    waiter.start()
    deadline = time.monotonic() + 5
    while gate.leases.waiting("limit#f.capped_one") == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert gate.leases.waiting("limit#f.capped_one") == 1  # in line for the lease its process holds
    return waiter, result


def _prune(flow, lease: str) -> None:
    """What another writer's take does to a lease it finds expired."""
    flow.dynamodb.update_item(
        TableName=flow.config.state_table,
        Key={"pk": {"S": "limit#f.capped_one"}, "sk": {"S": "concurrency"}},
        UpdateExpression="REMOVE leases.#a ADD version :one",
        ExpressionAttributeNames={"#a": lease},
        ExpressionAttributeValues={":one": {"N": "1"}},
    )


def test_a_cap_held_elsewhere_is_looked_at_for_5_s_unless_jf_limit_wait_says(flow, monkeypatch):
    """Every Lambda invocation on a capped backlog would wait, billed: where no run of its own holds a
    lease, a record looks for ELSEWHERE_WAIT_SECONDS (5 s), not its job's timeout; JF_LIMIT_WAIT, when
    set, is the wait either way."""
    from jobframework.envelope import Envelope
    from jobframework.flow import limits, local_leases
    from jobframework.flow.outcome import HandBack

    monkeypatch.setattr(limits, "ELSEWHERE_WAIT_SECONDS", 0.6)
    monkeypatch.setattr(local_leases, "POLL_REST_SECONDS", 0.0)
    gate, job = _gate_and_job(flow)
    elsewhere = limits.ConcurrencyLimit(gate.leases.limit.store)
    assert elsewhere.acquire("limit#f.capped_one", "elsewhere", 1, time.time() + 60, time.time())
    env = Envelope.new("f.capped_one", {"name": "x"})
    for limit_wait, low, high in ((None, 0.55, 1.5), ("1.5", 1.45, 2.5)):
        if limit_wait is not None:
            monkeypatch.setenv("JF_LIMIT_WAIT", limit_wait)
        started = time.monotonic()
        assert isinstance(_take(gate, job, env, "h-x", may_wait=8.0), HandBack)  # (its timeout is 10 s)
        assert low <= time.monotonic() - started < high, (limit_wait, time.monotonic() - started)


def test_a_lease_that_lapsed_before_its_hand_over_is_taken_anew(flow):
    """The run's lease was pruned as expired by another writer: the waiter takes one itself."""
    from jobframework.envelope import Envelope

    gate, job = _gate_and_job(flow)
    first, second = (Envelope.new("f.capped_one", {"name": n}) for n in ("a", "b"))
    assert _take(gate, job, first, "h-a") is None
    waiter, result = _waiting_in_thread(gate, job, second, "h-b")
    _prune(flow, lease_name(first.id, "h-a"))
    gate.release("h-a")
    waiter.join(5)
    assert result == [None]  # it took a lease
    assert set(_lease_item(flow, "limit#f.capped_one")["leases"]["M"]) == {lease_name(second.id, "h-b")}


def test_a_lapsed_lease_whose_slot_another_took_is_not_handed_over(flow):
    """The hand-over is conditional on the run's lease still being there: a slot taken meanwhile by
    another process stays its own (the cap holds), and the waiter looks again until it is freed."""
    from jobframework.envelope import Envelope
    from jobframework.flow.limits import ConcurrencyLimit
    from jobframework.state import StateStore

    gate, job = _gate_and_job(flow)
    first, second = (Envelope.new("f.capped_one", {"name": n}) for n in ("a", "b"))
    assert _take(gate, job, first, "h-a") is None
    waiter, result = _waiting_in_thread(gate, job, second, "h-b")
    _prune(flow, lease_name(first.id, "h-a"))
    elsewhere = ConcurrencyLimit(StateStore(str(flow.config.state_table), flow.dynamodb))
    assert elsewhere.acquire("limit#f.capped_one", "elsewhere", 1, time.time() + 60, time.time())
    gate.release("h-a")
    time.sleep(0.5)
    assert result == [] and set(_lease_item(flow, "limit#f.capped_one")["leases"]["M"]) == {"elsewhere"}
    elsewhere.release("limit#f.capped_one", "elsewhere")  # (the waiter, looking again, takes it)
    waiter.join(5)
    assert result == [None]
    assert set(_lease_item(flow, "limit#f.capped_one")["leases"]["M"]) == {lease_name(second.id, "h-b")}


def test_two_deliveries_of_one_job_at_once_are_two_runs_under_the_cap(flow):
    """SQS may deliver a job twice at once: each delivery takes a lease of its own, so both count, and
    the end of one frees its own only (a trial's cap of 3 ran 4 when the end of a job's second
    delivery freed the lease its first still ran under)."""
    from jobframework.envelope import Envelope
    from jobframework.flow.outcome import HandBack

    gate, job = _gate_and_job(flow)
    env = Envelope.new("f.capped_one", {"name": "twice"})
    assert _take(gate, job, env, "receipt-1") is None
    assert isinstance(_take(gate, job, env, "receipt-2", may_wait=0.1), HandBack)  # (its cap is one)
    gate.release("receipt-2")  # (it held none: nothing is freed)
    assert set(_lease_item(flow, "limit#f.capped_one")["leases"]["M"]) == {lease_name(env.id, "receipt-1")}
    gate.release("receipt-1")
    assert _lease_item(flow, "limit#f.capped_one")["leases"]["M"] == {}


def test_a_record_waits_no_longer_than_its_time_to_spare_nor_for_a_run_too_long_to_end_in_time(
    flow, monkeypatch
):
    from jobframework.envelope import Envelope
    from jobframework.flow.outcome import HandBack

    gate, job = _gate_and_job(flow)
    a, b, c = (Envelope.new("f.capped_one", {"name": n}) for n in "abc")
    assert _take(gate, job, a, "h-a") is None
    started = time.monotonic()
    assert isinstance(_take(gate, job, b, "h-b", may_wait=0.3), HandBack)  # (JF_LIMIT_WAIT is 10 s)
    assert 0.25 <= time.monotonic() - started < 2
    time.sleep(0.5)
    gate.release("h-a")  # a run of 0.8 s: one that waits 0.4 s would wait for the next in vain
    assert _take(gate, job, b, "h-b") is None
    monkeypatch.setenv("JF_LIMIT_WAIT", "0.4")
    started = time.monotonic()
    assert isinstance(_take(gate, job, c, "h-c"), HandBack)
    assert time.monotonic() - started < 0.3


def test_a_hold_left_by_a_failed_admission_is_freed(flow, jf_aws):
    """A gate after the limits raised: the lease its record took is freed at once, and no later record
    waits for a run that will never end here."""
    from jobframework.gates import DEFAULT_GATES

    def failing(admitted, consumer_):
        raise RuntimeError("a gate of the team's own failed")

    handler = consumer(
        flow_jobs.registry,
        config=flow.config,
        sqs_client=flow.sqs,
        gates=[*DEFAULT_GATES, failing],
        listeners=[flow.outcomes.append],
    )
    from jobframework.testing import consume_once

    flow.client.enqueue("f.capped_one", Item(name="fails"))
    consume_once(handler, flow.sqs, flow.url("default"))
    assert _lease_item(flow, "limit#f.capped_one")["leases"]["M"] == {}


def test_a_batched_jobs_leases_are_free_once_its_call_ends(flow):
    """A plain job sharing a cap with a batched one waited out JF_LIMIT_WAIT for leases freed only when
    the batch settled."""
    flow.client.enqueue("f.grp_batch", Item(name="in-a-call"))
    flow.client.enqueue("f.grp_single", Item(name="alone"))
    started = time.monotonic()
    records, _ = flow.consume("default", max_messages=2)
    assert len(records) == 2 and time.monotonic() - started < 5
    assert sorted(o.outcome for o in flow.outcomes) == ["succeeded", "succeeded"]


def test_a_batched_jobs_items_over_the_cap_do_not_wait(flow):
    """A batched job's items wait for no lease: the leases are its own call's, which runs after."""
    for n in range(4):
        flow.client.enqueue("f.capped_batch", Item(name=f"b{n}"))
    started = time.monotonic()
    flow.consume("default", max_messages=4)
    assert time.monotonic() - started < 5
    assert len(flow_jobs.ran) == 2
    assert sorted(o.outcome for o in flow.outcomes) == ["released", "released", "succeeded", "succeeded"]


@pytest.mark.parametrize("raw", ["soon", "-1", "901", "nan"])
def test_a_bad_limit_wait_is_refused_when_the_consumer_is_made(flow, monkeypatch, raw):
    monkeypatch.setenv("JF_LIMIT_WAIT", raw)
    with pytest.raises(
        ConfigurationError, match=r"JF_LIMIT_WAIT must be the seconds .* 0 \(hand it back at once\) to 900"
    ):
        consumer(flow_jobs.registry, config=flow.config, sqs_client=flow.sqs)


def test_a_per_key_cap_keeps_no_counts_for_keys_long_idle(flow, monkeypatch):
    """A cap per customer would keep an entry a customer for a worker's life: idle ones are dropped."""
    from jobframework.flow import local_leases

    monkeypatch.setattr(local_leases, "MAX_IDLE_CAPS", 3)
    gate, _ = _gate_and_job(flow)
    leases = gate.leases
    for n in range(8):
        pk = f"limit#f.per-tenant#t{n}"
        assert leases.take(pk, f"j{n}", holder=f"h{n}", cap=1, lease_seconds=30, deadline=time.monotonic())
        leases.release(f"h{n}")
    assert leases.caps_kept() <= 4


def test_a_full_cap_whose_leases_keep_changing_hands_is_refused_not_an_error(flow, jf_aws):
    """Two processes handing leases over all the time: each read finds the item changed, still full.
    A trial's records were handed back "limits unavailable", with a traceback each, after eight."""
    from jobframework.flow.limits import ConcurrencyLimit
    from jobframework.state import StateStore

    pk = "limit#f.capped_one"
    limit = ConcurrencyLimit(StateStore(str(flow.config.state_table), flow.dynamodb))
    assert limit.acquire(pk, "run-0", 1, time.time() + 60, time.time())
    other = jf_aws.client("dynamodb")
    hands = iter(range(1, 100))

    def hand_over(**_: Any) -> None:  # another process's run hands its lease on, before each read
        n = next(hands)
        other.update_item(
            TableName=flow.config.state_table,
            Key={"pk": {"S": pk}, "sk": {"S": "concurrency"}},
            UpdateExpression="REMOVE leases.#a SET leases.#b = :until ADD version :one",
            ExpressionAttributeNames={"#a": f"run-{n - 1}", "#b": f"run-{n}"},
            ExpressionAttributeValues={":until": {"N": str(time.time() + 60)}, ":one": {"N": "1"}},
        )

    flow.dynamodb.meta.events.register("before-call.dynamodb.GetItem", hand_over)
    assert limit.acquire(pk, "here", 1, time.time() + 60, time.time()) is False
    assert next(hands) == 2  # refused on the one read's item, as it was then: full


def test_the_first_in_line_takes_a_lease_freed_by_another_process(flow):
    """A line waited for its own process's runs only: a lease another process freed went unused until
    one of them ended. The first in line looks at the item every 0.5 s as well."""
    from jobframework.envelope import Envelope
    from jobframework.flow.limits import ConcurrencyLimit
    from jobframework.state import StateStore

    gate, job = _gate_and_job(flow, "f.capped")  # (concurrency=2)
    pk = "limit#f.capped"
    elsewhere = ConcurrencyLimit(StateStore(str(flow.config.state_table), flow.dynamodb))
    assert elsewhere.acquire(pk, "elsewhere", 2, time.time() + 60, time.time())
    a, b = (Envelope.new("f.capped", {"name": n}) for n in "ab")
    assert _take(gate, job, a, "h-a") is None  # the cap is full: one here, one elsewhere
    result: list[Any] = []
    waiter = threading.Thread(target=lambda: result.append(_take(gate, job, b, "h-b")))
    waiter.start()
    deadline = time.monotonic() + 5
    while gate.leases.waiting(pk) == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert gate.leases.waiting(pk) == 1  # in line behind h-a's run
    elsewhere.release(pk, "elsewhere")
    waiter.join(5)
    assert result == [None]  # it took the freed lease while h-a still runs
    assert set(_lease_item(flow, pk)["leases"]["M"]) == {lease_name(a.id, "h-a"), lease_name(b.id, "h-b")}
    gate.release("h-a")
    gate.release("h-b")


def test_one_record_of_a_line_looks_at_a_time_and_the_line_keeps_its_order(flow):
    """Every waiter of a line had looked, each on its own tick (out of line while it did, so the line
    came back reversed and a run's lease went to the last in it): one look a cap at a time now."""
    from jobframework.envelope import Envelope

    gate, job = _gate_and_job(flow)
    pk = "limit#f.capped_one"
    first = Envelope.new("f.capped_one", {"name": "run"})
    assert _take(gate, job, first, "h-run") is None  # a run here holds the cap
    granted: list[str] = []
    waiters = []
    for n in range(4):
        env = Envelope.new("f.capped_one", {"name": f"w{n}"})
        holder = f"h-w{n}"
        waiter = threading.Thread(
            target=lambda e=env, h=holder: granted.append(h) if _take(gate, job, e, h) is None else None
        )
        waiter.start()
        waiters.append(waiter)
        deadline = time.monotonic() + 5
        while gate.leases.waiting(pk) < n + 1 and time.monotonic() < deadline:
            time.sleep(0.01)
    assert gate.leases.waiting(pk) == 4
    made = _requests(flow)
    time.sleep(2.0)
    assert made.count("GetItem") <= 6, made  # (one look each 0.5 s, not four)
    gate.release("h-run")  # the run ends: its lease goes to the first in line
    deadline = time.monotonic() + 5
    while not granted and time.monotonic() < deadline:
        time.sleep(0.01)
    assert granted == ["h-w0"]
    for holder in ("h-w0", "h-w1", "h-w2"):
        deadline = time.monotonic() + 5
        while holder not in granted and time.monotonic() < deadline:
            time.sleep(0.01)
        gate.release(holder)
    for waiter in waiters:
        waiter.join(10)
    assert granted == ["h-w0", "h-w1", "h-w2", "h-w3"]
    gate.release("h-w3")


def test_a_run_whose_hand_over_is_refused_frees_its_own_lease(flow):
    """The waiter's entry was in the item already (another delivery of its job under the same name):
    the hand-over's condition failed and the run's own entry stayed, a slot taken until it expired."""
    from jobframework.envelope import Envelope

    gate, job = _gate_and_job(flow)
    pk = "limit#f.capped_one"
    first, second = (Envelope.new("f.capped_one", {"name": n}) for n in ("a", "b"))
    assert _take(gate, job, first, "h-a") is None
    waiter, result = _waiting_in_thread(gate, job, second, "h-b")
    flow.dynamodb.update_item(  # the waiter's entry, written meanwhile
        TableName=flow.config.state_table,
        Key={"pk": {"S": pk}, "sk": {"S": "concurrency"}},
        UpdateExpression="SET leases.#b = :until ADD version :one",
        ExpressionAttributeNames={"#b": lease_name(second.id, "h-b")},
        ExpressionAttributeValues={":until": {"N": str(time.time() + 60)}, ":one": {"N": "1"}},
    )
    gate.release("h-a")
    waiter.join(10)
    assert result == [None]  # the waiter took the slot itself
    assert set(_lease_item(flow, pk)["leases"]["M"]) == {lease_name(second.id, "h-b")}
