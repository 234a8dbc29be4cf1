"""Cold start: import time of the Lambda entry module and its first invocation, against a bare Powertools
batch handler module.

Each sample is a fresh interpreter that imports the module, then handles one SQS event of one record
(a lean no-op job: not idempotent, untracked, so its first event needs no AWS request), timed from
inside (``time.perf_counter`` around both), with the environment the construct gives every consumer
function (queue URLs, state and idempotency tables). The framework's sample also
loads the job modules (``handlers.jobs``, and a no-op job) and the Powertools Logger, as its first
invocation would (the consumer settles batches itself, without Powertools' batch utility); the
bare module defines a pydantic model of the same kind and parses the record with it. Timing the
first invocation too counts what a lazy import only moves out of the import. Samples alternate and
the ratio of the medians is printed. Target: at most 1.2x.

    python bench/cold_start.py [--samples 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

BARE_MODULE = """
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from pydantic import BaseModel


class Payload(BaseModel):
    user_id: str


class Envelope(BaseModel):
    v: int
    id: str
    type: str
    payload: Payload
    payload_version: int
    key: str
    enqueued_at: str


processor = BatchProcessor(event_type=EventType.SQS)


def record_handler(record):
    Envelope.model_validate_json(record.body)


def lambda_handler(event, context):
    return process_partial_response(event, record_handler, processor, context)
"""

COLD_JOBS = """
from pydantic import BaseModel
from jobframework import job

class Ping(BaseModel):
    user_id: str

@job("coldstart.noop", idempotent=False)
def noop(ping: Ping) -> None:
    pass
"""

EVENT = """
import json as _json
body = _json.dumps({"v": 1, "id": "j-1", "type": "coldstart.noop", "payload": {"user_id": "u-1"},
                    "payload_version": 1, "key": "j-1", "enqueued_at": "2026-01-01T00:00:00+00:00"})
event = {"Records": [{"messageId": "m-1", "receiptHandle": "r-1", "body": body, "messageAttributes": {},
                      "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1"},
                      "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:cold-default"}]}

class Context:
    function_name, memory_limit_in_mb, aws_request_id = "cold", 512, "req-1"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:cold"
    def get_remaining_time_in_millis(self):
        return 900_000
"""

TIMER = """
import time, sys
t = time.perf_counter()
{imports}
{event}
response = {handler}(event, Context())
assert not response["batchItemFailures"], response
print(time.perf_counter() - t)
"""


def sample(imports: str, handler: str, extra_path: str) -> float:
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(ROOT), extra_path]),
        PYTHONDONTWRITEBYTECODE="0",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        JF_JOBS="handlers.jobs,cold_jobs",
        JF_QUEUE_URL_DEFAULT="https://sqs.us-east-1.amazonaws.com/123456789012/cold-default",
        JF_DLQ_URL_DEFAULT="https://sqs.us-east-1.amazonaws.com/123456789012/cold-default-dlq",
        JF_STATE_TABLE="cold-state",  # as the construct configures every consumer function
        JF_IDEMPOTENCY_TABLE="cold-idempotency",
    )
    out = subprocess.run(
        [sys.executable, "-c", TIMER.format(imports=imports, event=EVENT, handler=handler)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


def measure(samples: int = 15) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "bare_handler.py").write_text(BARE_MODULE)
        Path(tmp, "cold_jobs.py").write_text(COLD_JOBS)
        # What the first invocation loads too: the job modules and the Powertools Logger (the consumer
        # settles batches itself: it no longer loads the Powertools batch utility).
        framework_imports = (
            "import jobframework.entrypoints.worker as w\nw.lambda_handler._load_modules()\n"
            "from jobframework.telemetry import job_logger\njob_logger()"
        )
        bare_imports = "import bare_handler"
        framework_handler, bare_handler = "w.lambda_handler", "bare_handler.lambda_handler"
        sample(framework_imports, framework_handler, tmp)  # compile bytecode once for both
        sample(bare_imports, bare_handler, tmp)
        bare, framework = [], []
        for _ in range(samples):
            bare.append(sample(bare_imports, bare_handler, tmp))
            framework.append(sample(framework_imports, framework_handler, tmp))
    bare_ms = statistics.median(bare) * 1000
    framework_ms = statistics.median(framework) * 1000
    return {"bare_ms": bare_ms, "framework_ms": framework_ms, "ratio": framework_ms / bare_ms}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=15)
    args = parser.parse_args(argv)
    r = measure(args.samples)
    print(
        f"cold start (import + first event): bare Powertools handler {r['bare_ms']:.0f} ms, "
        f"jobframework.entrypoints.worker + jobs {r['framework_ms']:.0f} ms, "
        f"ratio {r['ratio']:.2f}x (target <= 1.2x)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
