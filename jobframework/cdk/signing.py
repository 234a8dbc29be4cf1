"""The signing keys (optional): read access to the SSM parameter or secret that holds the HMAC keys."""

from __future__ import annotations

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from jobframework.errors import ConfigurationError

SSM = "ssm"
SECRETS_MANAGER = "secretsmanager"


class SigningKeys(Construct):
    """Where the signing keys are (``JF_SIGNING_KEYS``) and who may read them.

    Props:
        source: ``ssm:<parameter name>`` (e.g. ``ssm:/jf/prod/signing-keys``, a SecureString) or
            ``secretsmanager:<secret name or ARN>``. The stack does not create the keys: an operator
            puts the JSON there (see the README), so that the keys never pass through CloudFormation.

    Attributes:
        source, kind (``ssm`` or ``secretsmanager``), resource_arn (what the grant names).

    Raises:
        ConfigurationError: ``source`` is not of either form.

    A SecureString under the account's default ``aws/ssm`` key (or a secret under ``aws/secretsmanager``)
    needs no KMS grant; with a customer-managed key, grant ``kms:Decrypt`` on it as well.
    """

    def __init__(self, scope: Construct, construct_id: str, *, source: str) -> None:
        super().__init__(scope, construct_id)
        kind, _, name = source.partition(":")
        if kind not in (SSM, SECRETS_MANAGER) or not name:
            raise ConfigurationError(
                f"signing_keys={source!r}: expected ssm:<parameter name> (e.g. ssm:/jf/prod/signing-keys) "
                "or secretsmanager:<secret name or ARN>"
            )
        self.source = source
        self.kind = kind
        stack = Stack.of(self)
        if kind == SSM:
            self.actions = ["ssm:GetParameter"]
            self.resource_arn = stack.format_arn(
                service="ssm",
                resource="parameter",
                resource_name=name.lstrip("/"),
                arn_format=ArnFormat.SLASH_RESOURCE_NAME,
            )
        else:
            self.actions = ["secretsmanager:GetSecretValue"]
            if name.startswith("arn:"):
                self.resource_arn = name
            else:
                # A secret's ARN ends in six random characters the stack cannot know.
                self.resource_arn = stack.format_arn(
                    service="secretsmanager",
                    resource="secret",
                    resource_name=f"{name}-??????",
                    arn_format=ArnFormat.COLON_RESOURCE_NAME,
                )

    def grant_read(self, grantee: iam.IGrantable) -> None:
        """Read of the keys: ``ssm:GetParameter`` or ``secretsmanager:GetSecretValue`` on that one item."""
        iam.Grant.add_to_principal(grantee=grantee, actions=self.actions, resource_arns=[self.resource_arn])
