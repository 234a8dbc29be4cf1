"""The 202 API (``jobframework.entrypoints.api``) against the embedded AWS, with HTTP API events."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest

import handlers.jobs
from jobframework.consumer import consumer
from jobframework.entrypoints import api
from jobframework.jobs import registry
from jobframework.testing import FakeLambdaContext, consume_once, provision_fresh
from jobframework.topology import RuntimeConfig


def http_event(method: str, path: str, body: Any = None, *, raw_body: str | None = None) -> dict[str, Any]:
    """An API Gateway HTTP API (payload format 2.0) event, IAM-authorized."""
    text = raw_body if raw_body is not None else (json.dumps(body) if body is not None else None)
    return {
        "version": "2.0",
        "routeKey": f"{method} {path}",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {"content-type": "application/json", "host": "api.example.com"},
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "api",
            "authorizer": {
                "iam": {"accountId": "123456789012", "userArn": "arn:aws:iam::123456789012:user/t"}
            },
            "domainName": "api.example.com",
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1"},
            "requestId": "r-1",
            "routeKey": f"{method} {path}",
            "stage": "$default",
            "time": "02/Dec/2026:12:00:00 +0000",
            "timeEpoch": 1796212800000,
        },
        "body": base64.b64encode(text.encode()).decode() if text is not None else None,
        "isBase64Encoded": text is not None,
    }


def call(method: str, path: str, body: Any = None, **kwargs: Any) -> tuple[int, dict[str, str], Any]:
    response = api.lambda_handler(http_event(method, path, body, **kwargs), FakeLambdaContext())  # type: ignore[arg-type]
    return response["statusCode"], response.get("headers", {}), json.loads(response["body"])


@pytest.fixture
def config(jf_aws: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[RuntimeConfig]:
    if "emails.send" not in registry:  # another suite cleared the default registry
        import importlib

        importlib.reload(handlers.jobs)
    _, config = provision_fresh(jf_aws.endpoint_url, registry)
    for name, value in config.to_env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("JF_JOBS", "handlers.jobs")
    api.reset()
    yield config
    api.reset()


EMAIL = {"to": "ada@example.com", "subject": "hello"}


def test_post_answers_202_with_location_and_the_job(config):
    status, headers, body = call("POST", "/jobs/emails.send", EMAIL)
    assert status == 202
    assert headers["Location"] == f"/jobs/{body['id']}"
    assert body == {
        "id": body["id"],
        "key": body["key"],
        "type": "emails.send",
        "status": "queued",
        "duplicate": False,
    }


def test_get_shows_succeeded_after_the_consumer_ran(config, jf_aws):
    _, _, accepted = call("POST", "/jobs/emails.send", EMAIL)
    sqs = jf_aws.client("sqs")
    records, response = consume_once(
        consumer(config=config, sqs_client=sqs),
        sqs,
        config.queues["high"].url,  # type: ignore[index]
    )
    assert len(records) == 1 and response["batchItemFailures"] == []
    status, _, body = call("GET", f"/jobs/{accepted['id']}")
    assert status == 200
    assert body["id"] == accepted["id"]
    assert body["type"] == "emails.send"
    assert body["status"] == "succeeded"


def test_unknown_type_is_400_naming_it(config):
    status, _, body = call("POST", "/jobs/no.such.job", EMAIL)
    assert status == 400
    assert body["errors"][0]["loc"] == ["path", "type"]
    # the name only, not the jobs the service has
    assert (
        body["message"] == body["errors"][0]["msg"] == "no job named 'no.such.job'"
    )  # not the jobs there are


def test_bad_payload_is_400_with_the_validation_errors(config):
    status, _, body = call("POST", "/jobs/emails.send", {"to": "not-an-address"})
    assert status == 400
    locs = {tuple(e["loc"]) for e in body["errors"]}
    assert locs == {("body", "to"), ("body", "subject")}
    assert all(e["msg"] for e in body["errors"])
    # what is wrong with each field; not the model's name, nor how a producer sends old versions
    assert body["message"].startswith("the payload does not validate: to: ")
    assert body["message"].endswith("; subject: Field required")


def test_a_body_that_is_not_a_json_object_is_400(config):
    for raw in ("[1, 2]", "{not json"):
        status, _, body = call("POST", "/jobs/emails.send", raw_body=raw)
        assert status == 400
        assert body["errors"][0]["loc"] == ["body"]


def test_unknown_id_is_404(config):
    status, _, body = call("GET", "/jobs/01JNOSUCHJOB0000000000000")
    assert status == 404
    assert "01JNOSUCHJOB0000000000000" in body["message"]


def test_a_status_that_cannot_be_read_is_503_not_500(config, monkeypatch):
    """A web API trial's GET answered 500 with botocore's error when the state table was unreachable."""
    monkeypatch.setenv("JF_STATE_TABLE", "no-such-table")
    api.reset()
    status, _, body = call("GET", "/jobs/0190b8a4-6f1e-7c3a-9d2b-1a2b3c4d5e6f")
    assert status == 503 and body == {"message": "the job's status could not be read; try again"}
