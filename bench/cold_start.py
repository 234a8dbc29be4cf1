"""Cold start: import time of the Lambda entry module against a bare Powertools batch handler module.

Each sample is a fresh interpreter that imports the module and is timed from
inside (``time.perf_counter`` around the import). The framework's sample also
loads the job modules (``handlers.jobs``) and the Powertools Logger, as its first
invocation would (the consumer settles batches itself, without Powertools' batch utility); the
bare module defines a pydantic model of the same kind. Samples alternate and the
ratio of the medians is printed. Target: at most 1.2x.

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


processor = BatchProcessor(event_type=EventType.SQS)


def record_handler(record):
    Payload.model_validate_json(record.body)


def lambda_handler(event, context):
    return process_partial_response(event, record_handler, processor, context)
"""

TIMER = """
import time, sys
t = time.perf_counter()
{imports}
print(time.perf_counter() - t)
"""


def sample(imports: str, extra_path: str) -> float:
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(ROOT), extra_path]),
        PYTHONDONTWRITEBYTECODE="0",
        AWS_DEFAULT_REGION="us-east-1",
        JF_JOBS="handlers.jobs",
    )
    out = subprocess.run(
        [sys.executable, "-c", TIMER.format(imports=imports)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


def measure(samples: int = 15) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "bare_handler.py").write_text(BARE_MODULE)
        # What the first invocation loads too: the job modules and the Powertools Logger (the consumer
        # settles batches itself: it no longer loads the Powertools batch utility).
        framework_imports = (
            "import jobframework.entrypoints.worker as w\nw.lambda_handler._load_modules()\n"
            "from jobframework.telemetry import job_logger\njob_logger()"
        )
        bare_imports = "import bare_handler"
        sample(framework_imports, tmp)  # compile bytecode once for both
        sample(bare_imports, tmp)
        bare, framework = [], []
        for _ in range(samples):
            bare.append(sample(bare_imports, tmp))
            framework.append(sample(framework_imports, tmp))
    bare_ms = statistics.median(bare) * 1000
    framework_ms = statistics.median(framework) * 1000
    return {"bare_ms": bare_ms, "framework_ms": framework_ms, "ratio": framework_ms / bare_ms}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=15)
    args = parser.parse_args(argv)
    r = measure(args.samples)
    print(
        f"cold start: bare Powertools handler {r['bare_ms']:.0f} ms, jobframework.entrypoints.worker + jobs "
        f"{r['framework_ms']:.0f} ms, ratio {r['ratio']:.2f}x (target <= 1.2x)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
