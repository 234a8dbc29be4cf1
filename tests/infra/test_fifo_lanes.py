"""An ordered job's lane in the stack: FIFO queue and DLQ, an event source of at most 10 records with
no batching window that reports batch item failures, and the synth-time check of those limits."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Stack
from aws_cdk.assertions import Match, Template

from jobframework.cdk import JobFramework
from jobframework.errors import ConfigurationError
from jobframework.jobs import JobRegistry
from jobframework.topology import Topology, TopologySettings

JOBS = """
from pydantic import BaseModel
from jobframework import JobRegistry, job

REGISTRY = JobRegistry()

class Posting(BaseModel):
    account_id: str

@job("ledger.post", ordered_by=lambda p: p.account_id, registry=REGISTRY)
def post(p: Posting) -> None: ...

@job("ledger.report", registry=REGISTRY)
def report(p: Posting) -> None: ...
"""


def _project(root: Path) -> tuple[str, JobRegistry]:
    package = "ledgerfifo"
    (root / package).mkdir(parents=True, exist_ok=True)
    (root / package / "__init__.py").write_text("")
    (root / package / "jobs.py").write_text(JOBS)
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    module = importlib.import_module(f"{package}.jobs")
    registry: JobRegistry = module.REGISTRY
    return package, registry


def _framework(stack: Stack, root: Path, **props: Any) -> JobFramework:
    package, registry = _project(root)
    return JobFramework(
        stack,
        "Jobs",
        job_modules=[f"{package}.jobs"],
        registry=registry,
        code_root=root,
        app_name="ledger",
        api=False,
        requirements=(),
        **props,
    )


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Template:
    root = tmp_path_factory.mktemp("src")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("JF_BUNDLE_CACHE", str(tmp_path_factory.mktemp("bundles")))
        stack = Stack(App(), "LedgerService")
        _framework(stack, root)
        return Template.from_stack(stack)


@pytest.fixture(autouse=True)
def _bundle_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JF_BUNDLE_CACHE", str(tmp_path / "bundles"))


def _queue_id(template: Template, name: str) -> str:
    [queue_id] = [
        k
        for k, q in template.find_resources("AWS::SQS::Queue").items()
        if q["Properties"]["QueueName"] == name
    ]
    return queue_id


def test_an_ordered_lane_has_a_fifo_queue_without_content_based_deduplication(template):
    template.has_resource_properties(
        "AWS::SQS::Queue",
        {"QueueName": "ledger-dev-default.fifo", "FifoQueue": True, "ContentBasedDeduplication": False},
    )


def test_the_fifo_queue_dead_letters_into_a_fifo_dlq(template):
    dlq = _queue_id(template, "ledger-dev-default-dlq.fifo")
    template.has_resource_properties(
        "AWS::SQS::Queue",
        {"QueueName": "ledger-dev-default-dlq.fifo", "FifoQueue": True, "ContentBasedDeduplication": False},
    )
    template.has_resource_properties(
        "AWS::SQS::Queue",
        {
            "QueueName": "ledger-dev-default.fifo",
            "RedrivePolicy": Match.object_like({"deadLetterTargetArn": {"Fn::GetAtt": [dlq, "Arn"]}}),
        },
    )


def test_the_fifo_event_source_takes_ten_records_no_window_and_reports_item_failures(template):
    queue = _queue_id(template, "ledger-dev-default.fifo")
    [mapping] = [
        m["Properties"]
        for m in template.find_resources("AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["EventSourceArn"] == {"Fn::GetAtt": [queue, "Arn"]}
    ]
    assert mapping["BatchSize"] == 10
    assert "MaximumBatchingWindowInSeconds" not in mapping
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]


def test_a_job_that_is_not_ordered_keeps_a_standard_queue(template):
    [standard] = [
        q["Properties"]
        for q in template.find_resources("AWS::SQS::Queue").values()
        if q["Properties"]["QueueName"] == "ledger-dev-default"
    ]
    assert "FifoQueue" not in standard


@pytest.mark.parametrize(("batch_size", "window"), [(20, 1), (10, 2)])
def test_synth_refuses_a_fifo_lane_with_more_than_ten_records_or_a_window(tmp_path, batch_size, window):
    _, registry = _project(tmp_path / "src")
    topology = Topology.from_registry(registry, TopologySettings(app="ledger"))
    queues = tuple(
        q.model_copy(update={"batch_size": batch_size, "batching_window": window}) if q.fifo else q
        for q in topology.queues
    )
    bent = topology.model_copy(update={"queues": queues})
    with pytest.raises(
        ConfigurationError, match=r"FIFO event sources allow batches of 10 and no batching window"
    ):
        _framework(Stack(App(), "LedgerService"), tmp_path / "src", topology=bent)
