"""``jf worker`` on ECS Fargate: one service per lane, scaled on backlog per task (the session app runs
the low lane there; the profiles app critical and low-cpu)."""

from __future__ import annotations

import json

import pytest
from aws_cdk import App, Stack
from aws_cdk.assertions import Match

from jobframework.errors import ConfigurationError


def _policy(synth, kind):
    return [
        p["Properties"]
        for p in synth.template.find_resources("AWS::ApplicationAutoScaling::ScalingPolicy").values()
        if p["Properties"]["PolicyType"] == kind
    ]


def test_backlog_per_task_target_tracking_uses_metric_math_of_visible_over_running(synth):
    [policy] = _policy(synth, "TargetTrackingScaling")
    config = policy["TargetTrackingScalingPolicyConfiguration"]
    metrics = {m["Id"]: m for m in config["CustomizedMetricSpecification"]["Metrics"]}
    assert metrics["backlog_per_task"]["Expression"] == "visible / running"
    assert metrics["backlog_per_task"]["ReturnData"] is True
    visible = metrics["visible"]["MetricStat"]["Metric"]
    assert (visible["Namespace"], visible["MetricName"]) == ("AWS/SQS", "ApproximateNumberOfMessagesVisible")
    assert visible["Dimensions"][0]["Value"]["Fn::GetAtt"][0].startswith("LowQueue")
    running = metrics["running"]["MetricStat"]["Metric"]
    assert (running["Namespace"], running["MetricName"]) == ("ECS/ContainerInsights", "RunningTaskCount")
    assert {d["Name"] for d in running["Dimensions"]} == {"ClusterName", "ServiceName"}
    assert config["TargetValue"] == 10


def test_scale_out_is_fast_and_scale_in_slow(synth):
    [policy] = _policy(synth, "TargetTrackingScaling")
    config = policy["TargetTrackingScalingPolicyConfiguration"]
    assert config["ScaleOutCooldown"] == 60
    assert config["ScaleInCooldown"] >= 300


def test_worker_runs_jf_worker_on_its_lane_and_drains_within_the_stop_timeout(synth):
    [task] = synth.template.find_resources("AWS::ECS::TaskDefinition").values()
    [container] = task["Properties"]["ContainerDefinitions"]
    assert container["StopTimeout"] == 120
    command = container["Command"]
    assert command[:4] == ["worker", "--queues", "low", "--exact-lanes"]  # low only, not low-fifo/-cpu
    drain = int(command[command.index("--drain-timeout") + 1])
    assert drain < container["StopTimeout"]
    assert container["LogConfiguration"]["LogDriver"] == "awslogs"
    assert container["ReadonlyRootFilesystem"] is True
    env = {e["Name"] for e in container["Environment"]}
    assert {"JF_QUEUE_URL_LOW", "JF_DLQ_URL_LOW", "JF_JOBS", "JF_STATE_TABLE", "JF_IDEMPOTENCY_TABLE"} <= env
    assert task["Properties"]["RequiresCompatibilities"] == ["FARGATE"]


def test_image_is_built_from_the_worker_dockerfile(synth):
    manifest = json.loads((synth.outdir / f"{synth.stack.artifact_id}.assets.json").read_text())
    [image] = manifest["dockerImages"].values()
    assert image["source"]["dockerFile"] == "jobframework/cdk/worker_image/Dockerfile"
    context = synth.outdir / image["source"]["directory"]
    assert sorted(p.name for p in context.iterdir()) == [
        "README.md",
        "handlers",
        "jobframework",
        "pyproject.toml",
    ]


def test_non_critical_lane_scales_from_zero_with_a_wake_up_step(synth):
    [target] = synth.template.find_resources("AWS::ApplicationAutoScaling::ScalableTarget").values()
    assert target["Properties"]["MinCapacity"] == 0
    [step] = _policy(synth, "StepScaling")
    assert step["StepScalingPolicyConfiguration"]["AdjustmentType"] == "ExactCapacity"
    synth.template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "Metrics": Match.array_with(
                [Match.object_like({"Expression": "IF(visible > 0 AND FILL(running, 0) == 0, 1, 0)"})]
            ),
            "AlarmActions": [{"Ref": Match.string_like_regexp("WakeFromZero")}],
        },
    )


def test_critical_lane_keeps_at_least_one_task(profiles):
    targets = profiles.template.find_resources("AWS::ApplicationAutoScaling::ScalableTarget")
    minimum = {
        json.dumps(t["Properties"]["ResourceId"]).split("ContainerWorkers")[2].split("Service")[0]: t[
            "Properties"
        ]["MinCapacity"]
        for t in targets.values()
    }
    assert minimum == {"Critical": 1, "LowCpu": 0}
    assert len(_policy(profiles, "StepScaling")) == 1  # only the lane that can be at zero


def test_task_role_consumes_only_its_own_queue_and_sends_to_its_dlq_and_the_queues(synth):
    """It receives from its own queue only; it sends to its DLQ, and as a producer to every lane's
    queue (hand-back copies to its own, a saga's next step), never to another lane's DLQ."""
    template = synth.template_json()
    [policy] = [
        r["Properties"]["PolicyDocument"]["Statement"]
        for k, r in template["Resources"].items()
        if k.startswith("ContainerWorkersLowTaskTaskRoleDefaultPolicy")
    ]
    sqs = [s for s in policy if any(str(a).startswith("sqs:") for a in _as_list(s["Action"]))]
    receive = [s for s in sqs if "sqs:ReceiveMessage" in _as_list(s["Action"])]
    assert [s["Resource"]["Fn::GetAtt"][0].split("Queue")[0] for s in receive] == ["Low"]
    assert not any(s["Resource"]["Fn::GetAtt"][0].startswith("LowQueueDeadLetter") for s in receive)
    send = {s["Resource"]["Fn::GetAtt"][0] for s in sqs if "sqs:SendMessage" in _as_list(s["Action"])}
    dead_letter_queues = {r for r in send if "DeadLetter" in r}
    assert [r.startswith("LowQueueDeadLetterQueue") for r in dead_letter_queues] == [True]
    assert {r.split("Queue")[0] for r in send - dead_letter_queues} == {"Critical", "High", "Default", "Low"}


def _as_list(value):
    return value if isinstance(value, list) else [value]


def test_cluster_has_container_insights_and_tasks_no_ingress(synth):
    synth.template.has_resource_properties(
        "AWS::ECS::Cluster",
        {"ClusterSettings": [{"Name": "containerInsights", "Value": "enabled"}]},
    )
    for group in synth.template.find_resources("AWS::EC2::SecurityGroup").values():
        assert "SecurityGroupIngress" not in group["Properties"]
    assert synth.template.find_resources("AWS::EC2::NatGateway") == {}
    synth.template.has_resource_properties(
        "AWS::ECS::Service",
        {"NetworkConfiguration": {"AwsvpcConfiguration": Match.object_like({"AssignPublicIp": "ENABLED"})}},
    )
    endpoints = synth.template.find_resources("AWS::EC2::VPCEndpoint")
    assert len(endpoints) == 2  # S3 and DynamoDB gateway endpoints (free)
    assert synth.template.find_resources("AWS::EC2::FlowLog")


def test_low_lane_is_not_on_lambda_in_the_session_app(synth):
    assert not any(
        "LowQueue" in json.dumps(m["Properties"]["EventSourceArn"])
        for m in synth.template.find_resources("AWS::Lambda::EventSourceMapping").values()
    )


def test_container_workers_refuse_a_stop_timeout_fargate_does_not_allow():
    from jobframework.cdk.container_workers import ContainerWorkers

    with pytest.raises(ConfigurationError, match=r"stop_timeout=300s; Fargate allows 1 to 120"):
        ContainerWorkers(
            Stack(App(), "S"), "W", lanes=[], queues={}, tables=None, environment={}, stop_timeout=300
        )


def test_unknown_container_lane_fails_the_synth_naming_the_lanes():
    from stacks.application import build_app
    from tests.infra.conftest import profiles_registry

    with pytest.raises(
        ConfigurationError,
        match=r"container_lanes \(the example app's -c container_workers\) names high-cpu, not a lane",
    ):
        build_app(
            App(context={"jobs": "handlers.jobs", "container_workers": "high-cpu"}),
            registry=profiles_registry(),
            nag=False,
        )
