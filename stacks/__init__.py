"""CDK constructs and stacks: the only place that imports ``aws_cdk``.

Everything is built from :class:`jobframework.topology.Topology`, so nothing about a queue is written
twice. ``app.py`` at the repository root calls :func:`stacks.application.build_app`.
"""

from __future__ import annotations

from stacks.api import JobApi
from stacks.container_workers import ContainerWorkers
from stacks.defaults import StageConfig, secure_queue
from stacks.delays import DelayedJobs
from stacks.job_framework_stack import JobFrameworkStack
from stacks.monitoring import Monitoring
from stacks.payloads import PayloadBucket
from stacks.priority_queue import PriorityQueue
from stacks.schedules import Schedules
from stacks.signing import SigningKeys
from stacks.tables import JobTables
from stacks.workers import Workers

__all__ = [
    "ContainerWorkers",
    "DelayedJobs",
    "JobApi",
    "JobFrameworkStack",
    "JobTables",
    "Monitoring",
    "PayloadBucket",
    "PriorityQueue",
    "Schedules",
    "SigningKeys",
    "StageConfig",
    "Workers",
    "secure_queue",
]
