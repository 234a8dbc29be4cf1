"""The dashboard's rows per job type and per consumer, and the rate-of-change alarms: one widget or
alarm a test, read from the synthesized template."""

from __future__ import annotations

import doctest
import json
from typing import Any

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Match, Template

from jobframework.cdk import job_widgets
from jobframework.cdk.defaults import DEPTH_GROWTH_MINUTES, DEPTH_GROWTH_PER_MINUTE, UTILIZATION_BAND
from jobframework.cdk.job_widgets import allowed_concurrency
from jobframework.cdk.monitoring import Monitoring
from jobframework.cdk.priority_queue import PriorityQueue
from jobframework.errors import ConfigurationError
from jobframework.jobs import JobRegistry, Priority
from jobframework.topology import ConsumerSpec, Topology

from .conftest import CONTAINER_LANES, PROFILE_CONTAINER_LANES

TOKEN = "<token>"


def widgets(template: Template) -> list[dict[str, Any]]:
    """The dashboard's widgets, its body's tokens (region, queue and function names) as ``<token>``."""
    [dashboard] = template.find_resources("AWS::CloudWatch::Dashboard").values()
    parts = dashboard["Properties"]["DashboardBody"]["Fn::Join"][1]
    body = json.loads("".join(p if isinstance(p, str) else TOKEN for p in parts))
    return list(body["widgets"])


def widget(template: Template, title_start: str) -> dict[str, Any]:
    [found] = [
        w["properties"] for w in widgets(template) if w["properties"].get("title", "").startswith(title_start)
    ]
    props: dict[str, Any] = found
    return props


def expressions(props: dict[str, Any]) -> dict[str, str]:
    """The widget's math expressions by label."""
    return {row[0]["label"]: row[0]["expression"] for row in props["metrics"] if "expression" in row[0]}


def hidden_metrics(props: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The metrics an expression reads, by id: namespace, name, dimensions and stat."""
    found = {}
    for row in props["metrics"]:
        if isinstance(row[0], str):
            *names, options = row
            found[options["id"]] = {
                "namespace": names[0],
                "name": names[1],
                "dimensions": dict(zip(names[2::2], names[3::2], strict=True)),
                "stat": options["stat"],
                "visible": options.get("visible", True),
            }
    return found


def plotted(props: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The plain metrics of a widget by label: name, dimensions, stat."""
    found = {}
    for row in props["metrics"]:
        if isinstance(row[0], str):
            *names, options = row
            found[options["label"]] = {
                "name": names[1],
                "dimensions": dict(zip(names[2::2], names[3::2], strict=True)),
                "stat": options["stat"],
            }
    return found


def job_dimensions(job) -> dict[str, str]:
    return {"JobType": job.name, "Priority": job.priority.value, "service": "jobframework"}


@pytest.mark.parametrize(
    ("title", "metric", "stat"),
    [
        ("Enqueue to completion p50", "EndToEndLatency", "p50"),
        ("Enqueue to completion p95", "EndToEndLatency", "p95"),
        ("Processing time p95", "ProcessingTime", "p95"),
    ],
)
def test_latency_widgets_show_a_line_per_job_type(synth, title, metric, stat):
    lines = plotted(widget(synth.template, title))
    assert set(lines) == {job.name for job in synth.topology.jobs}
    for job in synth.topology.jobs:
        assert lines[job.name] == {"name": metric, "dimensions": job_dimensions(job), "stat": stat}


def test_first_attempt_failure_rate_is_failures_over_first_attempts_per_job_type(synth):
    props = widget(synth.template, "First-attempt failure rate (%)")
    rates, inputs = expressions(props), hidden_metrics(props)
    assert set(rates) == {job.name for job in synth.topology.jobs}
    for job in synth.topology.jobs:
        expression = rates[job.name]
        [failures_id] = [i for i in inputs if f"FILL({i}, 0)" in expression]
        [attempts_id] = [i for i in inputs if expression.endswith(f"/ {i}")]
        assert expression == f"100 * FILL({failures_id}, 0) / {attempts_id}"
        for metric_id, name in ((failures_id, "FirstAttemptFailures"), (attempts_id, "FirstAttempts")):
            assert inputs[metric_id] == {
                "namespace": "JobFramework/jf-dev",
                "name": name,
                "dimensions": job_dimensions(job),
                "stat": "Sum",
                "visible": False,
            }
    assert props["yAxis"]["left"]["min"] == 0


def test_dead_letter_rate_is_dead_letters_over_finished_jobs_per_job_type(synth):
    props = widget(synth.template, "Dead-letter rate (%)")
    rates, inputs = expressions(props), hidden_metrics(props)
    by_name = {(m["name"], m["dimensions"]["JobType"]): i for i, m in inputs.items()}
    for job in synth.topology.jobs:
        dead, ok = by_name[("DeadLettered", job.name)], by_name[("Succeeded", job.name)]
        assert rates[job.name] == f"100 * FILL({dead}, 0) / (FILL({ok}, 0) + FILL({dead}, 0))"
        assert inputs[dead]["dimensions"] == job_dimensions(job)
        assert inputs[dead]["stat"] == inputs[ok]["stat"] == "Sum"


def test_utilization_is_concurrency_over_the_allowed_with_the_band_marked(synth):
    props = widget(synth.template, "Worker utilization")
    rates, inputs = expressions(props), hidden_metrics(props)
    shared_lanes = [
        q for q in synth.topology.queues if q.consumer == "shared" and q.lane not in CONTAINER_LANES
    ]
    shared = sum(q.max_concurrency for q in shared_lanes)
    critical = synth.topology.consumer("critical").reserved_concurrency
    assert (shared, critical) == (10, 5)  # high 6 + default 4 (low is on Fargate); reserved 5
    assert set(rates) == {f"critical (of {critical})", f"shared (of {shared})"}
    for label, expression in rates.items():
        allowed = label.split("(of ")[1].rstrip(")")
        [metric_id] = [i for i in inputs if expression == f"100 * {i} / {allowed}"]
        assert inputs[metric_id]["namespace"] == "AWS/Lambda"
        assert inputs[metric_id]["name"] == "ConcurrentExecutions"
        assert inputs[metric_id]["stat"] == "Maximum"
        assert set(inputs[metric_id]["dimensions"]) == {"FunctionName"}
    low, high = UTILIZATION_BAND
    band = {(a["value"], a["fill"]) for a in props["annotations"]["horizontal"]}
    assert band == {(low, "below"), (high, "above")}
    assert (low, high) == (30, 80)
    assert props["yAxis"]["left"] == {"label": "%", "max": 100, "min": 0, "showUnits": False}


def test_utilization_of_profile_consumers_counts_only_the_lanes_their_function_reads(profiles):
    props = widget(profiles.template, "Worker utilization")
    labels = set(expressions(props))
    topology = profiles.topology
    expected = set()
    for consumer in topology.consumers:
        lanes = [
            lane for lane in (consumer.lanes or consumer.priorities) if lane not in PROFILE_CONTAINER_LANES
        ]
        if lanes:
            allowed = sum(q.max_concurrency for q in topology.queues if q.lane in lanes)
            if consumer.reserved_concurrency is not None:
                allowed = min(allowed, consumer.reserved_concurrency)
            expected.add(f"{consumer.name} (of {allowed})")
    assert labels == expected
    assert not any(label.startswith("critical") for label in labels)  # critical runs on Fargate here


def test_a_consumer_without_lanes_has_no_allowed_concurrency():
    consumer = ConsumerSpec(
        name="cpu",
        function_name="f",
        priorities=(Priority.LOW,),
        lanes=("low-cpu",),
        timeout=60,
        memory_mb=128,
        reserved_concurrency=None,
    )
    with pytest.raises(
        ConfigurationError, match=r"consumer cpu reads no lane here .* drop it from `functions`"
    ):
        allowed_concurrency(consumer, [], skip_lanes=("low-cpu",))


def depth_growth_alarms(template: Template) -> list[dict[str, Any]]:
    return [
        a["Properties"]
        for a in template.find_resources("AWS::CloudWatch::Alarm").values()
        if any(m.get("Expression", "").startswith("DIFF(") for m in a["Properties"].get("Metrics", []))
    ]


def test_each_queue_alarms_when_its_depth_grows_minute_after_minute(synth):
    alarms = depth_growth_alarms(synth.template)
    watched = set()
    for props in alarms:
        [expression] = [m for m in props["Metrics"] if "Expression" in m]
        [depth] = [m for m in props["Metrics"] if "MetricStat" in m]
        assert expression["Expression"] == f"DIFF({depth['Id']})"
        assert expression["ReturnData"] is True and depth["ReturnData"] is False
        stat = depth["MetricStat"]
        assert stat["Metric"]["MetricName"] == "ApproximateNumberOfMessagesVisible"
        assert (stat["Period"], stat["Stat"]) == (60, "Maximum")
        assert props["Threshold"] == DEPTH_GROWTH_PER_MINUTE
        assert props["EvaluationPeriods"] == props["DatapointsToAlarm"] == DEPTH_GROWTH_MINUTES
        assert props["ComparisonOperator"] == "GreaterThanThreshold"
        assert props["TreatMissingData"] == "notBreaching"
        [queue_ref] = [d["Value"] for d in stat["Metric"]["Dimensions"] if d["Name"] == "QueueName"]
        watched.add(queue_ref["Fn::GetAtt"][0])
    queues = synth.template.find_resources("AWS::SQS::Queue")
    sources = {lid for lid, q in queues.items() if "RedrivePolicy" in q["Properties"]}
    assert watched == sources  # every source queue, no DLQ (the DLQ has its own depth alarm)
    assert len(alarms) == len(synth.topology.queues)


def test_depth_growth_alarms_page_the_alarm_topic_and_say_what_to_look_at(synth):
    for props in depth_growth_alarms(synth.template):
        assert props["AlarmActions"] == props["OKActions"]
        [action] = props["AlarmActions"]
        assert action["Ref"].startswith("MonitoringAlarmTopic")
        assert "utilization" in props["AlarmDescription"]


def test_the_dashboard_graphs_the_backlog_growth_with_the_alarms_threshold(synth):
    props = widget(synth.template, "Backlog growth")
    assert set(expressions(props)) == {q.name for q in synth.topology.queues}
    assert all(e.startswith("DIFF(depth") for e in expressions(props).values())
    [annotation] = props["annotations"]["horizontal"]
    assert annotation["value"] == DEPTH_GROWTH_PER_MINUTE


@pytest.fixture(scope="module")
def bare() -> tuple[Monitoring, Template]:
    """Monitoring as a team composes it without a topology (the constructor's older call), with a
    tuned growth alarm."""
    stack = Stack(App(), "Bare")
    queue = PriorityQueue(
        stack,
        "OnlyQueue",
        queue_name="q",
        dead_letter_queue_name="q-dlq",
        consumer_timeout=10,
        max_receive_count=5,
    )
    function = lambda_.Function(
        stack,
        "Fn",
        runtime=lambda_.Runtime.PYTHON_3_13,
        handler="index.handler",
        code=lambda_.Code.from_inline("def handler(event, context): pass"),
    )
    monitoring = Monitoring(
        stack,
        "Monitoring",
        dashboard_name="d",
        topic_name="t",
        queues=[queue],
        functions={"shared": function},
        depth_growth_per_minute=500,
        depth_growth_minutes=3,
    )
    return monitoring, Template.from_stack(stack)


def test_without_a_topology_the_dashboard_has_no_job_rows_but_the_queue_alarms_stand(bare):
    monitoring, template = bare
    titles = [w["properties"].get("title", "") for w in widgets(template)]
    assert "Backlog growth (messages a minute)" in titles
    assert not [
        t for t in titles if t.startswith(("Enqueue to completion", "Worker utilization", "Dead-letter"))
    ]
    assert monitoring.allowed_concurrency == {}
    template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {"Threshold": 500, "EvaluationPeriods": 3, "DatapointsToAlarm": 3, "Metrics": Match.any_value()},
    )
    assert list(monitoring.depth_growth_alarms) == ["q"]


def test_functions_that_are_not_consumers_of_the_topology_are_refused_with_the_names():
    stack = Stack(App(), "Mismatch")
    function = lambda_.Function(
        stack,
        "Fn",
        runtime=lambda_.Runtime.PYTHON_3_13,
        handler="index.handler",
        code=lambda_.Code.from_inline("def handler(event, context): pass"),
    )
    with pytest.raises(
        ConfigurationError, match=r"functions worker are not consumers of the topology \(critical"
    ):
        Monitoring(
            stack,
            "Monitoring",
            dashboard_name="d",
            topic_name="t",
            queues=[],
            functions={"worker": function},
            topology=Topology.from_registry(JobRegistry()),
        )


def test_the_docstring_examples_run():
    result = doctest.testmod(job_widgets)
    assert result.attempted > 0
    assert result.failed == 0


def test_the_jobs_by_type_graph_searches_the_per_job_counts_only(synth):
    props = widget(synth.template, "Jobs by type")
    [[search]] = props["metrics"]
    assert search["expression"] == (
        'SEARCH(\'Namespace="JobFramework/jf-dev" JobType (MetricName="Succeeded" OR MetricName="Retried" '
        "OR MetricName=\"DeadLettered\")', 'Sum', 60)"
    )


@pytest.mark.parametrize(("per_minute", "minutes"), [(50, 0), (50, 1441), (-1, 5)])
def test_a_growth_window_cloudwatch_cannot_evaluate_is_refused_at_synth(per_minute, minutes):
    with pytest.raises(ConfigurationError, match="the minutes must be 1 to 1440"):
        Monitoring(
            Stack(App(), "Window"),
            "Monitoring",
            dashboard_name="d",
            topic_name="t",
            queues=[],
            functions={},
            depth_growth_per_minute=per_minute,
            depth_growth_minutes=minutes,
        )
