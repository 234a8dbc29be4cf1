"""A job that enqueues another (a fan-out) sends it to the topology of the consumer that runs it when
the consumer was given one (``consumer(config=...)``: a test's handler, ``jf dev``, ``jf worker``),
with no ``JF_*`` variables and no ``set_default_client``: a trial's fan-out job failed with "jobframework
is not configured ... or run `jf dev`" while ``jf dev`` ran it."""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from jobframework import consumer, job
from jobframework.client import JobClient, default_client, set_default_client
from jobframework.default_client import refuse_env_client
from jobframework.envelope import Envelope
from jobframework.errors import (
    ConfigurationError,
    EnqueueOptionError,
    JobFrameworkError,
    PayloadValidationError,
)
from jobframework.jobs import JobRegistry
from jobframework.testing import (
    NO_TEST_CLIENT,
    EnqueueRecorder,
    FakeLambdaContext,
    consume_once,
    provision_fresh,
    queued_payloads,
    receive_all,
    run_inline,
    sqs_event,
)

registry = JobRegistry()


class Page(BaseModel):
    url: str


class Site(BaseModel):
    urls: list[str]


@job("fan.fetch", registry=registry, idempotent=False)
def fetch(page: Page) -> None:
    """The child: never run here (the test reads its messages off the queue)."""


@job("fan.crawl", registry=registry, idempotent=False)
def crawl(site: Site) -> int:
    for url in site.urls:
        fetch.enqueue(Page(url=url))
    return len(site.urls)


@job("fan.crawl_async", registry=registry, idempotent=False)
async def crawl_async(site: Site) -> int:
    fetch.enqueue_many([Page(url=url) for url in site.urls])
    return len(site.urls)


@pytest.fixture
def world(jf_aws: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any, Any]:
    for name in [n for n in os.environ if n.startswith("JF_QUEUE_URL") or n == "JF_TOPOLOGY_PARAMETER"]:
        monkeypatch.delenv(name)
    set_default_client(None)
    _, config = provision_fresh(jf_aws.endpoint_url, registry)
    sqs = jf_aws.client("sqs")
    return consumer(registry, config=config, sqs_client=sqs), sqs, config


def _urls(sqs: Any, config: Any) -> list[str]:
    bodies = [
        Envelope.model_validate_json(m["Body"]) for m in receive_all(sqs, config.endpoints("default").url)
    ]
    return sorted(b.payload["url"] for b in bodies if b.type == "fan.fetch")


def test_a_job_enqueues_into_the_topology_of_the_consumer_that_runs_it(world):
    handler, sqs, config = world
    # Outside a job no topology is known: in a test the plugin says what to take, else the client's own.
    with pytest.raises(ConfigurationError, match="no client in a test"):
        default_client()
    refuse_env_client(None)
    try:
        with pytest.raises(ConfigurationError, match="not configured"):
            default_client()
    finally:
        refuse_env_client(NO_TEST_CLIENT)
    event = sqs_event(
        Envelope.new("fan.crawl", {"urls": ["a", "b"]}),
        Envelope.new("fan.crawl_async", {"urls": ["c"]}),  # an async def job, on the consumer's loop
        Envelope.new("fan.crawl", {"urls": ["d"]}),
    )
    assert handler(event, FakeLambdaContext()) == {"batchItemFailures": []}
    assert _urls(sqs, config) == ["a", "b", "c", "d"]


def test_a_default_client_that_was_set_still_wins(world, jf_aws):
    handler, sqs, config = world
    _, elsewhere = provision_fresh(jf_aws.endpoint_url, registry)
    set_default_client(JobClient(elsewhere, registry=registry, sqs_client=sqs))
    try:
        handler(sqs_event(Envelope.new("fan.crawl", {"urls": ["x"]})), FakeLambdaContext())
    finally:
        set_default_client(None)
    assert _urls(sqs, config) == []
    assert _urls(sqs, elsewhere) == ["x"]


def test_a_tests_enqueue_without_a_client_goes_to_the_jf_config_topology_not_the_shells(
    jf_config, jf_aws, monkeypatch
):
    """A trial's test called ``my_job.enqueue(...)`` in a shell holding ``jf dev``'s exports: the test
    passed and the job was on the running ``jf dev``'s queue (a shell pointed at a stage: there)."""
    _, shell = provision_fresh(jf_aws.endpoint_url, registry)  # the running jf dev's
    for name, value in shell.to_env().items():
        monkeypatch.setenv(name, value)
    sqs = jf_aws.client("sqs")
    fetch.enqueue(Page(url="from-the-test"))
    from_a_thread = threading.Thread(target=fetch.enqueue, args=(Page(url="from-a-thread"),))
    from_a_thread.start()  # (a plain thread: no context of the test's; the last trial's went to jf dev)
    from_a_thread.join()
    assert (_urls(sqs, jf_config), _urls(sqs, shell)) == (["from-a-thread", "from-the-test"], [])
    _, elsewhere = provision_fresh(jf_aws.endpoint_url, registry)  # a default the test set still wins
    set_default_client(JobClient(elsewhere, registry=registry, sqs_client=sqs))
    fetch.enqueue(Page(url="set"))
    assert _urls(sqs, elsewhere) == ["set"]


def test_a_default_client_an_earlier_test_left_does_not_take_a_jf_config_tests_enqueues(jf_aws, request):
    """A test (or the app's import) that set a default client and left it: the next jf_config test's
    enqueues went to that topology, and its own queue got none."""
    sqs = jf_aws.client("sqs")
    _, left = provision_fresh(jf_aws.endpoint_url, registry)
    set_default_client(JobClient(left, registry=registry, sqs_client=sqs))  # (left by an earlier test)
    try:
        jf_config = request.getfixturevalue("jf_config")
        fetch.enqueue(Page(url="mine"))
        assert (_urls(sqs, jf_config), _urls(sqs, left)) == (["mine"], [])
    finally:
        set_default_client(None)


def test_the_children_of_a_consumed_batch_are_on_the_queue(world):
    """As a test drives it with consume_once (the README's way): the parent from the queue, its
    children after it."""
    handler, sqs, config = world
    JobClient(config, registry=registry, sqs_client=sqs).enqueue(crawl, {"urls": ["p", "q"]})
    records, response = consume_once(handler, sqs, config.endpoints("default").url)
    assert len(records) == 1 and response == {"batchItemFailures": []}
    assert _urls(sqs, config) == ["p", "q"]


def test_queued_payloads_reads_a_jobs_children_as_models_and_leaves_them_queued(world):
    """A job author's trial parsed the raw messages of the right lane by hand to check a child job
    against the embedded AWS, where jf_inline.payloads(job) does it inline."""
    handler, sqs, config = world
    JobClient(config, registry=registry, sqs_client=sqs).enqueue(crawl, {"urls": ["p", "q"]})
    consume_once(handler, sqs, config.endpoints("default").url)
    children = queued_payloads(fetch, config, sqs)
    assert children == [Page(url="p"), Page(url="q")]  # (models, of fan.fetch only)
    assert queued_payloads(fetch, config, sqs) == children  # (visible again: read twice, and run)
    assert _urls(sqs, config) == ["p", "q"]


def test_a_listener_enqueues_into_the_consumers_topology_too(world):
    _, sqs, config = world

    def follow_up(outcome: Any) -> None:  # told each settled record, after its job ran
        if outcome.job_type == "fan.crawl":
            fetch.enqueue(Page(url=f"after-{outcome.job_id}"))

    handler = consumer(registry, config=config, sqs_client=sqs, listeners=[follow_up])
    env = Envelope.new("fan.crawl", {"urls": []})
    assert handler(sqs_event(env), FakeLambdaContext()) == {"batchItemFailures": []}
    assert _urls(sqs, config) == [f"after-{env.id}"]


@job("fan.crawl_badly", registry=registry, idempotent=False)
def crawl_badly(site: Site) -> None:
    fetch.enqueue({"link": site.urls[0]})  # not a Page


def test_run_inline_sends_nothing_it_was_not_told_to(world, monkeypatch):
    _, sqs, config = world
    for lane, queue in config.queues.items():  # a shell with `jf dev`'s exports (a trial's test sent
        name = lane.upper().replace("-", "_")  # its job's children to the jobs jf dev ran)
        monkeypatch.setenv(f"JF_QUEUE_URL_{name}", queue.url)
        monkeypatch.setenv(f"JF_DLQ_URL_{name}", queue.dlq_url)
    monkeypatch.setenv("JF_ENDPOINT_URL", str(config.endpoint_url))
    with pytest.raises(
        ConfigurationError, match=r"run_inline sends nothing: pass client=EnqueueRecorder\(\)"
    ):
        run_inline(crawl, {"urls": ["a"]})
    assert _urls(sqs, config) == []


def test_run_inline_records_what_a_job_enqueues(world):
    sent = EnqueueRecorder()
    assert run_inline(crawl, {"urls": ["a", "b"]}, client=sent) == 2
    assert run_inline(crawl_async, {"urls": ["c"]}, client=sent) == 1  # an async def job's too
    assert sent.payloads(fetch) == [Page(url="a"), Page(url="b"), Page(url="c")]
    assert sent.payloads("fan.fetch") == sent.payloads(fetch)
    with pytest.raises(PayloadValidationError, match="does not match Page"):  # as a client refuses it
        run_inline(crawl_badly, {"urls": ["x"]}, client=EnqueueRecorder())


def test_run_inline_sends_what_a_job_enqueues_through_the_client_it_is_given(world):
    _, sqs, config = world
    run_inline(crawl, {"urls": ["q"]}, client=JobClient(config, registry=registry, sqs_client=sqs))
    assert _urls(sqs, config) == ["q"]


def test_the_client_given_to_run_inline_wins_over_the_default_one(world):
    _, sqs, config = world
    set_default_client(JobClient(config, registry=registry, sqs_client=sqs))
    try:
        sent = EnqueueRecorder()
        run_inline(crawl, {"urls": ["r"]}, client=sent)
    finally:
        set_default_client(None)
    assert sent.payloads(fetch) == [Page(url="r")]
    assert _urls(sqs, config) == []


class Move(BaseModel):  # version 2: "to" was renamed "destination"
    destination: str


@job(
    "fan.move",
    registry=registry,
    idempotent=False,
    version=2,
    priority="low",
    key=lambda m: f"move:{m.destination}",
    upgrade={1: lambda v1: {"destination": v1["to"]}},
)
def move(payload: Move) -> None: ...


def test_the_recorder_keys_routes_and_upgrades_as_a_client_does(world):
    sent = EnqueueRecorder()
    request = move.request({"to": "b"}, payload_version=1)
    (old,) = sent.enqueue_many([request])
    keyed = sent.enqueue(move, {"destination": "c"}, priority="high")
    assert (old.key, old.priority, keyed.key, keyed.priority) == ("move:b", "low", "move:c", "high")
    assert sent.payloads(move) == [Move(destination="b"), Move(destination="c")]  # as the job reads them
    assert request.payload == {"to": "b"}  # (the caller's request is left as it was)
    assert [r.payload_version for r in sent.requests] == [1, None]


def test_a_saga_needs_a_client_not_a_recorder():
    from jobframework.saga.engine import client_or_default

    with pytest.raises(ConfigurationError, match=r"run_inline\(\.\.\., client=JobClient\(jf_config\)\)"):
        client_or_default(EnqueueRecorder())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "options",
    [
        {"debounce": 2},  # without a key
        {"debounce": 901, "key": "k"},
        {"debounce": 2, "delay": 5, "key": "k"},
        {"delay": 10, "expires_in": 2},
        {"expires_in": 0},
        {"tenant": "a b\n"},
        {"delay": -1},
        {"dedup_window": 60},  # without a key
        {"key": ""},
        {"track": "yes"},
        {"key": "k", "dedup_window": -5},  # (review: with a key, the window went unchecked)
    ],
)
def test_the_recorder_refuses_the_options_a_client_refuses_with_its_words(world, options):
    """A trial's unit test passed with ``debounce=2`` and no key, which the client refuses in
    production: the recorder checks an enqueue's options as the client does."""
    _, sqs, config = world
    client = JobClient(config, registry=registry, sqs_client=sqs)
    with pytest.raises(JobFrameworkError) as refused:
        client.enqueue(fetch, Page(url="u"), **options)
    with pytest.raises(type(refused.value)) as recorded:
        EnqueueRecorder().enqueue(fetch, Page(url="u"), **options)
    assert str(recorded.value) == str(refused.value)
    assert _urls(sqs, config) == []


def test_the_recorder_names_the_entry_of_enqueue_many_it_refuses_and_records_none():
    """As the client sends nothing when one entry is refused, the recorder records none of them."""
    sent = EnqueueRecorder()
    with pytest.raises(EnqueueOptionError, match=r"^entry 2 of 2 \(index 1\): debounce of fan.fetch"):
        sent.enqueue_many([fetch.request(Page(url="a")), fetch.request(Page(url="b"), debounce=2)])
    assert sent.requests == []


def test_the_recorder_checks_a_job_id_as_the_client_does(world):
    _, sqs, config = world
    client = JobClient(config, registry=registry, sqs_client=sqs)
    too_long = fetch.request(Page(url="u"), job_id="x" * 129)
    with pytest.raises(ValidationError) as refused:
        client.enqueue_many([too_long])
    with pytest.raises(ValidationError) as recorded:
        EnqueueRecorder().enqueue_many([too_long])
    assert str(recorded.value) == str(refused.value)
    assert EnqueueRecorder().enqueue_many([fetch.request(Page(url="u"), job_id="mine-1")])[0].id == "mine-1"


def test_an_unknown_option_of_a_request_enqueue_many_or_the_recorder_says_what_to_write(world):
    """A trial's send_email.enqueue_many([...], countdown=5), .request(p, countdown=5) and
    EnqueueRecorder().enqueue(job, p, countdown=5) were raw TypeErrors from EnqueueRequest.__init__: a
    202 handler catching EnqueueOptionError answered 500, and the recorder did not refuse as the client."""
    for send in (
        lambda: fetch.request(Page(url="u"), countdown=5),  # type: ignore[call-arg]
        lambda: fetch.enqueue_many([Page(url="u")], countdown=5),  # type: ignore[call-arg]
        lambda: EnqueueRecorder().enqueue(fetch, Page(url="u"), countdown=5),  # type: ignore[call-arg]
    ):
        with pytest.raises(EnqueueOptionError, match=r"^enqueue takes no option countdown=: write delay="):
            send()
    with pytest.raises(EnqueueOptionError, match=r"takes no option trak=: did you mean track=\?"):
        fetch.request(Page(url="u"), trak=True)  # type: ignore[call-arg]
    assert fetch.request(Page(url="u"), job_id="mine", key="k").job_id == "mine"
