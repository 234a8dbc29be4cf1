"""The state and idempotency tables."""

from __future__ import annotations


def test_idempotency_table_has_the_layout_powertools_expects(synth):
    synth.template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "TableName": synth.topology.idempotency_table,
            "KeySchema": [{"AttributeName": "id", "KeyType": "HASH"}],
            "AttributeDefinitions": [{"AttributeName": "id", "AttributeType": "S"}],
            "TimeToLiveSpecification": {"AttributeName": "expiration", "Enabled": True},
        },
    )


def test_state_table_has_pk_sk_and_ttl(synth):
    synth.template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "TableName": synth.topology.state_table,
            "KeySchema": [
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            "TimeToLiveSpecification": {"AttributeName": "expires_at", "Enabled": True},
        },
    )


def test_tables_have_point_in_time_recovery_and_encryption_and_dev_destroys_them(synth):
    tables = synth.template.find_resources(
        "AWS::DynamoDB::Table",
        {
            "Properties": {
                "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
                "SSESpecification": {"SSEEnabled": True},
                "BillingMode": "PAY_PER_REQUEST",
            },
            "DeletionPolicy": "Delete",
        },
    )
    assert len(tables) == 2
    assert synth.template.find_resources("AWS::DynamoDB::GlobalTable") == {}


def test_prod_stage_retains_data_and_protects_tables():
    from aws_cdk import App
    from aws_cdk.assertions import Template

    from stacks.application import build_app

    _, stack = build_app(App(context={"stage": "prod", "jobs": "handlers.jobs"}), nag=False)
    template = Template.from_stack(stack)
    tables = template.find_resources(
        "AWS::DynamoDB::Table",
        {"DeletionPolicy": "Retain", "Properties": {"DeletionProtectionEnabled": True}},
    )
    assert len(tables) == 2
    assert len(template.find_resources("AWS::SQS::Queue", {"DeletionPolicy": "Retain"})) == 9
    template.has_resource_properties("AWS::Logs::LogGroup", {"RetentionInDays": 365})
