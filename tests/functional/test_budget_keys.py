"""Which retry budget a job's retries come from (``@job(retry_budget=...)``), against the embedded AWS:
a dead downstream spends its own budget, not the one of every job on its queue."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from botocore.exceptions import EndpointConnectionError
from pydantic import BaseModel, HttpUrl

from jobframework.budget import RetryBudget
from jobframework.budget_keys import budget_key
from jobframework.client import JobClient
from jobframework.consumer import consumer
from jobframework.envelope import message_attribute
from jobframework.errors import ConfigurationError
from jobframework.jobs import JobRegistry, job
from jobframework.retry import RetryPolicy
from jobframework.testing import provision_fresh, receive_all

from .conftest import Runtime
from .conftest_local import cli_env, invoke

registry = JobRegistry()
calls: Counter[str] = Counter()
POLICY = RetryPolicy(max_attempts=3, base_delay=0, max_delay=1, jitter="none")


class Hook(BaseModel):
    host: str
    name: str
    body: str = ""


def _call(hook: Hook) -> None:
    """The downstream: ``dead`` never answers; any other host fails each name's first call only."""
    calls[hook.name] += 1
    if hook.host == "dead" or calls[hook.name] == 1:
        raise ConnectionError(f"{hook.host} did not answer")


@job("bk.queue", registry=registry, retry=POLICY)
def by_queue(hook: Hook) -> None:
    _call(hook)


@job("bk.host", registry=registry, retry=POLICY, retry_budget=lambda h: h.host)
def by_host(hook: Hook) -> None:
    _call(hook)


@job("bk.smtp", registry=registry, retry=POLICY, retry_budget="smtp")
def named(hook: Hook) -> None:
    _call(hook)


@job("bk.exempt", registry=registry, retry=POLICY, retry_budget=False)
def exempt(hook: Hook) -> None:
    _call(hook)


@pytest.fixture
def bk(jf_aws: Any) -> Runtime:
    calls.clear()
    topology, config = provision_fresh(jf_aws.endpoint_url, registry)
    sqs = jf_aws.client("sqs")
    handler = consumer(registry, config=config, sqs_client=sqs)
    handler._features()
    handler.retry_budget = RetryBudget(fraction=0.2, floor=2)
    return Runtime(topology, config, sqs, JobClient(config, registry=registry, sqs_client=sqs), handler)


def drain(rt: Runtime) -> None:
    for _ in range(40):
        records, _ = rt.consume("default")
        if not records:
            return
    raise AssertionError("the default queue did not drain")


def reasons(rt: Runtime) -> tuple[Counter[tuple[str, str]], list[str]]:
    """(job type, jf-reason) of each dead letter (read once: a receive hides them), and their errors."""
    letters = receive_all(rt.sqs, rt.dlq("default"))
    kinds = Counter(
        (message_attribute(m, "jf-type") or "?", message_attribute(m, "jf-reason") or "?") for m in letters
    )
    return kinds, [message_attribute(m, "jf-error") or "" for m in letters]


def dead_host_outage(rt: Runtime, job_: Any) -> None:
    """Twelve calls to a dead host: they spend what their budget allows (floor 2, 20 % of 12)."""
    rt.client.enqueue_many([job_.request({"host": "dead", "name": f"d{n}"}) for n in range(12)])
    drain(rt)


def test_a_dead_host_spends_the_queues_budget_and_a_flaky_hosts_job_dead_letters_on_its_first_failure(bk):
    dead_host_outage(bk, by_queue)
    bk.client.enqueue(by_queue, {"host": "flaky", "name": "f1"})
    drain(bk)
    assert calls["f1"] == 1  # (what retry_budget= is for: the test below)
    letters, _ = reasons(bk)
    assert letters[("bk.queue", "budget")] >= 9 and sum(letters.values()) == 13


def test_a_budget_per_host_keeps_a_dead_host_from_spending_the_flaky_hosts(bk):
    dead_host_outage(bk, by_host)
    bk.client.enqueue_many([by_host.request({"host": "flaky", "name": f"f{n}"}) for n in range(2)])
    drain(bk)
    assert (calls["f0"], calls["f1"]) == (2, 2)  # failed once, retried, succeeded
    letters, errors = reasons(bk)
    assert letters[("bk.host", "budget")] >= 9 and sum(letters.values()) == 12  # the dead host's only
    assert any("(not retried: the retry budget of 'dead' is spent" in e for e in errors), errors


def test_a_named_budget_and_no_budget_leave_the_spent_queue_budget_alone(bk):
    dead_host_outage(bk, by_queue)  # the default queue's budget is spent
    bk.client.enqueue(named, {"host": "smtp.example.com", "name": "n1"})
    bk.client.enqueue(exempt, {"host": "crm.example.com", "name": "x1"})
    drain(bk)
    assert (calls["n1"], calls["x1"]) == (2, 2)
    assert {t for t, _ in reasons(bk)[0]} == {"bk.queue"}


def test_a_payload_that_cannot_be_read_counts_in_the_queues_budget_whatever_the_job_names(bk):
    """The payload store down is not the job's downstream: an exempt job's unreadable payload was
    retried outside every budget."""
    dead_host_outage(bk, by_queue)  # the default queue's budget is spent

    def store_down(**_: Any) -> None:
        raise EndpointConnectionError(endpoint_url="https://s3.example")

    bk.handler._client("s3").meta.events.register("before-send.s3.GetObject", store_down)
    bk.client.enqueue(exempt, {"host": "crm.example.com", "name": "big", "body": "x" * 300_000})
    drain(bk)
    assert calls["big"] == 0  # never ran: its payload was never read
    letters, errors = reasons(bk)
    assert letters[("bk.exempt", "budget")] == 1
    assert any("fetching the payload s3://" in e and "the retry budget of " in e for e in errors), errors


@pytest.mark.parametrize("value", [lambda: "x", lambda a, b: "x"])
def test_a_budget_function_that_cannot_take_the_payload_is_refused_at_once(value):
    with pytest.raises(ConfigurationError, match=r"retry_budget= is a function of the payload: it takes one"):
        job("bk.arity", registry=JobRegistry(), retry_budget=value)


def test_a_budget_function_that_gives_no_name_is_said_once_per_job(caplog):
    for _ in range(3):
        assert (
            budget_key(lambda d: d["url"], {"url": HttpUrl("https://a.example/x")}, "high", "bk.u") == "high"
        )
    said = [r.getMessage() for r in caplog.records if "retry_budget= of bk.u" in r.getMessage()]
    assert len(said) == 1 and "not a name (a str of 1 to 200 characters, such as d.url.host)" in said[0]


@pytest.mark.parametrize("value", ["", " smtp", 3, "x" * 201])
def test_a_bad_retry_budget_says_what_it_takes(value):
    with pytest.raises(
        ConfigurationError, match=r"job bk\.bad: retry_budget= takes True \(its queue's budget"
    ):
        job("bk.bad", registry=JobRegistry(), retry_budget=value)


def test_jf_queue_ls_shows_a_named_budget_beside_the_queues(bk):
    """A data team's outage spent its named budget while `jf queue ls` said 0 retries for the queue."""
    bk.client.enqueue_many([named.request({"host": "dead", "name": f"s{n}"}) for n in range(3)])
    drain(bk)  # two retries, then the budget (floor 2) is spent
    env = {**cli_env(bk.config), "JF_TOPOLOGY_PARAMETER": bk.topology.topology_parameter}
    listed = invoke(["queue", "ls"], env)
    assert listed.exit_code == 0, listed.output
    rows = [[cell.strip() for cell in line.strip("│ ").split("│")] for line in listed.output.splitlines()]
    [queue] = [row for row in rows if row[0] == "default"]
    [shared] = [row for row in rows if row[0] == "smtp"]
    assert queue[-1] == "0 of 100 retries", queue  # the queue's own: untouched
    assert shared == ["smtp", "bk.smtp", "2 of 100 retries"], shared
    assert "Shared retry budgets (5 min)" in listed.output
