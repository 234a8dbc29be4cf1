"""The IAM-enforced test's own evaluator and policy translation decide as IAM does on the cases the
framework's grants use (pure: no AWS)."""

from __future__ import annotations

from typing import Any

import pytest

from .iam_policy import Evaluator, Request, Statement, for_moto

TABLE = "arn:aws:dynamodb:us-east-1:123456789012:table/app-state"
PRODUCER: list[Statement] = [
    {
        "Effect": "Allow",
        "Action": ["dynamodb:PutItem", "dynamodb:Query"],
        "Resource": [TABLE],
        "Condition": {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["dedup#*", "job#*"]}},
    },
    {
        "Effect": "Allow",
        "Action": ["sqs:SendMessage"],
        "Resource": ["arn:aws:sqs:us-east-1:123456789012:app-high"],
    },
]
EVALUATOR = Evaluator(partition_keys={"app-state": "pk"})


def _allowed(service: str, operation: str, params: dict[str, Any]) -> list[bool]:
    return [EVALUATOR.allowed(PRODUCER, r) for r in EVALUATOR.requests(service, operation, params)]


def test_leading_keys_allow_the_granted_prefixes_only():
    put: dict[str, Any] = {"TableName": "app-state", "Item": {"pk": {"S": "job#1"}, "sk": {"S": "status"}}}
    assert _allowed("dynamodb", "PutItem", put) == [True]
    put["Item"]["pk"] = {"S": "debounce#k"}
    assert _allowed("dynamodb", "PutItem", put) == [False]
    query = {
        "TableName": "app-state",
        "KeyConditionExpression": "#p = :v AND begins_with(sk, :s)",
        "ExpressionAttributeNames": {"#p": "pk"},
        "ExpressionAttributeValues": {":v": {"S": "budget#high"}, ":s": {"S": "x"}},
    }
    assert _allowed("dynamodb", "Query", query) == [False]


def test_batch_operations_are_authorized_as_their_single_action_on_the_named_queue():
    batch = {"QueueUrl": "http://127.0.0.1:1/123456789012/app-high", "Entries": []}
    assert _allowed("sqs", "SendMessageBatch", batch) == [True]
    assert _allowed("sqs", "SendMessageBatch", {**batch, "QueueUrl": "http://h/1/app-low"}) == [False]
    assert _allowed("sqs", "DeleteMessageBatch", batch) == [False]


def test_a_deny_wins_and_an_unknown_condition_or_operation_is_an_error():
    deny = {"Effect": "Deny", "Action": ["sqs:*"], "Resource": ["*"]}
    request = Request("sqs:SendMessage", "arn:aws:sqs:us-east-1:123456789012:app-high")
    assert EVALUATOR.allowed(PRODUCER, request) and not EVALUATOR.allowed([*PRODUCER, deny], request)
    odd = {**PRODUCER[1], "Condition": {"NumericLessThan": {"aws:EpochTime": "1"}}}
    with pytest.raises(AssertionError, match="condition key aws:EpochTime"):
        EVALUATOR.allowed([odd], request)
    with pytest.raises(AssertionError, match="teach the evaluator dynamodb:Scan"):
        list(EVALUATOR.requests("dynamodb", "Scan", {"TableName": "app-state"}))


def test_for_moto_widens_what_moto_asks_about_star_and_adds_the_batch_names():
    document = for_moto(PRODUCER)
    dynamodb, sqs = document["Statement"]
    assert dynamodb == {
        "Effect": "Allow",
        "Action": ["dynamodb:PutItem", "dynamodb:Query"],
        "Resource": ["*"],
    }
    assert sqs["Action"] == ["sqs:SendMessage", "sqs:SendMessageBatch"]
    assert sqs["Resource"] == PRODUCER[1]["Resource"]
