"""What an operator needs to run ``jf`` against a deployment: :func:`grant_operate`.

The operator's commands (``jf queue ls|pause|resume``, ``jf dlq ls|peek|export|purge|redrive|tasks``,
``jf status``, ``jf cancel``, ``jf saga ls|show`` and ``jf ui``; ``jf saga signal|cancel`` change a
saga and send its next step or compensation, which is ``grant_enqueue``'s) read the topology
parameter, the queues and their dead letters, the state table (and the idempotency table's records of
tracked jobs, which ``jf status``, ``jf cancel`` and the console's lists read), offloaded payloads, the
event source mappings (to pause a queue), the consumers' metrics and the delay group's schedules
(``jf queue ls`` counts the jobs they hold). :data:`OPERATOR_ACTIONS` is every API action those
commands call, by service; ``tests/functional/test_operate.py`` runs the commands on the embedded AWS,
records each request they make, and checks that this list holds them all, so the grant follows the
CLI. Resources are this deployment's own wherever IAM allows it (the queues, the table, the bucket,
the parameter, the stack's event source mappings); the queue actions cover the schedules' DLQ too,
whose undelivered firings an operator inspects from the SQS console and sends to the job's queue by
hand (the console's redrive takes only the DLQs of SQS queues). ``ListEventSourceMappings``,
CloudWatch's metric reads and Scheduler's ``ListSchedules`` take no resource.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import aws_iam as iam

from jobframework.cdk.defaults import acknowledge_wildcard, grant_key_use

if TYPE_CHECKING:
    from jobframework.cdk.resources import JobResources

OPERATOR_ACTIONS: dict[str, tuple[str, ...]] = {
    "sqs": (
        "GetQueueAttributes",
        "GetQueueUrl",
        "ReceiveMessage",
        "SendMessage",
        "DeleteMessage",
        "ChangeMessageVisibility",
        "StartMessageMoveTask",
        "ListMessageMoveTasks",
    ),
    "dynamodb": ("GetItem", "BatchGetItem", "Query", "Scan", "UpdateItem", "DeleteItem"),
    "lambda": ("ListEventSourceMappings", "UpdateEventSourceMapping"),
    "ssm": ("GetParameter",),
    "s3": ("GetObject", "PutObject", "ListBucket"),
    "cloudwatch": ("GetMetricStatistics",),
    "scheduler": ("ListSchedules",),
}
"""Every IAM action the operator's ``jf`` commands need, by service (see :func:`iam_actions`)."""
KEY_RECORD_ACTIONS: tuple[str, ...] = ("dynamodb:GetItem",)
"""On the idempotency table, for producers and operators: status and cancel read a tracked idempotent
job's start there (:mod:`jobframework.stores.key_records`)."""

_AUTHORIZED_AS: dict[tuple[str, str], tuple[str, ...]] = {
    ("sqs", "SendMessageBatch"): ("SendMessage",),
    ("sqs", "DeleteMessageBatch"): ("DeleteMessage",),
    ("sqs", "ChangeMessageVisibilityBatch"): ("ChangeMessageVisibility",),
    ("s3", "CopyObject"): ("GetObject", "PutObject"),
    ("s3", "HeadObject"): ("GetObject",),
}


def iam_actions(service: str, operation: str) -> tuple[str, ...]:
    """The IAM actions that authorize ``operation`` of ``service``: its own name, but for SQS's batch
    operations (authorized as their single forms) and S3's copy and head (as the reads and writes they
    make). A redrive refreshes an offloaded payload by copying it onto itself.

    >>> iam_actions("sqs", "SendMessageBatch"), iam_actions("s3", "CopyObject")
    (('SendMessage',), ('GetObject', 'PutObject'))
    """
    return _AUTHORIZED_AS.get((service, operation), (operation,))


def _actions(service: str) -> list[str]:
    return [f"{service}:{action}" for action in OPERATOR_ACTIONS[service]]


def grant_operate(resources: JobResources, grantee: iam.IGrantable) -> None:
    """Let ``grantee`` run the operator's ``jf`` commands against ``resources`` (see the module)."""
    if resources.encryption_key is not None:  # (the queues', the tables' and the bucket's key)
        grant_key_use(resources.encryption_key, grantee)
    queues = [q.queue.queue_arn for q in resources.queues.values()]
    dlqs = [q.dead_letter_queue.queue_arn for q in resources.queues.values()]
    if resources.schedules is not None:  # firings Scheduler could not deliver, inspected and resent
        dlqs.append(resources.schedules.dead_letter_queue.queue_arn)
    iam.Grant.add_to_principal(grantee=grantee, actions=_actions("sqs"), resource_arns=queues + dlqs)
    table = resources.tables.state_table
    iam.Grant.add_to_principal(grantee=grantee, actions=_actions("dynamodb"), resource_arns=[table.table_arn])
    iam.Grant.add_to_principal(
        grantee=grantee,
        # and the console's lists and bulk cancel merge a page's records (key_records.merged_all)
        actions=[*KEY_RECORD_ACTIONS, "dynamodb:BatchGetItem"],
        resource_arns=[resources.tables.idempotency_table.table_arn],
    )
    resources.topology_parameter.grant_read(grantee)
    resources.payloads.grant_get(grantee)  # GetObject, and ListBucket so that a gone payload is a 404
    resources.payloads.grant_put(grantee)  # a redrive refreshes an offloaded payload by copying it
    mappings = [source.event_source_mapping_arn for source in resources.workers.event_sources.values()]
    iam.Grant.add_to_principal(
        grantee=grantee, actions=["lambda:ListEventSourceMappings"], resource_arns=["*"]
    )
    if mappings:
        iam.Grant.add_to_principal(
            grantee=grantee, actions=["lambda:UpdateEventSourceMapping"], resource_arns=mappings
        )
    iam.Grant.add_to_principal(
        grantee=grantee,
        actions=_actions("cloudwatch"),
        resource_arns=["*"],  # CloudWatch's metric reads take no resource (the console's charts)
    )
    iam.Grant.add_to_principal(
        grantee=grantee,
        actions=_actions("scheduler"),
        resource_arns=["*"],  # jf queue ls counts the delayed jobs of the delay group; takes no resource
    )
    resources.delays.grant_unschedule(grantee)  # a cancel deletes a long-delayed job's schedule
    acknowledge_wildcard(
        grantee,
        "Resource::*",
        "lambda:ListEventSourceMappings, cloudwatch:GetMetricStatistics and scheduler:ListSchedules do not "
        "support resource-level permissions; updating a mapping is granted on this stack's mappings only",
    )
