"""The payload bucket: where the client offloads payloads over ``JF_OFFLOAD_THRESHOLD`` bytes.

Objects are kept by retention class (see :mod:`jobframework.payloads`): the client puts each under
``keep-<days>d/``, ``days`` covering the job's delay, its retries, a DLQ stay and a redrive, and the
bucket has one expiration rule per class.
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, Duration, RemovalPolicy, Stack, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from jobframework.cdk.defaults import acknowledge_wildcard
from jobframework.errors import ConfigurationError
from jobframework.payloads import LEGACY_PREFIX, RETENTION_CLASSES_DAYS, class_prefix

LOGICAL_ID = "PayloadBucket"
"""The logical id of the first payload bucket of a stack: fixed, as it always was, so that a deployed
stack keeps its bucket. Another payload bucket in the same stack (a second ``JobFramework``) keeps the
id CDK derives from its construct path, e.g. ``BillingPayloadsBucket1A2B3C4D``."""


class PayloadBucket(Construct):
    """An S3 bucket for large payloads: S3-managed encryption, TLS only, no public access, objects
    owned by the bucket owner (no ACLs), each object expired after its retention class.

    Lifecycle: for each class of :data:`~jobframework.payloads.RETENTION_CLASSES_DAYS` a rule expiring
    the objects under ``keep-<days>d/`` after ``max(days, expiry_days)`` days; objects of clients older
    than the classes (under ``payloads/``) expire after ``expiry_days``.

    Props:
        expiry_days: the fewest days any object is kept; default 7 (``StageConfig`` gives 30 in prod).
        server_access_logs_bucket: where S3 writes server access logs; default none (acknowledged for
            cdk-nag: the objects are transient copies of message bodies and every access is made by
            the framework's own roles, which CloudTrail data events can audit if needed).
        removal_policy: default ``DESTROY``.
        auto_delete_objects: empty the bucket when the stack is deleted (CDK's custom resource), so that
            ``cdk destroy`` does not fail on payloads that have not expired yet; default ``True`` with
            ``DESTROY`` (dev stages), never with ``RETAIN`` (prod keeps the bucket and its objects).
        encryption_key: a customer-managed KMS key (SSE-KMS, with an S3 bucket key); default SSE-S3.

    Attributes:
        bucket, logical_id (:data:`LOGICAL_ID` for the stack's first one), objects_finding (cdk-nag's
        IAM5 finding for a grant on the objects). Grants: :meth:`grant_put` (producers): s3:PutObject on
        the objects; :meth:`grant_get` (consumers): s3:GetObject on the objects and s3:ListBucket on the
        bucket, without which S3 answers a missing key with 403, and an expired payload could not be
        told from a permission error.
    """

    logical_id: str

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        expiry_days: int = 7,
        server_access_logs_bucket: s3.IBucket | None = None,
        removal_policy: RemovalPolicy = RemovalPolicy.DESTROY,
        auto_delete_objects: bool | None = None,
        encryption_key: kms.IKey | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.expiry_days = expiry_days
        destroy = removal_policy == RemovalPolicy.DESTROY
        if auto_delete_objects and not destroy:
            raise ConfigurationError(
                "PayloadBucket: auto_delete_objects=True needs removal_policy=DESTROY (a retained bucket "
                "keeps its objects)"
            )
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            encryption=s3.BucketEncryption.S3_MANAGED if encryption_key is None else s3.BucketEncryption.KMS,
            encryption_key=encryption_key,
            bucket_key_enabled=True if encryption_key is not None else None,
            enforce_ssl=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            server_access_logs_bucket=server_access_logs_bucket,
            server_access_logs_prefix="payloads/" if server_access_logs_bucket else None,
            lifecycle_rules=[
                *(
                    s3.LifecycleRule(
                        id=f"expire-keep-{days}d",
                        prefix=class_prefix(days),
                        expiration=Duration.days(max(days, expiry_days)),
                    )
                    for days in RETENTION_CLASSES_DAYS
                ),
                s3.LifecycleRule(
                    id="expire-legacy-payloads", prefix=LEGACY_PREFIX, expiration=Duration.days(expiry_days)
                ),
                s3.LifecycleRule(
                    id="abort-uploads", abort_incomplete_multipart_upload_after=Duration.days(1)
                ),
            ],
            removal_policy=removal_policy,
            auto_delete_objects=destroy if auto_delete_objects is None else auto_delete_objects,
        )
        cfn = self.bucket.node.default_child
        assert isinstance(cfn, s3.CfnBucket)
        stack = Stack.of(self)
        taken = any(
            isinstance(c, PayloadBucket) and c is not self and c.logical_id == LOGICAL_ID
            for c in stack.node.find_all()
        )
        if taken:
            self.logical_id = stack.get_logical_id(cfn)
        else:
            cfn.override_logical_id(LOGICAL_ID)
            self.logical_id = LOGICAL_ID
        self.objects_finding = f"Resource::<{self.logical_id}.Arn>/*"
        if server_access_logs_bucket is None:
            Validations.of(self.bucket).acknowledge(
                Acknowledgment(
                    id="AwsSolutions::AwsSolutions-S1",
                    reason="payload objects are transient copies of job message bodies that expire within "
                    "days, written and read only by the framework's producer and consumer roles; "
                    "CloudTrail S3 data events audit them where required",
                )
            )

    def grant_put(self, grantee: iam.IGrantable) -> None:
        """s3:PutObject on the bucket's objects (a producer offloading a payload)."""
        self._grant(grantee, "s3:PutObject")

    def grant_get(self, grantee: iam.IGrantable) -> None:
        """s3:GetObject on the bucket's objects and s3:ListBucket on the bucket (a consumer fetching a
        payload, and told 404 rather than 403 when it is gone)."""
        self._grant(grantee, "s3:GetObject")
        iam.Grant.add_to_principal(
            grantee=grantee, actions=["s3:ListBucket"], resource_arns=[self.bucket.bucket_arn]
        )

    def _grant(self, grantee: iam.IGrantable, action: str) -> None:
        iam.Grant.add_to_principal(
            grantee=grantee, actions=[action], resource_arns=[self.bucket.arn_for_objects("*")]
        )
        acknowledge_wildcard(
            grantee,
            self.objects_finding,
            "payload objects are named by job id, unknown at deploy time; the grant is one action on "
            "the objects of this dedicated bucket only",
        )
