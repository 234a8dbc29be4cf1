"""``jf dev``'s topology takes the consumer's behaviour settings from the environment, as a deployed
consumer (and ``jf worker``) does: ``JF_RETRY_BUDGET=off`` turned the budget off in ``jf worker`` but
not in ``jf dev``, whose jobs were dead-lettered with reason ``budget`` during a local outage test."""

from __future__ import annotations

from typing import Any

import pytest

from jobframework.consumer import consumer
from jobframework.errors import ConfigurationError
from jobframework.testing import provision_fresh

from .jobs_under_test import registry


def test_the_local_topology_takes_the_retry_budget_and_offload_threshold_from_the_environment(
    jf_aws, monkeypatch
):
    monkeypatch.setenv("JF_RETRY_BUDGET", "off")
    monkeypatch.setenv("JF_OFFLOAD_THRESHOLD", "4096")
    _, config = provision_fresh(jf_aws.endpoint_url, registry)
    assert (config.retry_budget, config.offload_threshold) == (None, 4096)
    assert config.to_env()["JF_RETRY_BUDGET"] == "off"  # what jf dev exports to producers and workers
    handler = consumer(registry, config=config, sqs_client=jf_aws.client("sqs"))
    handler._features()
    assert handler.retry_budget is None  # no budget: every job rides out its own retries


def test_the_local_topology_verifies_signatures_when_the_environment_names_the_keys(jf_aws, monkeypatch):
    """A fintech trial's `JF_SIGNING_KEYS=ssm:... jf dev` ran an unsigned, forged payout: signing was
    on nowhere but in the variable, which jf dev did not read."""
    import json

    from jobframework.envelope import Envelope
    from jobframework.testing import FakeLambdaContext, sqs_event, sqs_record

    monkeypatch.setenv("JF_SIGNING_KEYS", "ssm:/payco/dev/signing-keys")
    topology, config = provision_fresh(jf_aws.endpoint_url, registry)
    assert config.signing_keys == "ssm:/payco/dev/signing-keys"
    assert config.to_env()["JF_SIGNING_KEYS"] == "ssm:/payco/dev/signing-keys"  # (jf dev's exports)
    ssm = jf_aws.client("ssm")
    stored = json.loads(ssm.get_parameter(Name=topology.topology_parameter)["Parameter"]["Value"])
    assert stored["signing_keys"] == "ssm:/payco/dev/signing-keys"  # (what jf worker reads)
    from jobframework.local.aws import missing_keys_note

    note = missing_keys_note(config, jf_aws.session())  # (what jf dev says at its start)
    assert note is not None and "put the key ring at /payco/dev/signing-keys" in note
    keys = {"current": "k1", "keys": {"k1": "local-secret-0123456789"}}
    ssm.put_parameter(Name="/payco/dev/signing-keys", Value=json.dumps(keys), Type="SecureString")
    assert missing_keys_note(config, jf_aws.session()) is None
    outcomes: list[Any] = []
    handler = consumer(registry, config=config, sqs_client=jf_aws.client("sqs"), listeners=[outcomes.append])
    queue = config.endpoints("high").url.rsplit("/", 1)[-1]
    forged = sqs_record(
        Envelope.new("t.lean", {"name": "forged"}), queue_arn=f"arn:aws:sqs:us-east-1:1:{queue}"
    )
    assert handler(sqs_event(forged), FakeLambdaContext(30)) == {"batchItemFailures": []}
    assert [(o.outcome, o.reason) for o in outcomes] == [("dead_lettered", "signature")]


def test_a_bad_setting_says_which_variable(jf_aws, monkeypatch):
    # (jf dev's path: it named every behaviour variable and printed pydantic's dump, a trial found)
    monkeypatch.setenv("JF_RETRY_BUDGET", "lots")
    with pytest.raises(ConfigurationError) as caught:
        provision_fresh(jf_aws.endpoint_url, registry)
    assert str(caught.value) == (
        "JF_RETRY_BUDGET='lots' is not valid: it takes retries per first attempt, a fraction from 0 to "
        "10 (0.2 is 20 %), or off"
    )


def test_a_bad_jf_variable_names_itself_and_what_it_takes_in_the_cli_and_the_client(monkeypatch):
    """A trial's JF_RETRY_BUDGET=lots printed pydantic's dump of RuntimeConfig and advice to set the
    queue URLs, which were set."""
    from jobframework.client import JobClient
    from jobframework.errors import SettingError
    from tests.functional.conftest_local import invoke

    env = {
        "JF_QUEUE_URL_LOW": "http://127.0.0.1:9/123456789012/q",
        "JF_DLQ_URL_LOW": "http://127.0.0.1:9/123456789012/d",
        "JF_RETRY_BUDGET": "lots",
        "JF_OFFLOAD_THRESHOLD": "12",
    }
    result = invoke(["status", "01a24935-a98f-7163-86d0-bb610abbfdaa"], env)
    assert result.exit_code == 1
    assert result.stderr == (
        "jf: error: JF_OFFLOAD_THRESHOLD='12' is not valid: it takes bytes from 1024 to 1048576 (SQS's "
        "1 MiB); 262144 by default; JF_RETRY_BUDGET='lots' is not valid: it takes retries per first "
        "attempt, a fraction from 0 to 10 (0.2 is 20 %), or off\n"
    )
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SettingError, match=r"^JF_OFFLOAD_THRESHOLD='12' is not valid") as caught:
        JobClient()
    assert caught.value.__cause__ is None and caught.value.__suppress_context__  # one error, not a chain
