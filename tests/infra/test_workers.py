"""The consumer functions and their event source mappings."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Match, Template
from pydantic import BaseModel

from jobframework.cdk import JobFramework
from jobframework.errors import ConfigurationError
from jobframework.jobs import JobRegistry, Priority, job
from jobframework.topology import RuntimeConfig, TopologySettings
from tests.infra import iam_jobs
from tests.infra.conftest import CONTAINER_LANES

ALIAS_OF_SHARED = Match.string_like_regexp("^WorkersSharedAlias")


def _invokes(alias_pattern):
    """The ``FunctionName`` of a mapping that invokes the ``live`` alias (``<function name>:live``)."""
    return {"Fn::Join": ["", [{"Fn::Select": [6, {"Fn::Split": [":", {"Ref": alias_pattern}]}]}, ":live"]]}


def test_each_lambda_lane_has_one_event_source_mapping_reporting_batch_item_failures(synth):
    mappings = synth.template.find_resources("AWS::Lambda::EventSourceMapping")
    assert len(mappings) == len(synth.topology.queues) - len(CONTAINER_LANES) == 3
    for mapping in mappings.values():
        assert mapping["Properties"]["FunctionResponseTypes"] == ["ReportBatchItemFailures"]


def test_shared_consumer_concurrency_is_weighted_3_2_1(synth):
    concurrency = {}
    for spec in synth.topology.queues:
        if spec.priority is Priority.CRITICAL or spec.lane in CONTAINER_LANES:
            continue
        synth.template.has_resource_properties(
            "AWS::Lambda::EventSourceMapping",
            {
                "EventSourceArn": {
                    "Fn::GetAtt": [
                        Match.string_like_regexp(f"^{spec.priority.value.capitalize()}Queue"),
                        "Arn",
                    ]
                },
                "FunctionName": _invokes(ALIAS_OF_SHARED),
                "BatchSize": spec.batch_size,
                "ScalingConfig": {"MaximumConcurrency": spec.max_concurrency},
            },
        )
        concurrency[spec.priority] = spec.max_concurrency
    assert concurrency == {Priority.HIGH: 6, Priority.DEFAULT: 4}  # low (2) runs on Fargate here
    assert synth.topology.queue(Priority.LOW).max_concurrency == 2


def test_critical_consumer_is_dedicated_with_reserved_concurrency(synth):
    critical = synth.topology.consumer("critical")
    synth.template.has_resource_properties(
        "AWS::Lambda::Function",
        {
            "FunctionName": critical.function_name,
            "ReservedConcurrentExecutions": critical.reserved_concurrency,
        },
    )
    synth.template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {
            "EventSourceArn": {"Fn::GetAtt": [Match.string_like_regexp("^CriticalQueue"), "Arn"]},
            "FunctionName": _invokes(Match.string_like_regexp("^WorkersCriticalAlias")),
            "ScalingConfig": {"MaximumConcurrency": synth.topology.queue(Priority.CRITICAL).max_concurrency},
        },
    )


def _consumer_functions(synth):
    names = {c.function_name for c in synth.topology.consumers}
    functions = synth.functions()
    return {k: f for k, f in functions.items() if f["Properties"]["FunctionName"] in names}


def test_functions_run_the_worker_on_the_latest_python_with_the_powertools_layer_and_xray(synth):
    functions = _consumer_functions(synth)
    assert len(functions) == 2
    for function in functions.values():
        props = function["Properties"]
        assert props["Handler"] == "jobframework.entrypoints.worker.lambda_handler"
        assert props["Runtime"] == "python3.14"
        assert props["TracingConfig"] == {"Mode": "Active"}
        [layer] = props["Layers"]
        parts = layer["Fn::Join"][1]
        assert ":017000801446:layer:AWSLambdaPowertoolsPythonV3-python314-x86_64:" in parts[-1]


def test_functions_get_the_jf_environment_the_client_and_consumer_read(synth):
    functions = synth.functions()
    assert functions
    for function in functions.values():
        variables = function["Properties"]["Environment"]["Variables"]
        config = RuntimeConfig.from_env(
            {k: v if isinstance(v, str) else "token" for k, v in variables.items()}
        )
        assert set(config.queues) == set(Priority)
        assert variables["JF_JOBS"] == "handlers.jobs"
        assert variables["JF_TOPOLOGY_PARAMETER"] == "/jf/dev/topology"
        assert variables["POWERTOOLS_METRICS_NAMESPACE"] == "JobFramework/jf-dev"  # (its own: app-stage)
        assert variables["JF_STATE_TABLE"]["Ref"].startswith("TablesStateTable")
        assert variables["JF_IDEMPOTENCY_TABLE"]["Ref"].startswith("TablesIdempotencyTable")


def test_lambda_asset_holds_only_the_framework_and_handlers(synth):
    [asset] = synth.code_assets()
    asset_dir = synth.outdir / asset["source"]["path"]
    top = sorted(p.name for p in asset_dir.iterdir())
    assert top == ["handlers", "jobframework"]
    assert not list(asset_dir.rglob("__pycache__"))


def test_functions_get_the_signing_keys_and_the_default_retry_budget(synth):
    for function in synth.functions().values():
        variables = function["Properties"]["Environment"]["Variables"]
        assert variables["JF_SIGNING_KEYS"] == "ssm:/jf/dev/signing-keys"
        assert "JF_RETRY_BUDGET" not in variables  # the default, 0.2, is what the runtime assumes


def _reservations(registry: JobRegistry, **props: Any) -> dict[str, Any]:
    """``ReservedConcurrentExecutions`` of each consumer function of a stack of ``registry``'s jobs."""
    stack = Stack(App(), "Reservations")
    JobFramework(
        stack,
        "Jobs",
        job_modules=["tests.infra.iam_jobs"],
        registry=registry,
        api=False,
        code=lambda_.Code.from_inline("def handler(event, context): ..."),
        **props,
    )
    functions = Template.from_stack(stack).find_resources("AWS::Lambda::Function")
    return {
        f["Properties"]["FunctionName"]: f["Properties"].get("ReservedConcurrentExecutions")
        for f in functions.values()
        if f["Properties"]["Handler"].startswith("jobframework.")
    }


class Ping(BaseModel):
    n: int = 0


def _with_a_critical_job() -> JobRegistry:
    registry = JobRegistry()

    @job("auth.otp", priority=Priority.CRITICAL, registry=registry)
    def otp(p: Ping) -> None: ...

    return registry


def test_a_critical_consumer_without_critical_jobs_reserves_no_concurrency():
    assert _reservations(iam_jobs.REGISTRY) == {
        "jf-dev-consumer-critical": None,
        "jf-dev-consumer-shared": None,
    }


def test_a_critical_job_gets_its_consumer_reserved_concurrency_unless_turned_off():
    assert _reservations(_with_a_critical_job())["jf-dev-consumer-critical"] == 5
    assert _reservations(_with_a_critical_job(), reserve_concurrency=False) == {
        "jf-dev-consumer-critical": None,
        "jf-dev-consumer-shared": None,
    }


def test_a_critical_reservation_under_two_is_refused_naming_the_setting():
    with pytest.raises(
        ConfigurationError,
        match=r"jf-dev-critical: .*would be 1, AWS takes 2 to 1000: set .*critical_reserved_",
    ):
        _reservations(iam_jobs.REGISTRY, settings=TopologySettings(critical_reserved_concurrency=1))
