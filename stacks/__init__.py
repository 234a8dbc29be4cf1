"""CDK constructs and stacks: the only place that imports ``aws_cdk``.

Everything is built from :class:`jobframework.topology.Topology`, so nothing about a queue is written
twice. ``app.py`` at the repository root calls :func:`stacks.application.build_app`.
"""

from __future__ import annotations

from jobframework.cdk.api import JobApi
from jobframework.cdk.container_workers import ContainerWorkers
from jobframework.cdk.defaults import StageConfig, secure_queue
from jobframework.cdk.delays import DelayedJobs
from jobframework.cdk.monitoring import Monitoring
from jobframework.cdk.payloads import PayloadBucket
from jobframework.cdk.priority_queue import PriorityQueue
from jobframework.cdk.schedules import Schedules
from jobframework.cdk.signing import SigningKeys
from jobframework.cdk.stack import JobFrameworkStack
from jobframework.cdk.tables import JobTables
from jobframework.cdk.workers import Workers

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
