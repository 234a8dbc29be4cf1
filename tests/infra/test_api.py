"""The example HTTP API: routes, IAM auth, access logs, its function and its rights."""

from __future__ import annotations

import json

from aws_cdk.assertions import Match


def test_api_routes_post_and_get_jobs_with_iam_auth(synth):
    routes = synth.template.find_resources("AWS::ApiGatewayV2::Route")
    assert {r["Properties"]["RouteKey"] for r in routes.values()} == {"POST /jobs/{type}", "GET /jobs/{id}"}
    assert {r["Properties"]["AuthorizationType"] for r in routes.values()} == {"AWS_IAM"}


def test_api_default_stage_is_throttled_and_access_logged(synth):
    synth.template.has_resource_properties(
        "AWS::ApiGatewayV2::Stage",
        {
            "StageName": "$default",
            "AutoDeploy": True,
            "DefaultRouteSettings": {"ThrottlingRateLimit": 50, "ThrottlingBurstLimit": 100},
            "AccessLogSettings": {
                "DestinationArn": {"Fn::GetAtt": [Match.string_like_regexp("^ApiAccessLogGroup"), "Arn"]},
                "Format": Match.string_like_regexp("requestId"),
            },
        },
    )


def test_api_function_runs_handlers_api_like_the_workers(synth):
    synth.template.has_resource_properties(
        "AWS::Lambda::Function",
        {
            "FunctionName": "jf-dev-api",
            "Handler": "jobframework.entrypoints.api.lambda_handler",
            "Runtime": "python3.14",
            "TracingConfig": {"Mode": "Active"},
            "Layers": [Match.any_value()],
            "Environment": {"Variables": Match.object_like({"JF_JOBS": "handlers.jobs"})},
        },
    )


def test_api_function_has_enqueue_rights_and_reads_job_status(synth):
    template = synth.template_json()
    [policy] = [r for k, r in template["Resources"].items() if k.startswith("ApiRoleDefaultPolicy")]
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    actions = {
        a for s in statements for a in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])
    }
    assert {"sqs:SendMessage", "s3:PutObject", "scheduler:CreateSchedule", "iam:PassRole"} <= actions
    [table, key_records] = [s for s in statements if "dynamodb:GetItem" in s["Action"]]
    assert table["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"] == [
        "dedup#*",
        "job#*",
        "saga#*",
        "debounce#*",
    ]
    assert "dynamodb:Query" in table["Action"]  # GET /jobs/{id} reads the job's items with a Query
    # ... and a tracked idempotent job's start in its idempotency record (status and cancel)
    assert key_records["Action"] == "dynamodb:GetItem"
    assert "IdempotencyTable" in json.dumps(key_records["Resource"])


def test_api_gateway_may_invoke_the_api_function(synth):
    synth.template.has_resource_properties(
        "AWS::Lambda::Permission",
        {
            "Action": "lambda:InvokeFunction",
            "Principal": "apigateway.amazonaws.com",
            "FunctionName": {"Fn::GetAtt": [Match.string_like_regexp("^ApiFunction"), "Arn"]},
        },
    )


def test_api_url_is_an_output(synth):
    synth.template.has_output("ApiUrl", {})
