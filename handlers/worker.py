"""The Lambda entry point of every consumer function: ``handlers.worker.lambda_handler``.

The job modules to load come from ``JF_JOBS`` (comma-separated; the stack sets it),
by default the example jobs in :mod:`handlers.jobs`.
"""

from __future__ import annotations

import os

from jobframework.consumer import consumer

lambda_handler = consumer(job_modules=os.environ.get("JF_JOBS", "handlers.jobs").split(","))
