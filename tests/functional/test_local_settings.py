"""``jf dev``'s topology takes the consumer's behaviour settings from the environment, as a deployed
consumer (and ``jf worker``) does: ``JF_RETRY_BUDGET=off`` turned the budget off in ``jf worker`` but
not in ``jf dev``, whose jobs were dead-lettered with reason ``budget`` during a local outage test."""

from __future__ import annotations

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


def test_a_bad_setting_says_which_variable(jf_aws, monkeypatch):
    monkeypatch.setenv("JF_RETRY_BUDGET", "lots")
    with pytest.raises(ConfigurationError, match="JF_RETRY_BUDGET"):
        provision_fresh(jf_aws.endpoint_url, registry)
