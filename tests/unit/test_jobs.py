"""@job options, the registry, the envelope and the topology: pure logic."""

from __future__ import annotations

import asyncio
import functools
import json
import re
import warnings
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, SecretStr, ValidationError, field_serializer

from jobframework.envelope import Envelope, parse_body
from jobframework.errors import (
    ConfigurationError,
    DuplicateJobError,
    MalformedMessageError,
    PayloadVersionError,
    TopologyWarning,
)
from jobframework.jobs import BatchOptions, JobContext, JobRegistry, Priority, Schedule, job
from jobframework.retry import RetryPolicy
from jobframework.testing import run_inline
from jobframework.topology import RuntimeConfig, Topology, TopologySettings


class Order(BaseModel):
    order_id: str
    amount: int = 1


@pytest.fixture
def reg() -> JobRegistry:
    return JobRegistry()


def test_job_takes_its_model_from_the_first_parameter(reg):
    @job("orders.ship", registry=reg, priority="high", key=lambda o: f"ship:{o.order_id}")
    def ship(order: Order, ctx: JobContext) -> str:
        return f"{order.order_id}@{ctx.attempt}"

    assert ship.payload_model is Order and ship.takes_context
    assert ship.priority is Priority.HIGH and ship.retry.max_attempts == 5
    assert reg.get("orders.ship") is ship
    assert ship.key_for(Order(order_id="7")) == "ship:7"
    assert run_inline(ship, {"order_id": "7"}, attempt=2) == "7@2"


class Person(BaseModel):
    first: str
    last: str


def _split(v1: dict[str, Any]) -> dict[str, Any]:
    first, _, last = v1["name"].partition(" ")
    return {"first": first, "last": last}


def test_run_inline_upgrades_an_old_payload_as_the_consumer_does(reg):
    @job("people.greet", registry=reg, version=2, upgrade={1: _split})
    def greet(person: Person) -> str:
        return f"{person.last}, {person.first}"

    assert run_inline(greet, {"name": "Ada Lovelace"}, payload_version=1) == "Lovelace, Ada"
    assert run_inline(greet, {"first": "Alan", "last": "Turing"}) == "Turing, Alan"  # current version
    with pytest.raises(PayloadVersionError, match="newer than this consumer's 2"):
        run_inline(greet, {"first": "x", "last": "y"}, payload_version=3)


def test_a_test_envelope_carries_the_registered_jobs_version(reg, monkeypatch):
    """After ``version=2``, ``Envelope.new`` in a test sends what the client sends now (a v2 payload
    labelled 1 was upgraded as v1 and dead-lettered ``version`` while the test passed)."""
    import jobframework.jobs
    from jobframework.envelope import Envelope

    monkeypatch.setattr(jobframework.jobs, "registry", reg)

    @job("people.greet", registry=reg, version=2, upgrade={1: _split})
    def greet(person: Person) -> str:
        return person.first

    assert Envelope.new("people.greet", {"first": "A", "last": "L"}).payload_version == 2
    assert Envelope.new("people.greet", {"name": "A L"}, payload_version=1).payload_version == 1
    assert Envelope.new("people.unknown", {}).payload_version == 1


def test_run_inline_gives_the_context_the_id_key_and_attempt_asked_for(reg):
    @job("orders.pack", registry=reg, key=lambda o: f"pack:{o.order_id}")
    def pack(order: Order, ctx: JobContext) -> tuple[str, str, int, bool]:
        return ctx.job_id, ctx.key, ctx.attempt, ctx.is_last_attempt

    assert run_inline(pack, {"order_id": "7"}, job_id="job-7", attempt=3) == ("job-7", "pack:7", 3, True)
    own_id, key, _, _ = run_inline(pack, {"order_id": "8"}, key="custom")
    assert key == "custom" and len(own_id) == 36 and own_id[14] == "7"  # a UUIDv7 by default


def test_run_inline_awaits_an_async_job_and_raises_what_it_raises(reg):
    import asyncio

    @job("orders.quote", registry=reg)
    async def quote(order: Order, ctx: JobContext) -> str:
        await asyncio.sleep(0)
        if order.amount < 0:
            raise ValueError("a negative amount")
        return f"{order.order_id}:{order.amount * 2}@{ctx.attempt}"

    assert run_inline(quote, {"order_id": "7", "amount": 3}) == "7:6@1"
    with pytest.raises(ValueError, match="negative"):
        run_inline(quote, {"order_id": "7", "amount": -1})


def test_an_async_job_is_stopped_at_its_timeout_and_its_own_timeout_error_is_its_own(reg):
    """A trial's async job with timeout=1 slept 3 s and succeeded: a coroutine can be cancelled."""
    import asyncio

    from jobframework.errors import JobTimedOut

    @job("orders.slow", registry=reg, timeout=0.2)
    async def slow(order: Order) -> str:
        if order.amount < 0:
            raise TimeoutError("the carrier's own timeout")
        await asyncio.sleep(3)
        return "finished"

    with pytest.raises(JobTimedOut, match=r"ran past its timeout=0\.2 s") as stopped:
        run_inline(slow, {"order_id": "1", "amount": 1})
    assert isinstance(stopped.value, TimeoutError)  # transient: retried as a timeout is
    with pytest.raises(TimeoutError, match="the carrier's own timeout") as own:
        run_inline(slow, {"order_id": "2", "amount": -1})
    assert not isinstance(own.value, JobTimedOut)


def test_arun_inline_runs_an_async_job_on_the_tests_loop_and_a_plain_one_off_it(reg):
    """A trial's async test started a fake API on its loop; run_inline blocked that loop, and the job's
    call to the fake API hung until its client's timeout."""
    import asyncio
    import threading

    from jobframework.errors import JobTimedOut
    from jobframework.testing import arun_inline

    seen: dict[str, Any] = {}

    @job("orders.call_api", registry=reg, timeout=0.5)
    async def call_api(order: Order, ctx: JobContext) -> str:
        seen["loop"] = asyncio.get_running_loop()
        await asyncio.wait_for(seen["answered"].wait(), 2)  # the fake API: answers on the test's loop
        if order.amount < 0:
            await asyncio.sleep(3)  # past its timeout
        return f"{order.order_id}@{ctx.attempt}"

    @job("orders.plain", registry=reg)
    def plain(order: Order) -> bool:
        return bool(seen["released"].wait(2))  # set by a task of the test's loop

    async def test() -> tuple[str, bool]:
        seen["answered"], seen["released"] = asyncio.Event(), threading.Event()
        called = asyncio.create_task(arun_inline(call_api, {"order_id": "7", "amount": 1}, attempt=2))
        ran = asyncio.create_task(arun_inline(plain, {"order_id": "8", "amount": 1}))
        await asyncio.sleep(0.05)
        seen["answered"].set()
        seen["released"].set()
        assert seen["loop"] is asyncio.get_running_loop()
        with pytest.raises(JobTimedOut):
            await arun_inline(call_api, {"order_id": "9", "amount": -1})
        return await called, await ran

    # (on a thread of its own: a browser test's Playwright leaves its loop running in the main thread)
    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(asyncio.run, test()).result() == ("7@2", True)


def test_run_inline_from_a_running_loop_that_times_out_says_to_await_arun_inline(reg):
    """A trial's run_inline in an async test hung until the job's timeout, then said only that."""
    import asyncio

    from jobframework.errors import JobTimedOut

    @job("orders.on_loop", registry=reg, timeout=0.3)
    async def on_loop(order: Order) -> None:
        await asyncio.sleep(5)  # (as if waiting on a server of the blocked test loop)

    async def test() -> JobTimedOut:
        with pytest.raises(JobTimedOut) as stopped:
            run_inline(on_loop, {"order_id": "1", "amount": 1})
        return stopped.value

    def plain() -> JobTimedOut:  # (no loop running in its thread: no note)
        with pytest.raises(JobTimedOut) as stopped:
            run_inline(on_loop, {"order_id": "2", "amount": 1})
        return stopped.value

    # (each on a thread of its own: a browser test's Playwright leaves a loop running in the main thread)
    with ThreadPoolExecutor(1) as pool:
        timed_out = pool.submit(asyncio.run, test()).result()
        without = pool.submit(plain).result()
    assert any("await arun_inline(...)" in note for note in timed_out.__notes__)
    assert not getattr(without, "__notes__", None)


def test_a_cancellation_of_the_awaiting_task_is_no_failure_of_the_job():
    """A review: arun_inline under a test's own timeout (asyncio.wait_for, a TaskGroup) turned the test's
    cancellation into the job's JobAborted; a CancelledError the job's own code leaks still is one."""
    import asyncio

    from jobframework.running import JobAborted, awaited

    async def runs() -> None:
        await asyncio.sleep(5)

    async def leaks() -> None:
        raise asyncio.CancelledError

    async def test() -> None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(awaited(runs(), 5), 0.1)
        with pytest.raises(JobAborted):
            await awaited(leaks(), 5)

    with ThreadPoolExecutor(1) as pool:  # (off the main thread: see the arun_inline test)
        pool.submit(asyncio.run, test()).result()


def test_a_version_that_takes_its_own_payloads_only_says_so_with_an_empty_upgrade(reg):
    @job("orders.v2", registry=reg, version=2, upgrade={})
    def v2(order: Order) -> None: ...

    with pytest.raises(PayloadVersionError, match="no upgrade from payload version 1 to 2"):
        run_inline(v2, {"order_id": "1", "amount": 1}, payload_version=1)


def test_a_broken_upgrade_names_itself_and_the_fields_the_old_payload_had(reg):
    def add_currency(old: dict) -> dict:
        return {**old, "currency": old["customer"]["currency"]}  # (v1 has no "customer")

    @job("orders.v2b", registry=reg, version=2, upgrade={1: add_currency})
    def v2(order: Order) -> None: ...

    with pytest.raises(PayloadVersionError) as raised:
        run_inline(v2, {"order_id": "1", "amount": 1}, payload_version=1)
    message = str(raised.value)
    assert "upgrade from payload version 1 to 2" in message
    assert "add_currency" in message and "KeyError('customer')" in message
    assert "fields: order_id, amount" in message
    # where it was sent, not consumed: no letter to redrive, and most often fields of another version
    assert "were these fields version 1's? payload_version= names the version" in message
    assert "redrive" not in message
    with pytest.raises(PayloadVersionError) as consumed:  # (a consumer's: fix, deploy, redrive)
        v2.upgrade({"order_id": "1", "amount": 1}, 1)
    assert "(fix the upgrade, deploy, then redrive the letter)" in str(consumed.value)


def test_a_job_without_context_is_called_with_the_payload_only(reg):
    @job("orders.count", registry=reg)
    def count(order: Order) -> int:
        return order.amount

    assert not count.takes_context
    assert run_inline(count, Order(order_id="1", amount=3)) == 3


def test_calling_a_job_that_takes_a_context_without_one_says_to_pass_it_or_run_it_inline(reg):
    @job("orders.ship", registry=reg)
    def ship(order: Order, ctx: JobContext) -> str:
        return f"{order.order_id} by {ctx.job_id}"

    with pytest.raises(
        TypeError, match=r"orders\.ship takes a JobContext: pass one \(ship\(payload, ctx\)\)"
    ):
        ship(Order(order_id="1"))  # (the function saw ctx=None: AttributeError in the user's code)
    assert run_inline(ship, Order(order_id="1"), job_id="j-1") == "1 by j-1"
    ctx = JobContext(
        job_id="j-2",
        job_type="orders.ship",
        key="j-2",
        attempt=1,
        max_attempts=3,
        priority=Priority.DEFAULT,
        enqueued_at=datetime.now(UTC),
    )
    assert ship(Order(order_id="2"), ctx) == "2 by j-2"

    @job("orders.note", registry=reg)
    def note(order: Order, ctx: JobContext | None = None) -> str:
        return f"{order.order_id} {'with' if ctx else 'without'} a context"

    assert note(Order(order_id="3")) == "3 without a context"  # its default applies


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"priority": "urgent"}, "critical, high, default, low"),
        ({"retry": 3}, "RetryPolicy"),
        ({"permanent": ValueError, "transient": ValueError}, "choose one"),
        ({"permanent": "ValueError"}, "exception classes"),
        ({"timeout": 43_201}, "at most 43,200 seconds"),
        ({"timeout": 0}, "at most 43,200 seconds"),
        ({"key": "order_id"}, "function of the payload"),
        ({"schedule": "every day"}, "EventBridge Scheduler expression"),
        ({"schedule": "cron(0 3 * * MON *)"}, r"job orders\.bad: schedule 'cron\(0 3 \* \* MON \*\)'"),
        ({"version": 3, "upgrade": {1: dict}}, "no step from version 2 to 3"),  # 1 -> 2, then stuck
        ({"version": 2}, r"version=2 without upgrade=: .*upgrade=\{1: fn\}.*or upgrade=\{\} to take"),
        ({"profile": "gpu"}, r"profile must be 'io' or 'cpu', got 'gpu'"),
        ({"when_backlogged": "drop"}, r"when_backlogged must be 'run', 'skip' or 'defer', got 'drop'"),
    ],
)
def test_bad_options_fail_when_the_decorator_is_applied(reg, options, message):
    with pytest.raises(ConfigurationError, match=message):
        job("orders.bad", registry=reg, **options)


def test_unknown_options_are_refused(reg):
    with pytest.raises(TypeError):  # (a ConfigurationError too, saying what to write: below)
        job("orders.bad", registry=reg, retries=3)  # type: ignore[call-arg]


@pytest.mark.parametrize("name", ["", "has space", "1starts.with.digit", "trailing."])
def test_bad_names_are_refused(reg, name):
    with pytest.raises(ConfigurationError, match="not valid"):
        job(name, registry=reg)


def test_the_payload_must_be_annotated_with_a_model(reg):
    with pytest.raises(ConfigurationError, match="pydantic BaseModel"):

        @job("orders.untyped", registry=reg)
        def untyped(order: dict) -> None:  # type: ignore[type-arg]
            pass

    with pytest.raises(ConfigurationError, match="first parameter"):

        @job("orders.none", registry=reg)
        def nothing() -> None:
            pass


async def _charge(order: Order, retries: int) -> None: ...


class _Service:
    async def run(self, order: Order) -> None: ...


def _context_first(ctx: JobContext, order: Order) -> None: ...


def _context_as_dict(order: Order, ctx: dict) -> None: ...  # type: ignore[type-arg]


def _two_more(order: Order, ctx: JobContext, extra: int) -> None: ...


def _option_with_default(order: Order, dry_run: bool = False) -> None: ...  # (a Celery task's habit)


def _unannotated_option(order: Order, dry_run=False) -> None: ...  # type: ignore[no-untyped-def]


def _keyword_context(order: Order, *, ctx: JobContext) -> None: ...


def _any_keywords(order: Order, **options: Any) -> None: ...


def _context_or_none(order: Order, ctx: JobContext | None = None) -> None: ...


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda reg: job(registry=reg), r'@job needs the job\'s name: @job\("area.verb"\)'),
        (
            lambda reg: job("o.partial", registry=reg)(functools.partial(_charge, retries=3)),
            "not functools.partial",
        ),
        (
            lambda reg: job("o.method", registry=reg)(_Service.run),  # type: ignore[arg-type]
            "not a method \\(its first parameter is 'self'\\)",
        ),
        (
            lambda reg: job("o.ctx", registry=reg)(_context_first),  # type: ignore[arg-type]
            "the payload comes first, then the JobContext",
        ),
        (
            lambda reg: job("o.dict", registry=reg)(_context_as_dict),  # type: ignore[arg-type]
            "second parameter 'ctx' is annotated dict",
        ),
        (lambda reg: job("o.more", registry=reg)(_two_more), "at most one parameter.*it has 2: ctx, extra"),  # type: ignore[arg-type]
        (  # it was given the JobContext, which is truthy: a dry run ran for real
            lambda reg: job("o.default", registry=reg)(_option_with_default),
            "second parameter 'dry_run' is annotated bool.*its default does not keep it from being given "
            "the JobContext; to be an option of the job, make dry_run a field of Order",
        ),
        (  # (the same, unannotated: a trial's `if dry_run:` was always true)
            lambda reg: job("o.bare", registry=reg)(_unannotated_option),
            r"second parameter dry_run=False would be given the JobContext, not its default",
        ),
        (  # (accepted, then every run failed: "takes 1 positional argument but 2 were given")
            lambda reg: job("o.kw", registry=reg)(_keyword_context),  # type: ignore[arg-type]
            r"second parameter \(\*, ctx\) is not taken by position",
        ),
        (
            lambda reg: job("o.any", registry=reg)(_any_keywords),
            r"second parameter \(\*\*options\) is not",
        ),
    ],
)
def test_a_function_decorated_wrongly_is_told_what_to_write(reg, make, says):
    """A trial got a TypeError for @job(), an AttributeError for a functools.partial, and messages that
    did not say a method, a context before the payload or a mistyped context was the matter."""
    with pytest.raises(ConfigurationError, match=says):
        make(reg)


def test_a_context_that_may_be_none_is_the_context(reg):
    assert job("o.maybe", registry=reg)(_context_or_none).takes_context


def test_a_bound_method_is_a_job_like_any_function(reg):
    ran = job("o.bound", registry=reg)(_Service().run)
    assert ran.payload_model is Order and not ran.takes_context


def test_a_duplicate_name_is_an_error(reg):
    @job("orders.dup", registry=reg)
    def first(order: Order) -> None:
        pass

    with pytest.raises(DuplicateJobError, match="already registered"):

        @job("orders.dup", registry=reg)
        def second(order: Order) -> None:
            pass


def test_a_schedule_payload_must_match_the_model(reg):
    with pytest.raises(ConfigurationError, match="schedule's payload") as info:

        @job("orders.nightly", registry=reg, schedule=Schedule("rate(1 day)", payload={"amount": 1}))
        def nightly(order: Order) -> None:
            pass

    assert str(info.value) == (
        "job orders.nightly: the schedule's payload does not match Order: order_id: Field required; "
        "give it in Schedule('rate(1 day)', payload={...})"
    )
    assert info.value.__cause__ is None  # one readable line, not a pydantic dump


def test_the_timeout_limit_is_one_number_in_the_code_the_error_and_the_readme(reg):
    from pathlib import Path

    from jobframework.jobs import MAX_JOB_TIMEOUT

    job("orders.long", registry=reg, timeout=901)  # over Lambda's 900 s: a jf worker lane runs it
    job("orders.longest", registry=reg, timeout=MAX_JOB_TIMEOUT)
    stated = f"{MAX_JOB_TIMEOUT:,.0f}"
    for bad in (0, MAX_JOB_TIMEOUT + 1):
        with pytest.raises(ConfigurationError, match=f"at most {stated} seconds"):
            job("orders.bad", registry=reg, timeout=bad)
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    assert f"`timeout` (seconds, at most {stated}" in readme


def test_envelope_round_trips_and_keeps_unknown_fields():
    env = Envelope.new("orders.ship", {"order_id": "1"}, key="ship:1")
    again = parse_body(env.to_body())
    assert again == env
    assert env.key == "ship:1" and Envelope.new("a", {}).key  # defaults to the id
    newer = json.loads(env.to_body()) | {"priority_hint": "x"}
    assert parse_body(json.dumps(newer)).model_extra == {"priority_hint": "x"}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("", "empty"),
        ("not json", "not JSON"),
        ("[1, 2]", "JSON list"),
        ('{"v": 9, "id": "x"}', "version 9"),
        ('{"v": 1, "id": "x", "type": "a"}', "payload"),
        ("[" * 100_000 + "]" * 100_000, "JSON|nested"),
    ],
)
def test_bad_bodies_are_malformed_with_a_reason(body, message):
    with pytest.raises(MalformedMessageError, match=message):
        parse_body(body)


def test_ids_are_unique_and_time_sortable():
    ids = [Envelope.new("a", {}).id for _ in range(1000)]
    assert len(set(ids)) == 1000
    assert ids[0][:13] <= ids[-1][:13]


def test_topology_sets_receive_count_above_every_jobs_attempts(reg):
    @job("orders.many", registry=reg, priority="low", retry=RetryPolicy(max_attempts=8))
    def many(order: Order) -> None:
        pass

    topology = Topology.from_registry(reg)
    low = topology.queue("low")
    assert low.max_receive_count > 8
    assert low.visibility_timeout >= 6 * topology.consumer(low.consumer).timeout
    assert low.dlq_retention > low.retention
    assert [q.priority for q in topology.queues] == list(Priority)


def test_topology_refuses_a_receive_count_at_or_below_a_jobs_attempts_naming_the_job(reg):
    @job("orders.patient", registry=reg, priority="low", retry=RetryPolicy(max_attempts=6))
    def patient(order: Order) -> None:
        pass

    with pytest.raises(ConfigurationError, match=r"orders\.patient"):
        Topology.from_registry(reg, TopologySettings(max_receive_count={Priority.LOW: 6}))


def test_retries_longer_than_a_queue_keeps_a_message_are_refused_or_warned_of(reg):
    """A trial's RetryPolicy(max_attempts=200, max_delay=43200) was taken on a queue that keeps a
    message 4 days: a message retried past that is deleted by SQS unseen, with no dead letter."""

    @job("w.forever", registry=reg, retry=RetryPolicy(max_attempts=200, max_delay=43200), timeout=10)
    def forever(order: Order) -> None: ...

    with pytest.raises(
        ConfigurationError, match=r"job w\.forever: its retries may take 90\.6 days .*no dead letter"
    ):
        Topology.from_registry(reg)

    other = JobRegistry()

    @job("w.week", registry=other, retry=RetryPolicy(max_attempts=40, max_delay=43200), timeout=10)
    def week(order: Order) -> None: ...

    with pytest.warns(
        TopologyWarning, match=r"job w\.week: its retries may take 12\.2 days .* \(4\.0 days\)"
    ):
        Topology.from_registry(other)  # (a deployment may keep messages longer: a warning)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Topology.from_registry(other, TopologySettings(retention=13 * 86400))


def test_runtime_config_round_trips_through_the_environment():
    config = RuntimeConfig(
        queues={p: {"url": f"https://q/{p.value}", "dlq_url": f"https://q/{p.value}-dlq"} for p in Priority},
        state_table="s",
        idempotency_table="i",
    )
    assert RuntimeConfig.from_env(config.to_env()) == config


def test_runtime_config_says_how_to_configure_when_nothing_is_set():
    with pytest.raises(ConfigurationError, match="JF_QUEUE_URL"):
        RuntimeConfig.from_env({})


def test_a_dead_letter_near_the_sqs_limit_sheds_attributes_but_keeps_its_body():
    from jobframework import envelope as wire
    from jobframework.dead_letter import fit_dead_letter

    body = "x" * (wire.SQS_MAX_MESSAGE_BYTES - 600)
    attributes = {
        "traceparent": wire.string_attribute("00-" + "a" * 32 + "-" + "b" * 16 + "-01"),
        "tracestate": wire.string_attribute("v" * 300),
        "jf-type": wire.string_attribute("t.big"),
        "jf-reason": wire.string_attribute("exhausted"),
        "jf-error": wire.string_attribute("E" * 1000),
    }
    fit_dead_letter(body, attributes)
    assert wire.message_size(body, attributes) <= wire.SQS_MAX_MESSAGE_BYTES
    assert attributes["jf-reason"]["StringValue"] == "exhausted"
    assert attributes["jf-type"]["StringValue"] == "t.big"
    assert len(attributes["jf-error"]["StringValue"]) == 100


def test_a_long_job_gets_a_visibility_covering_it_and_a_worker_context_that_lasts(reg):
    from jobframework.config import QueueEndpoints, RuntimeConfig
    from jobframework.local.emulator import pollers_for

    @job("video.transcode", registry=reg, priority="low", profile="cpu", timeout=3600)
    def transcode(order: Order) -> None:
        pass

    topology = Topology.from_registry(reg)
    lane = topology.queue("low-cpu")
    assert lane.longest_job_timeout == 3600
    assert lane.visibility_timeout >= 3600 + 60
    assert topology.consumer("cpu").timeout <= 900  # the Lambda function keeps Lambda's limit
    config = RuntimeConfig(
        queues={"low-cpu": QueueEndpoints(url="http://h/123456789012/q", dlq_url="http://h/1/d")}
    )
    [poller] = pollers_for(config, topology, ["low-cpu"])
    assert poller.timeout >= 3600  # jf worker gives the job its time


def test_a_priority_names_all_its_lanes_and_exact_lanes_name_one(reg):
    """A container lane's task runs ``jf worker --queues default --exact-lanes``: without it the worker
    also polled default-fifo and default-cpu, whose Lambda consumers kept their triggers."""
    from jobframework.config import QueueEndpoints, RuntimeConfig
    from jobframework.local.emulator import pollers_for

    @job("a.plain", registry=reg)
    def plain(order: Order) -> None: ...

    @job("a.ordered", registry=reg, ordered_by=lambda o: o.order_id)
    def ordered(order: Order) -> None: ...

    @job("a.heavy", registry=reg, profile="cpu")
    def heavy(order: Order) -> None: ...

    topology = Topology.from_registry(reg)
    lanes = ("default", "default-fifo", "default-cpu")
    config = RuntimeConfig(
        queues={
            lane: QueueEndpoints(url=f"http://h/123456789012/{lane}", dlq_url="http://h/1/d")
            for lane in lanes
        }
    )
    assert sorted(p.url.rsplit("/", 1)[1] for p in pollers_for(config, topology, ["default"])) == sorted(
        lanes
    )
    [only] = pollers_for(config, topology, ["default"], exact=True)
    assert only.url.endswith("/default")


def test_validation_problems_are_one_line_and_its_example_runs():
    import doctest

    from jobframework import validation

    result = doctest.testmod(validation)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"rate": "fast"}, r"^job a\.b: rate 'fast' is not a rate"),
        ({"rate": "5/day"}, r"N/second, N/minute or N/hour \(or N/sec, N/s, N/min, N/m, N/h\)"),
        ({"priority": "urgent"}, r"^job a\.b: unknown priority 'urgent'; use one of critical"),
        ({"expires_after": timedelta(days=30)}, r"at most 14 days .*got 2,592,000 s$"),
        ({"timeout": 100_000}, r"got 100,000; split longer work"),
    ],
)
def test_a_bad_option_names_its_job_and_reads_plainly(options, message):
    with pytest.raises(ConfigurationError, match=message):
        job("a.b", registry=JobRegistry(), **options)


def test_a_bare_decorator_says_to_give_the_name():
    with pytest.raises(
        ConfigurationError, match=r'@job needs the job\'s name: write @job\("area\.verb"\) above k'
    ):

        @job  # type: ignore[arg-type]
        def k(p: BaseModel) -> None: ...


def test_a_key_function_that_raises_names_the_job_and_the_payload(reg):
    @job("orders.keyed", registry=reg, key=lambda o: o.customer.id)
    def keyed(order: Order) -> None:
        """(its key reads an attribute the model lacks)"""

    with pytest.raises(
        ConfigurationError, match=r"job orders\.keyed: its key= function raised AttributeError"
    ):
        keyed.key_for(Order(order_id="1", amount=3))


def test_long_schedule_names_that_begin_alike_stay_apart_within_64_characters(reg):
    stem = "reports." + "nightly_" * 8
    for suffix in ("eu", "us"):

        @job(stem + suffix, registry=reg, schedule=Schedule("rate(1 hour)", payload={"order_id": "o-1"}))
        def run(order: Order) -> None:
            pass

    names = [s.name for s in Topology.from_registry(reg).schedules]
    assert len(names) == 2 and len(set(names)) == 2, names
    assert all(len(n) == 64 and n.startswith("jf-dev-reports-nightly_") for n in names), names


def test_two_jobs_whose_names_differ_only_in_dots_and_hyphens_are_refused_naming_both(reg):
    for name in ("billing.sync", "billing-sync"):

        @job(name, registry=reg, schedule=Schedule("rate(1 hour)", payload={"order_id": "o-1"}))
        def run(order: Order) -> None:
            pass

    shared = "jobs billing-sync and billing.sync would share the schedule jf-dev-billing-sync"
    with pytest.raises(ConfigurationError, match=re.escape(shared)):
        Topology.from_registry(reg)


def test_a_batched_job_is_not_idempotent_and_refuses_idempotent_true_saying_what_to_do(reg):
    @job("orders.bulk", registry=reg, batch=BatchOptions(max_size=10), key=lambda o: o.order_id)
    def bulk(orders: list[Order]) -> list[None]:
        return [None for _ in orders]

    assert not bulk.idempotent  # its items run together: none runs under its key's claim

    with pytest.raises(ConfigurationError, match=r"idempotent=True cannot go with batch=.*drop idempotent="):

        @job("orders.bulk2", registry=reg, batch=BatchOptions(max_size=10), idempotent=True)
        def bulk2(orders: list[Order]) -> list[None]:
            return [None for _ in orders]


def test_run_inline_calls_a_batched_job_with_its_list_and_returns_one_outcome_per_payload(reg):
    @job("orders.bulk_inline", registry=reg, batch=BatchOptions(max_size=10))
    def bulk(orders: list[Order], ctx: JobContext) -> list[object]:
        assert ctx.job_type == "orders.bulk_inline"
        return [ValueError("bad") if o.order_id == "bad" else o.order_id.upper() for o in orders]

    outcomes = run_inline(bulk, [Order(order_id="a"), {"order_id": "bad"}])
    assert outcomes[0] == "A" and isinstance(outcomes[1], ValueError)
    with pytest.raises(TypeError, match=r"batched job: pass a non-empty list of payloads"):
        run_inline(bulk, Order(order_id="a"))
    with pytest.raises(ValidationError):
        run_inline(bulk, [{"order_id": "a"}, {"id": "no order_id"}])


def test_run_inline_refuses_a_list_for_a_plain_job_saying_what_it_takes(reg):
    @job("orders.one_inline", registry=reg)
    def one(order: Order) -> None:
        pass

    with pytest.raises(TypeError, match=r"takes one payload \(its Order model, or a dict\), got a list"):
        run_inline(one, [Order(order_id="a")])
    with pytest.raises(
        TypeError, match=r"got str '{\"order_id\": \"a\"}' \(JSON text: json\.loads it first\)"
    ):
        run_inline(one, '{"order_id": "a"}')  # (it said "not a list")
    for not_a_job in ("orders.one_inline", one.fn):
        with pytest.raises(TypeError, match=r"run_inline takes the Job that @job made of your function"):
            run_inline(not_a_job, {"order_id": "a"})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"attempt= counts from 1 \(the first execution\), got 0"):
        run_inline(one, {"order_id": "a"}, attempt=0)


def test_a_tenant_function_returning_no_str_is_named_as_the_cause(reg):
    from jobframework.flow.enqueue import tenant_of
    from jobframework.outgoing import EnqueueRequest

    @job("orders.by_shop", registry=reg, tenant=lambda o: len(o.order_id))
    def by_shop(order: Order) -> None:
        pass

    request = EnqueueRequest(by_shop, {"order_id": "o-1"})
    with pytest.raises(
        ConfigurationError, match=r"job orders.by_shop: its tenant= function must return a str"
    ):
        tenant_of(by_shop, request, {"order_id": "o-1"})
    long = EnqueueRequest(by_shop, {"order_id": "o-1"}, tenant="x" * 5000)
    with pytest.raises(ConfigurationError) as refused:
        tenant_of(by_shop, long, {"order_id": "o-1"})
    assert "tenant must be 1 to 128" in str(refused.value) and "(5,000 characters)" in str(refused.value)
    assert len(str(refused.value)) < 300  # the 5,000 characters are not echoed


def test_run_inline_checks_a_batched_jobs_outcomes_as_the_consumer_does(reg):
    @job("orders.bulk_short", registry=reg, batch=BatchOptions(max_size=10))
    def short(orders: list[Order]) -> list[str]:
        return ["ok"] * (len(orders) - 1)

    with pytest.raises(TypeError, match=r"one outcome per payload \(2\), got 1 outcomes"):
        run_inline(short, [{"order_id": "a"}, {"order_id": "b"}])


class _SyncWithEvent(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    record_id: str
    ev: asyncio.Event | None = None


def test_a_payload_field_that_cannot_travel_as_json_is_refused_naming_the_job_and_the_field(reg):
    """A trial's model had ``ev: asyncio.Event | None``: jf dev and the jf_config fixture failed with
    pydantic's "Cannot generate a JsonSchema for core_schema.IsInstanceSchema", naming neither."""

    @job("sync.record", registry=reg)
    def sync(payload: _SyncWithEvent) -> None: ...

    with pytest.raises(
        ConfigurationError, match=r"job sync\.record: .* has a field that cannot travel as JSON \(ev: "
    ):
        Topology.from_registry(reg, TopologySettings())


@job("orders.logged", registry=JobRegistry())
def _logged(order: Order, ctx: JobContext) -> None:
    ctx.logger.info("packing %s", order.order_id, extra={"boxes": 2})


def test_run_inline_logs_with_the_jobs_keys_beside_the_calls_extra(caplog):
    """A trial's ctx.logger lines under run_inline carried no job id or type, though the README says
    the logger carries them."""
    import logging

    with caplog.at_level(logging.INFO, logger="jobframework.job"):
        run_inline(_logged, {"order_id": "o-9"}, job_id="j-1", attempt=2)
    [record] = [r for r in caplog.records if r.getMessage() == "packing o-9"]
    assert (record.job_id, record.job_type, record.attempt, record.boxes) == ("j-1", "orders.logged", 2, 2)  # type: ignore[attr-defined]
    assert len(record.trace_id) == 32  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"retries": 3}, r"@job takes no option retries=: write retry=RetryPolicy\(max_attempts=4\)"),
        (
            {"max_retries": 5},
            r"max_retries=: write retry=RetryPolicy\(max_attempts=6\) \(attempts: the first, then 5 ",
        ),
        (
            {"max_retries": 1000},
            r"max_retries=: write retry=RetryPolicy\(max_attempts=N \+ 1\)",
        ),  # (over 1,000)
        ({"rate_limit": "10/s"}, r"rate_limit=: write rate=\"10/second\""),
        ({"rate_limit": "10/m"}, r"rate_limit=: write rate=\"10/minute\" \(across every consumer\)$"),
        ({"throws": (KeyError,)}, r"throws=: write permanent= \(exception types, or functions"),
        ({"retry_backoff_max": 600}, r"retry_backoff_max=: write retry=RetryPolicy\(max_delay=\.\.\.\)"),
        ({"soft_time_limit": 30}, r"soft_time_limit=: write timeout="),
        ({"bind": True}, r"bind=: write a JobContext parameter after the payload"),
        ({"countdown": 60}, r"countdown=: write enqueue\(payload, delay=\.\.\.\)"),
        ({"prority": "high"}, r"@job takes no option prority=: did you mean priority=\?"),
        ({"colour": "red"}, r"colour=: it takes priority=, retry=, .*, registry=$"),
        ({"retry": 3}, r"retry= must be a RetryPolicy, got 3 \(retry=RetryPolicy\(max_attempts=3\)\)$"),
        ({"schedule": 300}, r"every 300 seconds: schedule='rate\(5 minutes\)'\)$"),
    ],
)
def test_an_option_job_does_not_take_says_what_to_write(reg, options, message):
    """A trial's @job(retries=3) was a bare TypeError (unexpected keyword argument); teams bring Celery's
    option names."""
    with pytest.raises(ConfigurationError, match=message):
        job("t.unknown_option", registry=reg, **options)
    assert reg.find("t.unknown_option") is None


@pytest.mark.parametrize(
    ("method", "message"),
    [
        ("delay", r"^a Job has no delay\(\): write my_job\.enqueue\(payload\) \(delay=seconds"),
        ("apply_async", r"^a Job has no apply_async\(\): write my_job\.enqueue\(payload, delay=\.\.\."),
        ("s", r"^a Job has no s\(\): write a saga \(jobframework\.saga\)"),
        ("enqeue", r"^'Job' object has no attribute 'enqeue'$"),
    ],
)
def test_a_method_of_another_librarys_task_says_what_to_write(reg, method, message):
    """A trial's ported Celery code called send_email.delay(...): a bare AttributeError."""

    @job("t.ported", registry=reg)
    def ported(order: Order) -> None: ...

    with pytest.raises(AttributeError, match=message):
        getattr(ported, method)(Order(order_id="o-1"))
    assert not hasattr(ported, "delay") and hasattr(ported, "enqueue")


class _Card(BaseModel):
    number: SecretStr


class _Payout(BaseModel):
    iban: str
    cards: list[_Card] = []


class _Revealed(BaseModel):
    number: SecretStr

    @field_serializer("number", when_used="json")
    def _reveal(self, number: SecretStr) -> str:
        return number.get_secret_value()


def test_a_payload_model_with_a_pydantic_secret_is_refused_unless_it_says_what_to_send(reg):
    """A fintech trial's card_number: SecretStr was sent as '**********', and its job ran on that."""
    from jobframework.payload_data import payload_data

    with pytest.raises(ConfigurationError, match=r"_Payout\.cards\.number is a pydantic secret.*'\*{10}'"):

        @job("pay.out", registry=reg)
        def payout(p: _Payout) -> None: ...

    assert "pay.out" not in reg

    @job("pay.revealed", registry=reg)
    def revealed(p: _Revealed) -> str:
        return p.number.get_secret_value()

    assert payload_data(revealed, {"number": "4111"})[0] == {"number": "4111"}
    assert run_inline(revealed, {"number": "4111"}) == "4111"


def test_what_an_enqueue_returns_says_where_celerys_async_result_calls_are():
    """A Celery trial's `send_email.enqueue(...).get(timeout=10)` was a bare AttributeError."""
    from jobframework.core import Priority
    from jobframework.outgoing import EnqueueResult

    result = EnqueueResult("j-1", "j-1", "mail.send", Priority.HIGH)
    with pytest.raises(AttributeError, match=r"has no get: client\.wait\(result\.id, timeout=30\)\.result"):
        result.get(timeout=10)  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match=r"has no revoke: client\.cancel\(result\.id\)"):
        result.revoke()  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match=r"^'EnqueueResult' object has no attribute 'colour'$"):
        result.colour  # type: ignore[attr-defined]  # noqa: B018
    assert result.id == "j-1" and result.ok and not hasattr(result, "get")
