"""A job as a producer without its module sees it (its catalog route read back from the parameter's
JSON): what the catalog tests validate payloads against."""

from __future__ import annotations

from typing import Any

from jobframework.catalog import RoutedJob
from jobframework.catalog_schema import route_of
from jobframework.config import JobRoute
from jobframework.jobs import Job


def as_routed(job: Job[Any]) -> RoutedJob:
    route = JobRoute.model_validate_json(route_of(job).model_dump_json())
    return RoutedJob(job.name, route, "SSM parameter /jf/test/topology")
