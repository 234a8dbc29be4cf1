"""Every request the operator's `jf` commands make is an action that `grant_operate` grants: the
commands run on the embedded AWS while each API call is recorded (by service and operation)."""

from __future__ import annotations

import json
from typing import Any

import botocore.client
import pytest

from jobframework.client import JobClient
from jobframework.envelope import string_attribute
from jobframework.local.pollers import queue_arn_from_url
from jobframework.testing import receive_all
from jobframework.topology import RuntimeConfig
from tests.functional.conftest_local import (
    cli_env,
    dead_letter,
    event_source_mapping,
    example_jobs_config,
    invoke,
    jf_aws,
    sqs,
)

__all__ = ["example_jobs_config", "jf_aws", "sqs"]


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> set[tuple[str, str]]:
    """(service, operation) of every AWS request made in this process from now on."""
    seen: set[tuple[str, str]] = set()
    original = getattr(botocore.client.BaseClient, "_make_api_call")  # noqa: B009 (private to botocore)

    def recorded(self: Any, operation_name: str, api_params: Any) -> Any:
        seen.add((self.meta.service_model.endpoint_prefix, operation_name))
        return original(self, operation_name, api_params)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", recorded)
    return seen


def _offloaded_dead_letter(jf_aws: Any, config: RuntimeConfig, sqs: Any) -> str:
    """A dead letter whose payload is in S3 (its redrive refreshes the object); its job id."""
    small = config.model_copy(update={"offload_threshold": 1024})
    sent = JobClient(small, sqs_client=sqs, clients={"s3": jf_aws.client("s3")}).enqueue(
        "emails.send", {"to": "d@example.com", "subject": "big", "body": "x" * 4000}
    )
    ep = config.endpoints("high")
    [message] = [m for m in receive_all(sqs, ep.url) if "payload_ref" in m["Body"]]
    sqs.delete_message(QueueUrl=ep.url, ReceiptHandle=message["ReceiptHandle"])
    attributes = {k: v for k, v in message["MessageAttributes"].items()}
    attributes["jf-reason"] = string_attribute("exhausted")
    attributes["jf-source"] = string_attribute(ep.name)
    sqs.send_message(QueueUrl=ep.dlq_url, MessageBody=message["Body"], MessageAttributes=attributes)
    return sent.id


def test_peek_by_id_shows_an_offloaded_payload_read_from_s3(jf_aws, jf_config, sqs):
    """A trial read only the pointer (s3://...) of a big payload's letter, not what the job was given."""
    job_id = _offloaded_dead_letter(jf_aws, jf_config, sqs)
    env = cli_env(jf_config)
    shown = invoke(["dlq", "peek", "high", "--id", job_id], env)
    assert shown.exit_code == 0, shown.output
    assert "payload (offloaded, read from S3):" in shown.stdout and '"subject": "big"' in shown.stdout
    [letter] = json.loads(invoke(["dlq", "peek", "high", "--id", job_id, "--json"], env).stdout)
    assert letter["offloaded_payload"]["body"] == "x" * 4000
    ref = json.loads(letter["body"])["payload_ref"]
    jf_aws.client("s3").delete_object(Bucket=ref["bucket"], Key=ref["key"])  # (expired)
    gone = invoke(["dlq", "peek", "high", "--id", job_id], env)
    assert gone.exit_code == 0, gone.output
    said = " ".join(gone.stdout.split())  # (rich wraps the long line)
    assert "not read: the payload s3://" in said and "is gone (expired or deleted)" in said


def test_the_operators_commands_make_only_granted_requests(jf_aws, jf_config, sqs, tmp_path, request):
    from jobframework.cdk.operate import OPERATOR_ACTIONS, iam_actions

    event_source_mapping(jf_aws, queue_arn_from_url(jf_config.endpoints("high").url, "us-east-1"))
    client = JobClient(jf_config, sqs_client=sqs, clients={"dynamodb": jf_aws.client("dynamodb")})
    sent = client.enqueue("emails.send", {"to": "a@example.com", "subject": "hi"}, track=True)
    dead_letter(sqs, jf_config, "high", "emails.send", {"to": "b@example.com", "subject": "x"})
    dead_letter(sqs, jf_config, "low", "emails.send", {"to": "c@example.com", "subject": "y"})
    offloaded = _offloaded_dead_letter(jf_aws, jf_config, sqs)
    env = cli_env(jf_config)
    seen = request.getfixturevalue("calls")  # recording starts after the set-up above
    commands = [
        ["queue", "ls", "--json"],
        ["queue", "pause", "high"],
        ["queue", "resume", "high"],
        ["dlq", "ls", "--json"],
        ["dlq", "peek", "high", "--json"],
        ["dlq", "peek", "high", "--id", offloaded],  # (reads the payload from S3)
        ["dlq", "export", "high", "--out", str(tmp_path / "high.jsonl")],
        ["dlq", "redrive", "high", "--json"],
        ["dlq", "purge", "low", "--yes"],
        ["status", sent.id, "--json"],
        ["cancel", "--type", "emails.send", "--older-than", "0s", "--dry-run"],
        ["cancel", sent.id, "--json"],
        ["saga", "ls", "--json"],
    ]
    for args in commands:
        result = invoke(args, env)
        assert result.exit_code == 0, (args, result.output)
    assert json.loads(invoke(["status", sent.id, "--json"], env).output)["status"] == "cancelled"
    granted = {(service, action) for service, actions in OPERATOR_ACTIONS.items() for action in actions}
    assert {"sqs", "dynamodb", "lambda", "s3"} <= {service for service, _ in seen}
    needed = {(service, action) for service, op in seen for action in iam_actions(service, op)}
    assert needed - granted == set()
