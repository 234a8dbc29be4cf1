"""One consumer invocation that hangs inside ``eo.killable`` until the test SIGKILLs the process.

Run as ``python -m tests.functional.killed_consumer SECONDS`` with the queues in ``JF_*`` variables:
it consumes one batch of the high queue with a Lambda context of SECONDS, as an invocation that
Lambda then kills.
"""

from __future__ import annotations

import sys

import boto3

from jobframework.consumer import consumer
from jobframework.testing import FakeLambdaContext, consume_once
from jobframework.topology import RuntimeConfig

from . import jobs_effectively_once as jobs


def main() -> None:
    config = RuntimeConfig.from_env()
    sqs = boto3.client("sqs", endpoint_url=config.endpoint_url, region_name=config.region or "us-east-1")
    jobs.hang_next.append("killed")
    consume_once(
        consumer(jobs.registry, config=config, sqs_client=sqs),
        sqs,
        config.endpoints("high").url,
        context=FakeLambdaContext(float(sys.argv[1])),
    )


if __name__ == "__main__":
    main()
