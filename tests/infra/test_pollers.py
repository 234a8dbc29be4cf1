"""Provisioned pollers: a lane's ``pollers=(min, max)`` becomes its event source mapping's
ProvisionedPollerConfig, and the settings refuse what AWS refuses (pollers beside MaximumConcurrency);
a lane's ``record_concurrency`` reaches its consumer's environment."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import App, Stack
from aws_cdk.assertions import Match, Template
from pydantic import ValidationError

from jobframework.errors import ConfigurationError
from jobframework.topology import TopologySettings
from tests.infra.test_construct import _framework, _project


def _mappings(template: Template, queue_name: str) -> list[dict[str, Any]]:
    [queue_id] = [
        k
        for k, q in template.find_resources("AWS::SQS::Queue").items()
        if q["Properties"]["QueueName"] == queue_name
    ]
    return [
        m["Properties"]
        for m in template.find_resources("AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["EventSourceArn"] == {"Fn::GetAtt": [queue_id, "Arn"]}
    ]


def test_a_lanes_pollers_become_its_mappings_provisioned_poller_config_without_max_concurrency(tmp_path):
    package, registry = _project(tmp_path / "src")
    stack = Stack(App(), "ShopService")
    settings = TopologySettings(app="shop", pollers={"high": (2, 20)})
    jobs = _framework(stack, tmp_path / "src", package, registry, requirements=(), settings=settings)
    template = Template.from_stack(stack)
    [high] = _mappings(template, "shop-dev-high")
    assert high["ProvisionedPollerConfig"] == {"MinimumPollers": 2, "MaximumPollers": 20}
    assert "ScalingConfig" not in high  # AWS refuses MaximumConcurrency beside provisioned pollers
    [low] = _mappings(template, "shop-dev-low")  # other lanes keep their maximum concurrency
    assert low["ScalingConfig"] == {"MaximumConcurrency": jobs.topology.queue("low").max_concurrency}
    assert "ProvisionedPollerConfig" not in low
    template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {"ProvisionedPollerConfig": Match.object_like({"MaximumPollers": 20})},
    )


def test_pollers_beside_an_explicit_max_concurrency_is_refused_saying_why():
    with pytest.raises(
        ValidationError, match=r"AWS refuses .*ProvisionedPollerConfig and MaximumConcurrency"
    ):
        TopologySettings(pollers={"high": (1, 10)}, max_concurrency={"high": 8})


@pytest.mark.parametrize("pollers", [(0, 10), (201, 300), (5, 4), (1, 2001)])
def test_pollers_out_of_awss_ranges_are_refused_with_the_ranges(pollers):
    with pytest.raises(ValidationError, match=r"min 1 to 200 and max from min to 2000"):
        TopologySettings(pollers={"high": pollers})


def test_a_lane_max_concurrency_override_reaches_the_mapping(tmp_path):
    package, registry = _project(tmp_path / "src")
    stack = Stack(App(), "ShopService")
    settings = TopologySettings(app="shop", max_concurrency={"low": 7})
    _framework(stack, tmp_path / "src", package, registry, requirements=(), settings=settings)
    [low] = _mappings(Template.from_stack(stack), "shop-dev-low")
    assert low["ScalingConfig"] == {"MaximumConcurrency": 7}


def test_pollers_for_a_lane_no_job_uses_names_the_lanes(tmp_path):
    package, registry = _project(tmp_path / "src")
    settings = TopologySettings(app="shop", pollers={"high-cpu": (1, 5)})
    with pytest.raises(ConfigurationError, match=r"pollers names lane\(s\) high-cpu .*the lanes are: "):
        _framework(
            Stack(App(), "ShopService"),
            tmp_path / "src",
            package,
            registry,
            requirements=(),
            settings=settings,
        )


def test_a_lanes_record_concurrency_reaches_its_consumer_and_sizes_its_timeout(tmp_path):
    package, registry = _project(tmp_path / "src")
    stack = Stack(App(), "ShopService")
    settings = TopologySettings(app="shop", record_concurrency={"high": 3})
    jobs = _framework(stack, tmp_path / "src", package, registry, requirements=(), settings=settings)
    template = Template.from_stack(stack)
    shared = jobs.topology.consumer("shared")
    [function] = [
        f["Properties"]
        for f in template.find_resources("AWS::Lambda::Function").values()
        if f["Properties"].get("FunctionName") == shared.function_name
    ]
    assert function["Environment"]["Variables"]["JF_CONCURRENCY_HIGH"] == "3"
    assert "JF_CONCURRENCY_LOW" not in function["Environment"]["Variables"]
    assert function["Timeout"] == shared.timeout
