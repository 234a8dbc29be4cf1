"""The Lambda entry point of every consumer function: ``jobframework.entrypoints.worker.lambda_handler``.

The job modules to load come from ``JF_JOBS`` (comma-separated; the ``JobFramework`` construct sets
it). Without it the function fails at init with a message that says what to set.
"""

from __future__ import annotations

from jobframework.consumer import consumer
from jobframework.modules import configured_job_modules

lambda_handler = consumer(job_modules=configured_job_modules())
