"""The synthesized roles' policies, resolved to the resources of a locally provisioned topology, and an
evaluator of IAM for the requests that moto does not check itself.

moto 5.2 enforces identity policies (``INITIAL_NO_AUTH_ACTION_COUNT``) but only partly:

- it checks the action of every request, named after the API operation (so ``SendMessageBatch`` is
  asked as ``sqs:SendMessageBatch``, where AWS asks for ``sqs:SendMessage``);
- it checks the resource only for SQS (the queue's ARN) and S3 (bucket and object ARNs); every other
  service is asked about ``Resource: "*"``, which a statement naming a table or a parameter never
  matches;
- it ignores ``Condition`` blocks of identity policies (``dynamodb:LeadingKeys``, ``iam:PassedToService``)
  and never asks for ``iam:PassRole``.

:func:`for_moto` therefore widens the resources of the services moto asks about ``"*"``, drops the
conditions and adds the batch operations' names; :class:`Evaluator` decides, from the recorded API
calls, what IAM would: every request's action (as AWS names it) and resource, the
``dynamodb:LeadingKeys`` condition (the partition keys of each item read or written) and the
``iam:PassRole`` of the role a one-time schedule names (with ``iam:PassedToService``).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jobframework.cdk.operate import iam_actions

REGION = "us-east-1"
ACCOUNT = "123456789012"
MOTO_RESOURCE_LEVEL = ("sqs", "s3")
"""The services whose requests moto 5.2 authorizes against the resource's ARN (others: ``"*"``)."""
BATCH_OPERATIONS = {"sqs": ("SendMessageBatch", "DeleteMessageBatch", "ChangeMessageVisibilityBatch")}
"""Operations that AWS authorizes as other actions (:func:`iam_actions`) but moto as their own name."""
MOTO_TARGET_OPERATIONS = {"s3:PutObject": ("s3:CopyObject",)}
"""Operations moto (5.2.6 on) authorizes as their own name on the target alone, where AWS takes the
key's action there (``s3:PutObject`` of the copy; ``s3:GetObject`` of its source, which
:class:`Evaluator` checks): allowed to moto wherever that action is."""
SCHEDULER_PRINCIPAL = "scheduler.amazonaws.com"

Statement = dict[str, Any]


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def role_statements(template: Mapping[str, Any], role_logical_id: str) -> list[Statement]:
    """Every identity-policy statement of a role: its inline ``Policies`` and the ``AWS::IAM::Policy``
    resources attached to it. A managed policy attached to it is refused (the test could not resolve it)."""
    resources: Mapping[str, Any] = template["Resources"]
    role = resources[role_logical_id]
    assert role["Type"] == "AWS::IAM::Role", role_logical_id
    assert not role["Properties"].get("ManagedPolicyArns"), f"{role_logical_id} has managed policies"
    statements = [s for p in role["Properties"].get("Policies", []) for s in p["PolicyDocument"]["Statement"]]
    for resource in resources.values():
        if resource["Type"] == "AWS::IAM::Policy" and {"Ref": role_logical_id} in resource["Properties"].get(
            "Roles", []
        ):
            statements += resource["Properties"]["PolicyDocument"]["Statement"]
    assert statements, f"{role_logical_id} has no policy statements"
    return statements


@dataclass
class Resolver:
    """Resolves the intrinsics of policy statements to the names and ARNs of locally provisioned
    resources: queues, tables and parameters by their physical names in the template, the rest by
    ``physical`` (``{logical_id: (ref, arn)}``). An intrinsic it cannot resolve is an error that names it.
    """

    template: Mapping[str, Any]
    physical: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    queue_urls: Mapping[str, str] = field(default_factory=dict)
    """Queue URL by queue name (what ``Ref`` of a queue is)."""

    def _named(self, logical_id: str) -> tuple[str, str]:
        if logical_id in self.physical:
            return self.physical[logical_id]
        resource = self.template["Resources"].get(logical_id)
        assert resource is not None, f"no resource {logical_id} in the template"
        kind, props = resource["Type"], resource.get("Properties", {})
        if kind == "AWS::SQS::Queue":
            name = props["QueueName"]
            return self.queue_urls[name], f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}"
        if kind == "AWS::DynamoDB::Table":
            name = props["TableName"]
            return name, f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{name}"
        if kind == "AWS::SSM::Parameter":
            name = props["Name"]
            return name, f"arn:aws:ssm:{REGION}:{ACCOUNT}:parameter/{name.lstrip('/')}"
        if kind == "AWS::Lambda::EventSourceMapping":  # grant_operate's pause and resume: no mapping here
            return f"uuid-of-{logical_id}", ""
        if kind == "AWS::Logs::LogGroup":
            name = props["LogGroupName"]
            return name, f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:{name}:*"
        raise AssertionError(f"cannot resolve {logical_id} ({kind}): give it in physical=")

    def resolve(self, value: Any) -> str:
        if isinstance(value, str):
            return value
        [(function, argument)] = value.items()
        if function == "Ref":
            pseudo = {"AWS::Partition": "aws", "AWS::Region": REGION, "AWS::AccountId": ACCOUNT}
            return pseudo[argument] if argument in pseudo else self._named(argument)[0]
        if function == "Fn::GetAtt":
            logical_id, attribute = argument
            assert attribute == "Arn", f"{logical_id}.{attribute}"
            return self._named(logical_id)[1]
        if function == "Fn::Join":
            separator, parts = argument
            return str(separator).join(self.resolve(p) for p in parts)
        raise AssertionError(f"cannot resolve {value}")

    def statements(self, statements: Sequence[Statement]) -> list[Statement]:
        """The statements with every ``Resource`` resolved (a list) and ``Action`` a list."""
        resolved = []
        for statement in statements:
            copy = dict(statement)
            copy["Action"] = as_list(statement["Action"])
            copy["Resource"] = [self.resolve(r) for r in as_list(statement["Resource"])]
            resolved.append(copy)
        return resolved


def for_moto(statements: Sequence[Statement]) -> dict[str, Any]:
    """A policy document that moto enforces as AWS would enforce ``statements``, as far as moto can:
    per service, resources kept where moto checks them and ``"*"`` elsewhere; batch operations allowed
    where their IAM actions are; conditions dropped (moto ignores them; :class:`Evaluator` checks them)."""
    out = []
    for statement in statements:
        by_service: dict[str, list[str]] = {}
        for action in statement["Action"]:
            by_service.setdefault(action.split(":", 1)[0], []).append(action)
        for service, actions in by_service.items():
            named = {a.split(":", 1)[1] for a in actions}
            extra = [
                f"{service}:{op}"
                for op in BATCH_OPERATIONS.get(service, ())
                if set(iam_actions(service, op)) <= named
            ]
            extra += [op for action in actions for op in MOTO_TARGET_OPERATIONS.get(action, ())]
            resources = statement["Resource"] if service in MOTO_RESOURCE_LEVEL else ["*"]
            out.append({"Effect": statement["Effect"], "Action": actions + extra, "Resource": resources})
    return {"Version": "2012-10-17", "Statement": out}


@dataclass(frozen=True)
class Request:
    """One authorization AWS makes for an API call: action, resource and the condition keys it sets."""

    action: str
    resource: str
    context: Mapping[str, list[str]] = field(default_factory=dict)


@dataclass
class Evaluator:
    """IAM's answer for the recorded calls, from their parameters (the services the framework calls).

    ``partition_keys`` names each table's partition key attribute (the ``dynamodb:LeadingKeys`` value).
    """

    partition_keys: Mapping[str, str]

    def requests(self, service: str, operation: str, params: Mapping[str, Any]) -> Iterator[Request]:
        """The authorizations a call of ``operation`` with ``params`` needs; an operation it does not
        know is an error (teach it), never a pass."""
        if service == "sqs":
            arn = f"arn:aws:sqs:{REGION}:{ACCOUNT}:{str(params['QueueUrl']).rsplit('/', 1)[1]}"
            yield from (Request(f"sqs:{action}", arn) for action in iam_actions("sqs", operation))
        elif service == "s3":
            if operation in ("ListObjects", "ListObjectsV2"):
                yield Request("s3:ListBucket", f"arn:aws:s3:::{params['Bucket']}")
                return
            assert operation in ("PutObject", "GetObject", "HeadObject", "CopyObject"), operation
            arn = f"arn:aws:s3:::{params['Bucket']}/{params['Key']}"
            yield from (Request(f"s3:{action}", arn) for action in iam_actions("s3", operation))
        elif service == "dynamodb":
            yield from self._dynamodb(operation, params)
        elif service == "ssm":
            assert operation == "GetParameter", f"teach the evaluator ssm:{operation}"
            name = str(params["Name"]).lstrip("/")
            yield Request("ssm:GetParameter", f"arn:aws:ssm:{REGION}:{ACCOUNT}:parameter/{name}")
        elif service == "scheduler":
            assert operation in ("CreateSchedule", "DeleteSchedule"), (
                f"teach the evaluator scheduler:{operation}"
            )
            group = params.get("GroupName", "default")
            arn = f"arn:aws:scheduler:{REGION}:{ACCOUNT}:schedule/{group}/{params['Name']}"
            yield Request(f"scheduler:{operation}", arn)
            if operation == "CreateSchedule":
                passed = {"iam:PassedToService": [SCHEDULER_PRINCIPAL]}
                yield Request("iam:PassRole", params["Target"]["RoleArn"], passed)
        else:
            raise AssertionError(f"teach the evaluator {service}:{operation}")

    def _dynamodb(self, operation: str, params: Mapping[str, Any]) -> Iterator[Request]:
        def request(table: str, keys: list[str]) -> Request:
            arn = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{table}"
            return Request(f"dynamodb:{operation}", arn, {"dynamodb:LeadingKeys": keys})

        if operation in ("GetItem", "DeleteItem", "UpdateItem", "PutItem"):
            table = params["TableName"]
            item = params["Item"] if operation == "PutItem" else params["Key"]
            yield request(table, [item[self.partition_keys[table]]["S"]])
        elif operation == "Query":
            table = params["TableName"]
            yield request(table, [self._query_key(table, params)])
        elif operation in ("BatchWriteItem", "BatchGetItem"):
            for table, entries in params["RequestItems"].items():
                if operation == "BatchGetItem":
                    items = entries["Keys"]
                else:
                    items = [
                        e.get("PutRequest", {}).get("Item") or e["DeleteRequest"]["Key"] for e in entries
                    ]
                yield request(table, [i[self.partition_keys[table]]["S"] for i in items])
        else:
            raise AssertionError(f"teach the evaluator dynamodb:{operation}")

    def _query_key(self, table: str, params: Mapping[str, Any]) -> str:
        names = params.get("ExpressionAttributeNames", {})
        for name, placeholder in re.findall(r"(#?\w+)\s*=\s*(:\w+)", params["KeyConditionExpression"]):
            if names.get(name, name) == self.partition_keys[table]:
                return str(params["ExpressionAttributeValues"][placeholder]["S"])
        raise AssertionError(f"no partition key equality in {params['KeyConditionExpression']}")

    def allowed(self, statements: Sequence[Statement], request: Request) -> bool:
        """Whether ``statements`` (resolved) allow ``request``: an Allow that matches action, resource
        and conditions, and no Deny that matches."""
        verdicts = [s["Effect"] for s in statements if _matches(s, request)]
        return "Allow" in verdicts and "Deny" not in verdicts


def _matches(statement: Statement, request: Request) -> bool:
    if not any(fnmatch.fnmatchcase(request.action.lower(), a.lower()) for a in statement["Action"]):
        return False
    if not any(fnmatch.fnmatchcase(request.resource, r) for r in statement["Resource"]):
        return False
    return all(
        _condition(operator, key, as_list(expected), request.context)
        for operator, block in statement.get("Condition", {}).items()
        for key, expected in block.items()
    )


def _condition(operator: str, key: str, expected: list[str], context: Mapping[str, list[str]]) -> bool:
    """The condition operators the framework's grants use; any other is an error, not a pass."""
    qualifier, _, base = operator.rpartition(":")
    assert qualifier in ("", "ForAllValues", "ForAnyValue"), operator
    if key in ("aws:SourceAccount", "aws:SourceArn"):
        raise AssertionError(f"{key} is a trust-policy key, not expected in an identity policy")
    values = context.get(key)
    assert values is not None, f"the evaluator does not know the condition key {key}"
    if base in ("StringLike", "ArnLike"):
        match = [any(fnmatch.fnmatchcase(v, e) for e in expected) for v in values]
    elif base in ("StringEquals", "ArnEquals"):
        match = [v in expected for v in values]
    else:
        raise AssertionError(f"the evaluator does not know the condition operator {operator}")
    if qualifier == "ForAllValues":
        return all(match)
    return any(match)
