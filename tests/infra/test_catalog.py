"""The stack writes the job catalog (routes and payload schemas) into the topology parameter only."""

from __future__ import annotations

import json
from typing import Any

from jobframework.config import RuntimeConfig


def _joined(value: Any) -> str:
    """A CloudFormation string with every token replaced by ``X`` (they sit inside JSON strings)."""
    if isinstance(value, str):
        return value
    parts = value["Fn::Join"][1]
    return "".join(p if isinstance(p, str) else "X" for p in parts)


def test_the_topology_parameter_carries_every_jobs_route_and_schema(synth):
    (parameter,) = synth.template.find_resources("AWS::SSM::Parameter").values()
    config = RuntimeConfig.model_validate_json(_joined(parameter["Properties"]["Value"]))
    assert config.jobs == synth.topology.catalog
    assert set(config.jobs) == {j.name for j in synth.topology.jobs}
    route = config.jobs["reports.generate"]
    assert (route.priority, route.lane, route.fifo) == ("low", "low", False)
    assert route.payload_schema["required"] == ["report_id"]


def test_the_functions_variables_carry_no_schemas_and_stay_small(synth):
    functions = synth.template.find_resources("AWS::Lambda::Function").values()
    ours = [f["Properties"]["Environment"]["Variables"] for f in functions if "JF_JOBS" in json.dumps(f)]
    assert ours  # the consumers and the API
    for variables in ours:
        assert not any("payload_schema" in json.dumps(v) for v in variables.values())
        assert "JF_TOPOLOGY_PARAMETER" in variables  # where a producer finds the catalog
        size = sum(len(k) + len(json.dumps(v)) for k, v in variables.items())
        assert size < 4096  # Lambda's limit on all variables (tokens count as their JSON here)
