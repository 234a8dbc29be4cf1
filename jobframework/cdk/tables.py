"""The framework's two DynamoDB tables: job state and Powertools idempotency records."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kms as kms
from constructs import Construct

IDEMPOTENCY_KEY = "id"
IDEMPOTENCY_TTL = "expiration"
"""The layout Powertools' ``DynamoDBPersistenceLayer`` expects by default."""
STATE_PARTITION_KEY = "pk"
STATE_SORT_KEY = "sk"
STATE_TTL = "expires_at"


class JobTables(Construct):
    """The state table (dedup markers, job status, saga records, retry-budget counters) and the
    idempotency table, both on-demand, encrypted, with point-in-time recovery and TTL.

    Props:
        state_table_name, idempotency_table_name: physical names.
        removal_policy: default ``DESTROY``; deletion_protection: default ``False``.

    Attributes:
        state_table, idempotency_table.

    ``dynamodb.Table`` rather than ``TableV2``: cdk-nag does not inspect ``AWS::DynamoDB::GlobalTable``.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        state_table_name: str,
        idempotency_table_name: str,
        removal_policy: RemovalPolicy = RemovalPolicy.DESTROY,
        deletion_protection: bool = False,
        encryption_key: kms.IKey | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self._removal_policy = removal_policy
        self._deletion_protection = deletion_protection
        self._encryption_key = encryption_key
        self.state_table = self._table(
            "StateTable",
            table_name=state_table_name,
            partition_key=STATE_PARTITION_KEY,
            sort_key=STATE_SORT_KEY,
            ttl_attribute=STATE_TTL,
        )
        self.idempotency_table = self._table(
            "IdempotencyTable",
            table_name=idempotency_table_name,
            partition_key=IDEMPOTENCY_KEY,
            sort_key=None,
            ttl_attribute=IDEMPOTENCY_TTL,
        )

    def _table(
        self,
        construct_id: str,
        *,
        table_name: str,
        partition_key: str,
        sort_key: str | None,
        ttl_attribute: str,
    ) -> dynamodb.Table:
        sort = dynamodb.Attribute(name=sort_key, type=dynamodb.AttributeType.STRING) if sort_key else None
        return dynamodb.Table(
            self,
            construct_id,
            table_name=table_name,
            partition_key=dynamodb.Attribute(name=partition_key, type=dynamodb.AttributeType.STRING),
            sort_key=sort,
            time_to_live_attribute=ttl_attribute,
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            encryption=(
                dynamodb.TableEncryption.AWS_MANAGED
                if self._encryption_key is None
                else dynamodb.TableEncryption.CUSTOMER_MANAGED
            ),
            encryption_key=self._encryption_key,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            removal_policy=self._removal_policy,
            deletion_protection=self._deletion_protection,
        )
