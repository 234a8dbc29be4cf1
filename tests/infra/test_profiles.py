"""Worker profiles and batched jobs: the functions, lanes and event source mappings the topology asks for
(the profiles app of ``conftest.profiles``: critical and low-cpu run on Fargate there)."""

from __future__ import annotations

import json

from jobframework.topology import RuntimeConfig
from tests.infra.conftest import PROFILE_CONTAINER_LANES


def _functions_by_name(synth):
    functions = synth.functions()
    return {f["Properties"]["FunctionName"]: f["Properties"] for f in functions.values()}


def _mapping_of(synth, lane):
    spec = synth.topology.queue(lane)
    [queue_id] = [
        k
        for k, q in synth.template.find_resources("AWS::SQS::Queue").items()
        if q["Properties"]["QueueName"] == spec.name
    ]
    mappings = [
        m["Properties"]
        for m in synth.template.find_resources("AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["EventSourceArn"] == {"Fn::GetAtt": [queue_id, "Arn"]}
    ]
    return spec, mappings


def test_one_function_per_consumer_with_its_profile_memory(profiles):
    functions = _functions_by_name(profiles)
    for consumer in profiles.topology.consumers:
        if set(consumer.lanes) <= set(PROFILE_CONTAINER_LANES):
            assert consumer.function_name not in functions  # all its lanes run on Fargate
            continue
        assert functions[consumer.function_name]["MemorySize"] == consumer.memory_mb
    assert functions["prof-dev-consumer-io"]["MemorySize"] == 256
    assert functions["prof-dev-consumer-cpu"]["MemorySize"] == 3538
    assert functions["prof-dev-consumer-shared"]["MemorySize"] == 512
    assert "ReservedConcurrentExecutions" not in functions["prof-dev-consumer-io"]


def test_profiled_lanes_get_queues_and_dlqs_of_their_own(profiles):
    names = {
        q["Properties"]["QueueName"] for q in profiles.template.find_resources("AWS::SQS::Queue").values()
    }
    for lane in ("high-io", "default-cpu", "low-cpu"):
        assert {f"prof-dev-{lane}", f"prof-dev-{lane}-dlq"} <= names
    assert "prof-dev-low-io" not in names  # only where a job uses the profile


def test_io_lane_batches_200_records_in_a_5_second_window_with_high_concurrency(profiles):
    spec, [mapping] = _mapping_of(profiles, "high-io")
    assert mapping["BatchSize"] == spec.batch_size == 200
    assert mapping["MaximumBatchingWindowInSeconds"] == spec.batching_window == 5
    assert mapping["ScalingConfig"] == {"MaximumConcurrency": spec.max_concurrency}
    assert spec.max_concurrency == 50
    assert "WorkersIoAlias" in json.dumps(mapping["FunctionName"])  # the live alias


def test_batched_job_sets_the_batch_and_window_of_its_shared_lane(profiles):
    spec, [mapping] = _mapping_of(profiles, "default")
    assert (mapping["BatchSize"], mapping["MaximumBatchingWindowInSeconds"]) == (50, 2)
    assert spec.consumer == "shared"
    assert "WorkersSharedAlias" in json.dumps(mapping["FunctionName"])


def test_unbatched_lane_keeps_ten_records_and_no_window(profiles):
    _, [mapping] = _mapping_of(profiles, "high")
    assert mapping["BatchSize"] == 10
    assert "MaximumBatchingWindowInSeconds" not in mapping


def test_cpu_lane_has_low_concurrency_on_the_cpu_function(profiles):
    spec, [mapping] = _mapping_of(profiles, "default-cpu")
    assert mapping["ScalingConfig"] == {"MaximumConcurrency": spec.max_concurrency}
    assert spec.max_concurrency <= 6
    assert "WorkersCpuAlias" in json.dumps(mapping["FunctionName"])


def test_container_lanes_have_no_event_source_mapping(profiles):
    for lane in PROFILE_CONTAINER_LANES:
        _, mappings = _mapping_of(profiles, lane)
        assert mappings == [], lane


def test_functions_get_every_lane_in_their_environment(profiles):
    [function] = [f for name, f in _functions_by_name(profiles).items() if name == "prof-dev-consumer-shared"]
    variables = function["Environment"]["Variables"]
    assert "JF_QUEUE_URL_HIGH_IO" in variables
    assert "JF_DLQ_URL_LOW_CPU" in variables
    config = RuntimeConfig.from_env({k: v if isinstance(v, str) else "token" for k, v in variables.items()})
    assert set(config.queues) == {q.lane for q in profiles.topology.queues}


def test_profiles_app_has_no_unacknowledged_cdk_nag_finding(profiles):
    report = json.loads((profiles.outdir / "validation-report.json").read_text())
    assert [v for r in report["pluginReports"] for v in r.get("violations", [])] == []
