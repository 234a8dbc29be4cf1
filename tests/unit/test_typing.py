"""A team's type checker knows each job's payload model and result: ``@job`` on
``def f(order: Order) -> Receipt`` is a ``Job[Order, Receipt]``, so mypy flags an enqueue of another
model, and knows what ``run_inline`` gives. (That the package ships ``py.typed``, which
makes a type checker read it at all once installed, is checked on the wheel by the adoption test.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

TEAM_CODE = """
from typing import Any
from pydantic import BaseModel
from jobframework import BatchOptions, JobContext, job
from jobframework.testing import EnqueueRecorder, run_inline

class Order(BaseModel):
    order_id: str

class Refund(BaseModel):
    refund_id: str

@job("orders.fulfil")
def fulfil(order: Order) -> None: ...

@job("orders.confirm")
async def confirm(order: Order, ctx: JobContext) -> str:
    return order.order_id

@job("orders.export", batch=BatchOptions(max_size=10))
def export(orders: list[Order]) -> None: ...

@job("orders.charge")  # (a saga step's dict merges into its data: it was a Job[Any], unchecked)
def charge(order: Order, ctx: JobContext) -> dict[str, Any]:
    return {}

reveal_type(fulfil)
reveal_type(confirm)
reveal_type(export)
reveal_type(charge)
charge.enqueue(Refund(refund_id="r-0"))
fulfil.enqueue(Order(order_id="o-1"))
fulfil.enqueue({"order_id": "o-1"})
export.request(Order(order_id="o-1"))
fulfil.enqueue_many([Order(order_id="o-2"), {"order_id": "o-3"}])
fulfil.enqueue_many(Order(order_id=n) for n in ("o-4", "o-5"))
fulfil.enqueue(Refund(refund_id="r-1"))
run_inline(fulfil, Order(order_id="o-6"))
run_inline(export, [Order(order_id="o-7"), {"order_id": "o-8"}])
run_inline(fulfil, Refund(refund_id="r-2"))
fulfil.enqueue(Order(order_id="o-9"), delay=60, key="k-9", track=True)
fulfil.enqueue(Order(order_id="o-9"), countdown=30)
fulfil.enqueue_many([Order(order_id="o-9")], delay="10")
reveal_type(run_inline(confirm, Order(order_id="o-10")))
reveal_type(run_inline(export, [Order(order_id="o-11")]))
reveal_type(EnqueueRecorder().payloads(fulfil))
reveal_type(EnqueueRecorder().payloads("orders.fulfil"))
count: int = run_inline(charge, {"order_id": "o-12"})

from jobframework import RecordOutcome, on_outcome

@on_outcome
def notify(heard: RecordOutcome) -> None:
    if heard.outcome == "dead-lettered":  # (jf dev's word; the outcome's is dead_lettered)
        ...
"""


def test_a_jobs_payload_model_reaches_the_type_checker(tmp_path):
    (tmp_path / "shop.py").write_text(TEAM_CODE)
    env = {**os.environ, "MYPYPATH": str(ROOT)}  # (the source itself: an editable install hides it)
    mypy = [sys.executable, "-m", "mypy", "--no-incremental", "--follow-imports=silent", "--strict-equality"]
    mypy.append("shop.py")
    ran = subprocess.run(
        mypy, check=False, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    out = ran.stdout  # (exit 1: the one error the test expects)
    revealed = [
        line.split("Revealed type is ")[1].replace("builtins.", "")  # (older mypy names builtins so)
        for line in out.splitlines()
        if "Revealed type" in line
    ]
    assert revealed == [
        '"jobframework.jobs.Job[shop.Order, None]"',
        '"jobframework.jobs.Job[shop.Order, str]"',  # (an async def job's: what it awaits to)
        '"jobframework.jobs.Job[shop.Order, Any]"',  # (a batched job's outcomes are per item)
        '"jobframework.jobs.Job[shop.Order, dict[str, Any]]"',
        '"str"',
        '"list[Any]"',
        '"list[shop.Order]"',
        '"list[Any]"',
    ], out
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert len(errors) == 7, out  # the three Refunds, countdown=, a str delay, an int result, dead-lettered
    assert 'error: Argument 1 to "enqueue" of "Job" has incompatible type "Refund"' in errors[0]
    assert 'error: Argument 1 to "enqueue" of "Job" has incompatible type "Refund"' in errors[1]
    assert '"run_inline"' in errors[2]  # (mypy: no model is both the job's Order and a Refund)
    assert 'Unexpected keyword argument "countdown" for "enqueue" of "Job"' in errors[3]  # (Celery's)
    assert 'Argument "delay" to "enqueue_many" of "Job" has incompatible type "str"' in errors[4]
    assert 'Incompatible types in assignment (expression has type "dict[str, Any]"' in errors[5]
    assert "Non-overlapping equality check" in errors[6] and "dead-lettered" in errors[6]  # (a trial's)
