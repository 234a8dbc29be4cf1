"""A producer that does not import the job module enqueues by name: routes and schemas from the topology."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jobframework.client import JobClient
from jobframework.config import JobRoute, RuntimeConfig
from jobframework.errors import ConfigurationError, PayloadValidationError, UnknownJobError
from jobframework.jobs import JobRegistry
from jobframework.testing import receive_all
from tests.functional import jobs_under_test


def bodies(rt: Any, lane: str) -> list[dict[str, Any]]:
    return [json.loads(m["Body"]) for m in receive_all(rt.sqs, rt.url(lane))]


def producer(rt: Any, config: RuntimeConfig | None = None) -> JobClient:
    """A client with an empty registry: it knows the jobs only from the topology."""
    return JobClient(
        config or rt.config.model_copy(update={"jobs": {}}),  # everything comes from the SSM parameter
        registry=JobRegistry(),
        sqs_client=rt.sqs,
        clients={"ssm": rt.ssm, "dynamodb": rt.dynamodb},
    )


@pytest.fixture
def named(rt, jf_aws):
    rt.ssm = jf_aws.client("ssm")
    rt.dynamodb = jf_aws.client("dynamodb")
    return rt


def test_a_job_the_process_never_imported_is_routed_and_sent_with_its_defaults(named):
    client = producer(named)
    result = client.enqueue("t.ok", {"name": "by-name"})
    (env,) = bodies(named, "high")  # t.ok is a high-priority job
    assert env["id"] == result.id and env["type"] == "t.ok"
    assert env["payload"] == {"name": "by-name", "fail_times": 0, "delay": None}  # the model's defaults
    assert result.priority == "high"


def test_the_consumer_keys_a_job_sent_by_name_with_the_jobs_key_function(named):
    # The producer cannot run the job's key= function; the consumer does, so idempotency still holds.
    client = producer(named)
    first = client.enqueue("t.keyed", {"name": "once"})
    second = client.enqueue("t.keyed", {"name": "once"})
    assert first.id != second.id and first.key == first.id  # sent unkeyed: the key is the id
    consumed, _ = named.consume("high")
    assert len(consumed) == 2
    named.consume("high")
    assert jobs_under_test.calls["once"] == 1


def test_the_payload_is_checked_against_the_schema_and_the_field_is_named(named):
    client = producer(named)
    with pytest.raises(
        PayloadValidationError, match=r"t\.ok does not match its schema .*: name: Field required"
    ):
        client.enqueue("t.ok", {"nam": "typo"})
    with pytest.raises(PayloadValidationError, match=r"fail_times: must be bigger than or equal to 0"):
        client.enqueue("t.ok", {"name": "x", "fail_times": -1})
    with pytest.raises(PayloadValidationError, match=r"name: must be string"):
        client.enqueue("t.ok", {"name": 5})
    # Every bad field at once, as pydantic reports them (the compiled schema stops at its first).
    with pytest.raises(PayloadValidationError) as caught:
        client.enqueue("t.ok", {"fail_times": -1, "delay": "soon"})
    problems = str(caught.value).split("): ", 1)[1].split("; ")
    assert sorted(p.split(":")[0] for p in problems) == ["delay", "fail_times", "name"], problems
    assert "name: Field required" in problems
    assert "fail_times: must be bigger than or equal to 0" in problems
    assert bodies(named, "high") == []  # nothing was sent


def test_the_topology_parameter_carries_each_jobs_route_and_schema(named):
    value = named.ssm.get_parameter(Name=named.topology.topology_parameter)["Parameter"]["Value"]
    read = RuntimeConfig.model_validate_json(value)
    route = read.jobs["t.ok"]
    assert (route.priority, route.lane, route.fifo, route.version) == ("high", "high", False, 1)
    assert route.payload_schema["required"] == ["name"]
    assert set(route.payload_schema["properties"]) == {"name", "fail_times", "delay"}
    assert len(value) < 4096  # a standard SSM parameter


def test_a_config_from_jf_variables_reads_the_catalog_from_the_parameter_they_name(named):
    env = {**named.config.to_env(), "JF_TOPOLOGY_PARAMETER": named.topology.topology_parameter}
    config = RuntimeConfig.from_env(env)
    assert config.jobs == {} and config.topology_parameter == named.topology.topology_parameter
    producer(named, config).enqueue("t.declined", {"name": "env"})
    assert [b["type"] for b in bodies(named, "high")] == ["t.declined"]


def test_settings_the_environment_gives_win_over_the_topology_parameters(named):
    """A fintech trial's `JF_TOPOLOGY_PARAMETER=... JF_SIGNING_KEYS=ssm:... jf worker` ran an unsigned,
    forged payout: every JF_* setting was ignored once the parameter configured the worker."""
    parameter = {"JF_TOPOLOGY_PARAMETER": named.topology.topology_parameter}
    plain = RuntimeConfig.from_env(parameter, ssm_client=named.ssm)
    assert plain.signing_keys is None and plain.retry_budget == named.config.retry_budget
    given = {**parameter, "JF_SIGNING_KEYS": "ssm:/payco/keys", "JF_RETRY_BUDGET": "off"}
    config = RuntimeConfig.from_env(given, ssm_client=named.ssm)
    assert (config.signing_keys, config.retry_budget) == ("ssm:/payco/keys", None)
    assert config.model_copy(update={"signing_keys": None, "retry_budget": plain.retry_budget}) == plain
    with pytest.raises(ConfigurationError, match="JF_OFFLOAD_THRESHOLD"):
        RuntimeConfig.from_env({**parameter, "JF_OFFLOAD_THRESHOLD": "lots"}, ssm_client=named.ssm)


def test_an_unknown_name_says_where_the_client_looked_and_what_to_set(named):
    with pytest.raises(UnknownJobError) as info:
        producer(named).enqueue("invoices.render", {})
    message = str(info.value)
    assert "no job named 'invoices.render' is registered in this process (known: none)" in message
    assert f"SSM parameter {named.topology.topology_parameter} (it lists: t.broken" in message
    assert "JF_TOPOLOGY_PARAMETER" in message

    bare = named.config.model_copy(update={"jobs": {}, "topology_parameter": None})
    with pytest.raises(
        UnknownJobError, match=r"JF_TOPOLOGY_PARAMETER is not set.*export what `jf dev` prints"
    ):
        producer(named, bare).enqueue("t.ok", {"name": "x"})

    # A parameter that is not there is a name to fix, not a grant to add (it said grant_enqueue): a
    # trial's `jf dev --app webhooks` wrote /webhooks/dev/topology, and the rest read /jf/dev/topology.
    missing = named.config.model_copy(update={"jobs": {}, "topology_parameter": "/jf/nowhere/topology"})
    with pytest.raises(UnknownJobError) as nowhere:
        producer(named, missing).enqueue("t.ok", {"name": "x"})
    assert "there is no SSM parameter /jf/nowhere/topology to look in" in str(nowhere.value)
    assert "`jf dev --app webhooks` writes /webhooks/dev/topology" in str(nowhere.value)
    assert "grant_enqueue" not in str(nowhere.value)
    with pytest.raises(ConfigurationError, match=r"no topology parameter /jf/nowhere/topology here: the "):
        RuntimeConfig.from_parameter("/jf/nowhere/topology", ssm_client=named.ssm)


def test_a_fifo_route_is_refused_rather_than_sent_without_a_message_group(named):
    route = JobRoute(
        priority="high", lane="high-fifo", fifo=True, payload_schema={"type": "object", "properties": {}}
    )
    config = named.config.model_copy(update={"jobs": {"orders.ship": route}})
    with pytest.raises(ConfigurationError, match="pass group="):
        producer(named, config).enqueue("orders.ship", {})


def test_jf_enqueue_warns_of_a_job_the_topologys_catalog_does_not_have(named, jf_aws):
    """A trial enqueued with --jobs of a module its running jf dev had not loaded: no word, and the job
    was dead-lettered unknown-type."""
    from jobframework.local.aws import FAKE_CREDENTIALS
    from tests.functional.conftest_local import invoke

    env = {
        **FAKE_CREDENTIALS,
        "JF_ENDPOINT_URL": jf_aws.endpoint_url,
        "JF_TOPOLOGY_PARAMETER": str(named.topology.topology_parameter),
    }
    known = invoke(
        ["enqueue", "t.ok", '{"name": "cataloged"}', "--jobs", "tests.functional.jobs_under_test"], env
    )
    assert known.exit_code == 0 and "warning" not in known.stderr, known.output
    extra = _enqueue_uncataloged(env)
    assert extra.exit_code == 0, extra.output  # sent: the catalog may lag a deploy; the warning says so
    assert "jf: warning: webhooks.deliver is not in the topology's job catalog" in extra.stderr


def _enqueue_uncataloged(env: dict[str, str]) -> Any:
    """`jf enqueue` of an example job (``handlers.jobs``) that the topology's catalog here lacks."""
    from tests.functional.conftest_local import invoke

    args = ["enqueue", "webhooks.deliver", '{"url": "https://x.example/h", "event": "e"}']
    return invoke([*args, "--jobs", "handlers.jobs"], env)


V2_MODULE = '''
from pydantic import BaseModel

from jobframework import job


class Sized(BaseModel):
    width: int
    height: int = 0


@job("t.catalog_v2", version=2, upgrade={1: lambda d: {"width": d["size"]}})
def resize(p: Sized) -> None:
    """Version 2 of a payload the catalog knows at version 1."""
'''


def test_jf_enqueue_with_jf_devs_exports_warns_of_a_job_or_version_its_catalog_lacks(
    named, jf_aws, tmp_path, monkeypatch
):
    """A trial pasted jf dev's exports (the queue URLs and the parameter): `jf enqueue --jobs` of a job
    the running jf dev had not loaded said nothing (the warning read only a catalog in the
    configuration), nor of a payload version newer than the catalog's (dead-lettered `version`)."""
    from jobframework.config import JobRoute
    from jobframework.local.aws import FAKE_CREDENTIALS
    from tests.functional.conftest_local import invoke

    (tmp_path / "catalog_v2_jobs.py").write_text(V2_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    route = JobRoute(priority="default", lane="default", version=1, payload_schema={"type": "object"})
    parameter = "/jftest-v2/dev/topology"
    catalog = named.config.model_copy(update={"jobs": {"t.catalog_v2": route}, "topology_parameter": None})
    named.ssm.put_parameter(Name=parameter, Value=catalog.model_dump_json(), Type="String", Overwrite=True)
    env = {
        **FAKE_CREDENTIALS,
        **named.config.model_copy(update={"jobs": {}}).to_env(),  # what jf dev prints: no catalog
        "JF_ENDPOINT_URL": jf_aws.endpoint_url,
        "JF_TOPOLOGY_PARAMETER": parameter,
    }
    assert env.get("JF_QUEUE_URL_DEFAULT")

    newer = invoke(["enqueue", "t.catalog_v2", '{"width": 3}', "--jobs", "catalog_v2_jobs"], env)
    assert newer.exit_code == 0, newer.output  # sent (a deploy may be on its way); the warning says what
    assert (
        "jf: warning: t.catalog_v2 is payload version 2 here and version 1 in the topology's job "
        f"catalog ({parameter}): its consumers would hand it back for an hour, then dead-letter it `version`"
    ) in newer.stderr
    older = invoke(
        ["enqueue", "t.catalog_v2", '{"size": 3}', "--payload-version", "1", "--jobs", "catalog_v2_jobs"], env
    )
    assert older.exit_code == 0 and "warning" not in older.stderr, older.output

    extra = _enqueue_uncataloged(env)
    assert extra.exit_code == 0, extra.output
    assert f"jf: warning: webhooks.deliver is not in the topology's job catalog ({parameter})" in extra.stderr
