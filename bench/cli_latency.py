"""Latency of one ``jf enqueue`` against a minimal boto3 script that sends the same message.

Each sample is a fresh interpreter, as a shell runs a command: ``jf enqueue bench.cli '{...}'`` (with
``JF_JOBS`` naming the job's module, the topology's ``JF_*`` variables exported as ``jf dev`` prints
them), against ``python -c`` importing boto3, making an SQS client and sending one envelope to the
same queue. Both talk to one embedded AWS. The job is lean (untracked, not idempotent, no key), so
both make one ``SendMessage``; what the ratio shows is what the CLI costs around it: its imports,
its configuration and its clients. Samples alternate; the ratio of the medians is printed.

    python bench/cli_latency.py [--samples 9]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

JOB_MODULE = """
from pydantic import BaseModel
from jobframework import job


class Ping(BaseModel):
    user_id: str


@job("bench.cli", idempotent=False, track=False)
def ping(p: Ping) -> None:
    pass
"""

BOTO3_SCRIPT = """
import json, os, uuid, datetime, boto3
sqs = boto3.client("sqs", endpoint_url=os.environ["JF_ENDPOINT_URL"])
now = datetime.datetime.now(datetime.UTC).isoformat()
body = json.dumps({"v": 1, "id": str(uuid.uuid4()), "type": "bench.cli", "payload": {"user_id": "u-1"},
                   "payload_version": 1, "key": "k", "enqueued_at": now})
print(sqs.send_message(QueueUrl=os.environ["JF_QUEUE_URL_DEFAULT"], MessageBody=body)["MessageId"])
"""


def _timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, check=True, capture_output=True, text=True)
    return time.perf_counter() - started


def measure(samples: int = 9) -> dict[str, float]:
    from jobframework.jobs import JobRegistry
    from jobframework.local.aws import EmbeddedAWS, use_fake_credentials

    use_fake_credentials()
    with tempfile.TemporaryDirectory() as tmp, EmbeddedAWS() as aws:
        Path(tmp, "cli_jobs.py").write_text(JOB_MODULE)
        registry = JobRegistry()  # the same job as the module's, for the topology
        exec(JOB_MODULE.replace("track=False)", "track=False, registry=registry)"), {"registry": registry})
        from jobframework.testing import provision_fresh

        _, config = provision_fresh(aws.endpoint_url, registry)
        env = {
            **os.environ,
            **config.to_env(),
            "JF_ENDPOINT_URL": aws.endpoint_url,
            "JF_JOBS": "cli_jobs",
            "PYTHONPATH": os.pathsep.join([str(ROOT), tmp]),
            "PYTHONDONTWRITEBYTECODE": "0",  # as on a machine that keeps byte code
        }
        jf = [sys.executable, "-m", "jobframework.cli", "enqueue", "bench.cli", '{"user_id": "u-1"}']
        plain = [sys.executable, "-c", BOTO3_SCRIPT]
        _timed(jf, env)  # compile bytecode once for both
        _timed(plain, env)
        cli, boto = [], []
        for _ in range(samples):
            cli.append(_timed(jf, env))
            boto.append(_timed(plain, env))
    cli_ms, boto_ms = statistics.median(cli) * 1000, statistics.median(boto) * 1000
    return {"cli_ms": cli_ms, "boto3_ms": boto_ms, "ratio": cli_ms / boto_ms}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=9)
    args = parser.parse_args(argv)
    r = measure(args.samples)
    print(f"jf enqueue        {r['cli_ms']:.0f} ms")
    print(f"boto3 script      {r['boto3_ms']:.0f} ms")
    print(f"ratio {r['ratio']:.2f}x  jf enqueue vs a minimal boto3 script sending the same message")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
