"""A worker for the saga tests' jobs, run as a subprocess (``python -m tests.functional.saga_worker``).

It reads the queues from ``JF_*`` variables and runs the event-source-mapping emulator with a short
Lambda timeout (6 s), so that a killed worker's in-progress records expire quickly.
"""

from __future__ import annotations

import dataclasses
import logging

import boto3

from jobframework.consumer import consumer
from jobframework.local.emulator import Emulator, pollers_for
from jobframework.topology import RuntimeConfig, Topology

from . import saga_jobs

LAMBDA_TIMEOUT = 6.0


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = RuntimeConfig.from_env()
    sqs = boto3.client("sqs", endpoint_url=config.endpoint_url, region_name=config.region or "us-east-1")
    topology = Topology.from_registry(saga_jobs.registry)
    pollers = [dataclasses.replace(p, timeout=LAMBDA_TIMEOUT) for p in pollers_for(config, topology)]
    handler = consumer(saga_jobs.registry, config=config, sqs_client=sqs)
    print("saga worker polling", flush=True)
    Emulator(pollers, handler, sqs, idle_seconds=0.05, max_idle_seconds=0.1).run_until_signal(drain_timeout=2)


if __name__ == "__main__":
    main()
