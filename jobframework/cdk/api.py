"""The HTTP API of the 202 pattern: ``POST /jobs/{type}`` enqueues, ``GET /jobs/{id}`` answers the
status. An API Gateway HTTP API (IAM auth by default) in front of
``jobframework.entrypoints.api.lambda_handler``."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from aws_cdk import Acknowledgment, Duration, RemovalPolicy, Validations
from aws_cdk import aws_apigatewayv2 as apigw
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from jobframework.cdk.workers import RUNTIME

HANDLER = "jobframework.entrypoints.api.lambda_handler"
ACCESS_LOG_FORMAT = json.dumps(
    {
        "requestId": "$context.requestId",
        "ip": "$context.identity.sourceIp",
        "caller": "$context.identity.caller",
        "requestTime": "$context.requestTime",
        "routeKey": "$context.routeKey",
        "status": "$context.status",
        "responseLength": "$context.responseLength",
        "integrationError": "$context.integrationErrorMessage",
    },
    separators=(",", ":"),
)


class JobApi(Construct):
    """An HTTP API with ``POST /jobs/{type}`` and ``GET /jobs/{id}`` on one Lambda function.

    Props:
        api_name, function_name: physical names.
        environment: the ``JF_*`` and Powertools variables (the same as the consumers').
        code: the Lambda code (the consumers'); layers: the Powertools layer (as the workers');
            architecture: the layer's, default x86_64.
        authorizer: default IAM (SigV4-signed callers with ``execute-api:Invoke``); pass another
            ``IHttpRouteAuthorizer`` (JWT, Lambda) to change it. There is no unauthenticated option.
        throttle_rate_limit, throttle_burst_limit: requests/s and burst of the ``$default`` stage;
            default 50 and 100.
        timeout: seconds, default 10; memory_mb: default 256.
        log_retention: of the function's and the access logs; default two weeks.
        removal_policy: of the log groups; default ``DESTROY``.

    Attributes:
        api, stage, function, role, log_group, access_log_group, url.

    The function gets logs on its own log group and X-Ray; the stack grants it enqueue rights
    (which include reading ``job#`` status items of the state table).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        api_name: str,
        function_name: str,
        environment: Mapping[str, str],
        code: lambda_.Code,
        layers: Sequence[lambda_.ILayerVersion] = (),
        architecture: lambda_.Architecture | None = None,
        authorizer: apigw.IHttpRouteAuthorizer | None = None,
        throttle_rate_limit: int = 50,
        throttle_burst_limit: int = 100,
        timeout: int = 10,
        memory_mb: int = 256,
        log_retention: logs.RetentionDays = logs.RetentionDays.TWO_WEEKS,
        removal_policy: RemovalPolicy = RemovalPolicy.DESTROY,
        encryption_key: kms.IKey | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self._encryption_key = encryption_key
        self.log_group = logs.LogGroup(
            self,
            "LogGroup",
            log_group_name=f"/aws/lambda/{function_name}",
            retention=log_retention,
            removal_policy=removal_policy,
            encryption_key=self._encryption_key,
        )
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"jobframework HTTP API {function_name}",
        )
        self.log_group.grant_write(self.role)
        self.function = lambda_.Function(
            self,
            "Function",
            function_name=function_name,
            description="jobframework example API: POST /jobs/{type} (202), GET /jobs/{id}",
            runtime=RUNTIME,
            architecture=architecture,
            handler=HANDLER,
            code=code,
            layers=list(layers),
            timeout=Duration.seconds(timeout),
            memory_size=memory_mb,
            tracing=lambda_.Tracing.ACTIVE,
            environment=dict(environment),
            role=self.role,
            log_group=self.log_group,
        )
        Validations.of(self.role).acknowledge(
            Acknowledgment(
                id="AwsSolutions::AwsSolutions-IAM5[Resource::*]",
                reason="X-Ray active tracing: xray:PutTraceSegments and xray:PutTelemetryRecords do not "
                "support resource-level permissions, AWS requires Resource '*'",
            )
        )

        self.api = apigw.HttpApi(
            self,
            "HttpApi",
            api_name=api_name,
            description="jobframework: enqueue jobs (202 Accepted) and read their status",
            create_default_stage=False,
            default_authorizer=authorizer or authorizers.HttpIamAuthorizer(),
        )
        self.access_log_group = logs.LogGroup(
            self,
            "AccessLogGroup",
            retention=log_retention,
            removal_policy=removal_policy,
            encryption_key=self._encryption_key,
        )
        self.stage = apigw.HttpStage(
            self,
            "DefaultStage",
            http_api=self.api,
            stage_name="$default",
            auto_deploy=True,
            throttle=apigw.ThrottleSettings(rate_limit=throttle_rate_limit, burst_limit=throttle_burst_limit),
        )
        cfn_stage = self.stage.node.default_child
        assert isinstance(cfn_stage, apigw.CfnStage)
        cfn_stage.access_log_settings = apigw.CfnStage.AccessLogSettingsProperty(
            destination_arn=self.access_log_group.log_group_arn, format=ACCESS_LOG_FORMAT
        )
        integration = integrations.HttpLambdaIntegration("Integration", self.function)
        self.api.add_routes(path="/jobs/{type}", methods=[apigw.HttpMethod.POST], integration=integration)
        self.api.add_routes(path="/jobs/{id}", methods=[apigw.HttpMethod.GET], integration=integration)

    @property
    def url(self) -> str:
        """The API's base URL (``https://<id>.execute-api.<region>.amazonaws.com/``)."""
        return self.api.api_endpoint + "/"
