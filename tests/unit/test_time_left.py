"""``ctx.time_left``: what is left of the job's own ``timeout``, the same under ``run_inline``, the
consumer and any invocation length (a trial read ``ctx.remaining_time`` as 35, 60 and 250 s for one
job of ``timeout=30``, and found no way to stop in time)."""

from __future__ import annotations

import time

from pydantic import BaseModel

from jobframework.context import JobContext
from jobframework.envelope import Envelope
from jobframework.jobs import JobRegistry, job
from jobframework.testing import FakeLambdaContext, in_memory_consumer, run_inline, sqs_event

registry = JobRegistry()
seen: list[tuple[float, float, float]] = []


class Slice(BaseModel):
    n: int


@job("t.sliced", registry=registry, timeout=30, idempotent=False)
def sliced(payload: Slice, ctx: JobContext) -> None:
    seen.append((ctx.timeout, ctx.time_left, ctx.remaining_time))


def test_time_left_is_the_jobs_timeout_wherever_it_runs_and_never_more_than_the_invocation() -> None:
    seen.clear()
    run_inline(sliced, Slice(n=1))
    handler, _ = in_memory_consumer(registry)
    for invocation in (60, 900):
        assert handler(sqs_event(Envelope.new("t.sliced", {"n": 2})), FakeLambdaContext(invocation)) == {
            "batchItemFailures": []
        }
    assert [round(timeout) for timeout, _, _ in seen] == [30, 30, 30]
    assert all(29 < left <= 30 for _, left, _ in seen), seen
    assert [round(remaining) for _, _, remaining in seen] == [35, 60, 900]  # the invocation's


def test_time_left_is_never_more_than_the_invocation_and_zero_once_the_timeout_passed() -> None:
    from datetime import UTC, datetime

    from jobframework.core import Priority

    def ctx(**fields: object) -> JobContext:
        return JobContext("j-1", "t.sliced", "j-1", 1, 3, Priority.DEFAULT, datetime.now(UTC), **fields)  # type: ignore[arg-type]

    assert 9 < ctx(timeout=30, _remaining=lambda: 10.0).time_left <= 10  # the invocation ends first
    assert ctx(timeout=30, _started=time.monotonic() - 31).time_left == 0  # overran its timeout
    assert ctx().time_left == float("inf")  # no timeout, no invocation: nothing bounds it
