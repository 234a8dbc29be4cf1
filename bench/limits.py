"""The cost of flow control per job: extra AWS requests, dollars per million, CPU microseconds.

Runs the consumer's flow gates (:class:`jobframework.flow.gates.FlowGates`, what the consumer calls
for every record before its job) for ``--jobs`` fresh envelopes of four job types on the embedded AWS
(moto in its own process, so that its CPU is not counted here): a plain job (untracked: no gate
writes), a tracked one (``track=True``: the cancel gate's start claim), one with ``concurrency=``, one
with ``rate=``, and one with both; each lease is released as the consumer's listener does.
``rated x10`` is the rate-limited job checked as the consumer checks a batch of ten of it: the batch's
tokens are taken in one update. Requests are counted with a botocore ``before-call`` hook and priced
with ``bench/cost.py``'s table; CPU is this process's ``process_time`` over the loop (the requests'
client-side work: signing, serializing, parsing). The limits are set high enough that no
record is refused, which is the common path; a refused record costs a hand-back (one SendMessage)
and comes back.

    python bench/limits.py [--jobs 300]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "ERROR")

from pydantic import BaseModel

from bench.cost import DYNAMODB_READS, DYNAMODB_WRITES, PRICES_AS_OF, PRICES_USD, Counts
from jobframework import job
from jobframework.envelope import Envelope
from jobframework.flow.outcome import RateInputs
from jobframework.jobs import JobRegistry
from jobframework.local.aws import EmbeddedAWS, use_fake_credentials

registry = JobRegistry()


class Noop(BaseModel):
    n: int = 0


@job("bench.plain", registry=registry)
def plain(p: Noop) -> None: ...


@job("bench.tracked", registry=registry, track=True)
def tracked(p: Noop) -> None: ...


@job("bench.capped", registry=registry, concurrency=10_000 // 10)
def capped(p: Noop) -> None: ...


@job("bench.rated", registry=registry, rate="1000000/second")
def rated(p: Noop) -> None: ...


@job("bench.both", registry=registry, concurrency=1000, rate="1000000/second")
def both(p: Noop) -> None: ...


def measure(gates: Any, job_name: str, jobs: int, demand: int = 1) -> tuple[Counter[str], float]:
    """Requests by operation and CPU microseconds per job of ``jobs`` gate checks of ``job_name``
    (``demand``: the records of the job type in each batch, as the consumer tells the gates)."""
    j = registry.get(job_name)
    track = {"track": True} if j.track else {}
    envs = [Envelope.new(j.name, {"n": n}).model_copy(update=track) for n in range(jobs)]
    payload = Noop()
    counts = Counts()
    gates.state.client.meta.events.register("before-call.*.*", counts.hook)
    started = time.process_time()
    for env in envs:
        verdict = gates.check(env, j, payload, 1, time.time(), rate=RateInputs(demand=demand))
        assert verdict is None, verdict
        if gates.limits is not None:
            gates.limits.release(env.id)
    cpu_us = (time.process_time() - started) * 1e6 / jobs
    gates.state.client.meta.events.unregister("before-call.*.*", counts.hook)
    by_op: Counter[str] = Counter()
    for (_, _, op), n in counts.calls.items():
        by_op[op] += n
    return by_op, cpu_us


def dollars_per_million(by_op: Counter[str], jobs: int) -> float:
    writes = sum(n for op, n in by_op.items() if op in DYNAMODB_WRITES)
    reads = sum(n for op, n in by_op.items() if op in DYNAMODB_READS)
    return (writes * PRICES_USD["dynamodb_wru"] + reads * PRICES_USD["dynamodb_rru"]) / jobs * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=300)
    args = parser.parse_args(argv)
    use_fake_credentials()
    from jobframework.flow.gates import FlowGates
    from jobframework.state import StateStore
    from jobframework.testing import provision_fresh

    with EmbeddedAWS(separate_process=True) as aws:
        _, config = provision_fresh(aws.endpoint_url, registry)
        dynamodb = aws.client("dynamodb")
        gates = FlowGates(StateStore(str(config.state_table), dynamodb))
        measure(gates, "bench.plain", 20)  # warm the client and the connection
        rows = {
            name: measure(gates, name, args.jobs)
            for name in ("bench.plain", "bench.tracked", "bench.capped", "bench.rated", "bench.both")
        }
        rows["bench.rated x10"] = measure(gates, "bench.rated", args.jobs, demand=10)
    base_ops, base_cpu = rows["bench.plain"]
    base_requests = sum(base_ops.values()) / args.jobs
    base_cost = dollars_per_million(base_ops, args.jobs)
    print(f"{args.jobs} gate checks per job type; DynamoDB on-demand prices as of {PRICES_AS_OF}\n")
    print(
        f"{'job':<14}{'requests/job':>14}{'extra':>8}{'$/million':>11}{'extra $':>9}"
        f"{'CPU µs/job':>12}{'extra µs':>10}  requests"
    )
    for name, (ops, cpu) in rows.items():
        requests = sum(ops.values()) / args.jobs
        cost = dollars_per_million(ops, args.jobs)
        detail = ", ".join(f"{op} {n / args.jobs:.2f}" for op, n in sorted(ops.items()))
        print(
            f"{name.removeprefix('bench.'):<14}{requests:>14.2f}{requests - base_requests:>8.2f}{cost:>11.3f}"
            f"{cost - base_cost:>9.3f}{cpu:>12.0f}{cpu - base_cpu:>10.0f}  {detail}"
        )
    print(
        "\nplain = an untracked job: no gate writes at all. tracked = the cancel gate's start claim (one"
        "\nconditional UpdateItem), which every tracked job pays. A limit adds its own writes. Requests per"
        "\njob against the tracked job's one (rated x10: ten records of the job in a batch, whose tokens"
        "\nare taken in one update):"
    )
    one = max(1, sum(rows["bench.tracked"][0].values()))
    for name in ("bench.capped", "bench.rated", "bench.both", "bench.rated x10"):
        print(f"ratio {sum(rows[name][0].values()) / one:.2f}x  {name.removeprefix('bench.')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
