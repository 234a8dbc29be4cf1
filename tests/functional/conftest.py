from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from jobframework.client import JobClient
from jobframework.consumer import Consumer, consumer
from jobframework.testing import consume_once, provision_fresh
from jobframework.topology import RuntimeConfig, Topology

from . import jobs_under_test, saga_jobs


@dataclass
class Runtime:
    """A freshly provisioned topology of the test jobs, with a client and a consumer on it."""

    topology: Topology
    config: RuntimeConfig
    sqs: Any
    client: JobClient
    handler: Consumer

    def url(self, priority: str) -> str:
        return self.config.queues[priority].url  # type: ignore[index]

    def dlq(self, priority: str) -> str:
        return self.config.queues[priority].dlq_url  # type: ignore[index]

    def consume(self, priority: str, **kwargs: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        return consume_once(self.handler, self.sqs, self.url(priority), **kwargs)


@pytest.fixture
def rt(jf_aws: Any) -> Runtime:
    jobs_under_test.calls.clear()
    jobs_under_test.seen.clear()
    topology, config = provision_fresh(jf_aws.endpoint_url, jobs_under_test.registry)
    sqs = jf_aws.client("sqs")
    return Runtime(
        topology,
        config,
        sqs,
        JobClient(config, registry=jobs_under_test.registry, sqs_client=sqs),
        consumer(jobs_under_test.registry, config=config, sqs_client=sqs),
    )


@pytest.fixture
def srt(jf_aws: Any) -> Runtime:
    """A fresh topology of the saga tests' jobs (``saga_jobs``), its client and consumer."""
    saga_jobs.events.clear()
    saga_jobs.traces.clear()
    topology, config = provision_fresh(jf_aws.endpoint_url, saga_jobs.registry)
    sqs = jf_aws.client("sqs")
    return Runtime(
        topology,
        config,
        sqs,
        JobClient(config, registry=saga_jobs.registry, sqs_client=sqs),
        consumer(saga_jobs.registry, config=config, sqs_client=sqs),
    )
