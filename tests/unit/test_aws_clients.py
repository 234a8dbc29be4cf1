"""One maker of boto3 clients (issue 13, item 5): lazy, one client per service even under racing
threads, given clients used as they are, the endpoint read when a client is made."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import boto3
import botocore.config
import pytest

from jobframework.aws_clients import AwsClients
from jobframework.local.aws import pooled_botocore_session, use_fake_credentials


@pytest.fixture(autouse=True)
def _credentials() -> None:
    use_fake_credentials()


def test_racing_threads_get_one_client_per_service() -> None:
    aws = AwsClients(session=boto3.Session(region_name="us-east-1"))
    start = threading.Barrier(8)

    def get(_: int) -> int:
        start.wait()
        return id(aws.client("sqs"))

    with ThreadPoolExecutor(8) as pool:
        ids = set(pool.map(get, range(8)))
    assert len(ids) == 1
    assert aws.client("dynamodb") is not aws.client("sqs")


def test_a_given_client_is_used_as_it_is() -> None:
    given = boto3.Session(region_name="us-east-1").client("sqs")
    aws = AwsClients(clients={"sqs": given, "s3": None})
    assert aws.client("sqs") is given
    assert aws.given("sqs") and not aws.given("s3")


def test_the_endpoint_and_region_are_read_when_a_client_is_made() -> None:
    where = {"endpoint": "http://127.0.0.1:1", "region": "eu-west-1"}
    aws = AwsClients(
        session=boto3.Session(),
        endpoint_url=lambda: where["endpoint"],
        region=lambda: where["region"],
        botocore_config=botocore.config.Config(max_pool_connections=7),
    )
    where["endpoint"] = "http://127.0.0.1:4566"  # learnt after the provider was made
    sqs = aws.client("sqs")
    assert sqs.meta.endpoint_url == "http://127.0.0.1:4566"
    assert sqs.meta.region_name == "eu-west-1"
    assert sqs.meta.config.max_pool_connections == 7


def test_without_a_session_it_makes_clients_from_boto3s_default_session() -> None:
    previous = boto3.DEFAULT_SESSION
    boto3.setup_default_session(botocore_session=pooled_botocore_session(connections=33))
    try:
        sqs = AwsClients(region="us-east-1").client("sqs")
        assert sqs.meta.config.max_pool_connections == 33  # what jf dev sets up reaches it
    finally:
        boto3.DEFAULT_SESSION = previous
