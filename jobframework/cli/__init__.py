"""The ``jf`` command: the local runtime, enqueueing, DLQ tooling and retry plans.

Exit codes (scripts can rely on them):

- 0: done;
- 1: the operation failed (AWS refused it, a job or payload is wrong, the demo did not settle);
- 2: bad arguments (usage);
- 3: the endpoint cannot be reached;
- 4: the endpoint does not implement the operation (e.g. ``--native`` on the embedded AWS);
- 130: interrupted.

Errors are one line on stderr (``jf: error: ...``), never a traceback. AWS is reached through
the normal boto3 chain (profile, region) or ``JF_ENDPOINT_URL``; the queues come from
``JF_QUEUE_URL_<PRIORITY>``/``JF_DLQ_URL_<PRIORITY>`` or the SSM parameter the stack writes
(``JF_TOPOLOGY_PARAMETER``, default ``/jf/dev/topology``). The Lambda path never imports this
module; heavy modules are imported inside the commands.
"""

from __future__ import annotations

# Importing the command modules registers their commands on `app`, in the order `jf --help` lists them.
from jobframework.cli import demo, local, worker, jobs, enqueue_many, status, retry_plan  # isort: skip  # noqa: F401
from jobframework.cli import dlq, queue, queue_purge, cancel, saga, schedules  # isort: skip  # noqa: F401
from jobframework.cli import config, catalog, ui, new  # isort: skip  # noqa: F401
from jobframework.cli.base import app, main, parse_duration
from jobframework.cli.errors import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_NOT_SUPPORTED,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    CliError,
)

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_NOT_SUPPORTED",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "CliError",
    "app",
    "main",
    "parse_duration",
]
