"""The console names a schedule as the deployment does: with the app and stage of the topology
parameter (``jf dev --app payments`` writes ``/payments/dev/topology``), not jf's defaults."""

from __future__ import annotations

from pydantic import BaseModel

from jobframework.jobs import JobRegistry, job
from jobframework.topology import QueueEndpoints, RuntimeConfig
from jobframework.ui.console import Console


class Day(BaseModel):
    day: str = "today"


def _console(parameter: str | None, stage: str = "dev") -> Console:
    registry = JobRegistry()

    @job("payments.reconcile", registry=registry, schedule="cron(0 2 * * ? *)")
    def reconcile(day: Day) -> None:
        """Nightly."""

    url = "http://127.0.0.1:1/123456789012/payments-dev-low"
    queues = {"low": QueueEndpoints(url=url, dlq_url=url + "-dlq")}
    config = RuntimeConfig(queues=queues, topology_parameter=parameter)
    return Console(config=config, sqs=None, registry=registry, stage=stage)


def test_the_schedule_is_named_with_the_app_and_stage_of_the_topology_parameter():
    (spec,) = _console("/payments/dev/topology", stage="prod").schedules()
    assert spec.name == "payments-dev-payments-reconcile"  # as jf dev --app payments and the stack name it


def test_without_a_parameter_of_that_shape_the_stage_option_applies():
    (spec,) = _console(None, stage="prod").schedules()
    assert spec.name == "jf-prod-payments-reconcile"
