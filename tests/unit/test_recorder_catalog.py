"""A service's by-name enqueues of another service's job, checked in its tests against that service's
catalog (``jf catalog -o``, ``EnqueueRecorder(catalog=...)``), without importing its code."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel

from jobframework import job
from jobframework.catalog_file import catalog_json, load_catalog
from jobframework.errors import ConfigurationError, PayloadValidationError, UnknownJobError
from jobframework.jobs import JobRegistry
from jobframework.testing import EnqueueRecorder, run_inline
from jobframework.topology import Topology

BILLING = """
from pydantic import BaseModel

from jobframework import job


class Charge(BaseModel):
    order_id: str
    amount_cents: int


def v1_to_v2(p: dict) -> dict:
    return {"order_id": p["order_id"], "amount_cents": round(p["amount"] * 100)}


@job("billing.charge", version=2, upgrade={1: v1_to_v2}, priority="high")
def charge(c: Charge) -> None: ...
"""

orders = JobRegistry()


class Order(BaseModel):
    order_id: str
    total: float
    billing_job: str = "billing.charge"


@job("orders.fulfil", registry=orders)
def fulfil(order: Order) -> None:
    """Enqueues billing's job by name: the orders service does not import billing's code."""
    from jobframework.default_client import default_client

    default_client().enqueue(
        order.billing_job, {"order_id": order.order_id, "amount_cents": int(order.total * 100)}
    )


@pytest.fixture
def billing_catalog(tmp_path: Path) -> Path:
    """billing's catalog as `jf catalog --jobs billing_jobs -o FILE` writes it, in billing's project
    (another process: this one's registry never holds billing's job)."""
    (tmp_path / "billing_jobs.py").write_text(BILLING)
    out = tmp_path / "billing-catalog.json"
    done = subprocess.run(
        [sys.executable, "-m", "jobframework.cli", "catalog", "--jobs", "billing_jobs", "-o", str(out)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "wrote the catalog of 1 job type to" in done.stderr
    return out


def test_a_by_name_enqueue_is_checked_against_the_other_services_catalog(billing_catalog):
    sent = EnqueueRecorder(catalog=billing_catalog)
    run_inline(fulfil, {"order_id": "o-1", "total": 12.5}, client=sent)
    [request] = sent.requests
    assert (request.job, request.payload) == ("billing.charge", {"order_id": "o-1", "amount_cents": 1250})
    assert sent.payloads("billing.charge") == [{"order_id": "o-1", "amount_cents": 1250}]


def test_a_payload_the_catalog_refuses_fails_the_test_as_the_client_would_fail_the_job(billing_catalog):
    sent = EnqueueRecorder(catalog=billing_catalog)
    with pytest.raises(PayloadValidationError, match=r"amount_cents"):
        sent.enqueue("billing.charge", {"order_id": "o-1", "amount": 12.5})
    assert sent.requests == []
    sent.enqueue("billing.charge", {"order_id": "o-1", "amount": 12.5}, payload_version=1)  # pinned v1
    assert sent.requests[0].payload_version == 1


def test_a_name_the_catalog_lacks_is_an_unknown_job_with_the_closest_name(billing_catalog):
    sent = EnqueueRecorder(catalog=billing_catalog)
    with pytest.raises(UnknownJobError, match=r"'billing.chrage' \(did you mean 'billing.charge'\?\)"):
        run_inline(fulfil, {"order_id": "o-1", "total": 1, "billing_job": "billing.chrage"}, client=sent)


def test_without_a_catalog_a_by_name_enqueue_is_recorded_unchecked():
    sent = EnqueueRecorder()
    sent.enqueue("billing.chrage", {"anything": True})
    assert sent.payloads("billing.chrage") == [{"anything": True}]


def test_the_catalog_file_holds_what_the_topology_parameter_holds(tmp_path):
    reg = JobRegistry()

    @job("t.one", registry=reg, track=True)
    def one(order: Order) -> None: ...

    routes = Topology.from_registry(reg).catalog
    path = tmp_path / "c.json"
    path.write_text(catalog_json(routes))
    assert load_catalog(path) == routes
    path.write_text(json.dumps({"t.one": {"lane": "default"}}))
    with pytest.raises(ConfigurationError, match=r"job 't.one' is not a catalog entry"):
        load_catalog(path)
