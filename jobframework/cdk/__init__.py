"""CDK constructs that provision jobframework: the only modules of the package that import ``aws_cdk``
(install them with ``pip install "jobframework[cdk]"``).

Most apps need one of::

    from jobframework.cdk import JobFramework, JobFrameworkStack

``JobFramework`` goes into any stack; ``JobFrameworkStack`` is a stack holding one. The pieces they
are made of (queues, workers, tables, schedules, API, monitoring) are exported for custom layouts.
"""

from __future__ import annotations

from jobframework.cdk.api import JobApi
from jobframework.cdk.bundling import BundleSpec, python_code
from jobframework.cdk.construct import JobFramework, JobFrameworkStack
from jobframework.cdk.container_workers import ContainerWorkers, worker_image
from jobframework.cdk.defaults import StageConfig, secure_queue
from jobframework.cdk.delays import DelayedJobs
from jobframework.cdk.monitoring import Monitoring
from jobframework.cdk.payloads import PayloadBucket
from jobframework.cdk.priority_queue import PriorityQueue
from jobframework.cdk.resources import JobResources
from jobframework.cdk.schedules import Schedules
from jobframework.cdk.signing import SigningKeys
from jobframework.cdk.synth_errors import install as _install_synth_errors
from jobframework.cdk.tables import JobTables
from jobframework.cdk.workers import Workers
from jobframework.topology_settings import TopologySettings

_install_synth_errors()

__all__ = [
    "BundleSpec",
    "ContainerWorkers",
    "DelayedJobs",
    "JobApi",
    "JobFramework",
    "JobFrameworkStack",
    "JobResources",
    "JobTables",
    "Monitoring",
    "PayloadBucket",
    "PriorityQueue",
    "Schedules",
    "SigningKeys",
    "StageConfig",
    "TopologySettings",
    "Workers",
    "python_code",
    "secure_queue",
    "worker_image",
]
