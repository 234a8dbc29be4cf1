"""The batch's metrics as CloudWatch EMF documents: shaped once by Powertools, then filled in.

A document's metadata (namespace, dimension names, metric names and units) is the same for every
batch of a job type and priority; only the timestamp and the values change. So Powertools'
serializer (which validates names, units and dimensions) makes the metadata once per shape, and each
batch writes its timestamp, dimension values and values into it: the serializer and the
metadata's JSON were most of a batch's metric cost.

Values are written with every value of a metric in one array (Powertools' ``add_metric`` takes one a
call; a batch has many), at most 100 a document (CloudWatch's limit; the rest go into further
documents), milliseconds rounded to the microsecond.
"""

from __future__ import annotations

import json
import time
from typing import Any

COUNT = "Count"
MILLISECONDS = "Milliseconds"
EMF_MAX_VALUES = 100
"""CloudWatch takes at most 100 values of one metric in one EMF document."""

_metadata: dict[tuple[Any, ...], str] = {}
"""The ``CloudWatchMetrics`` JSON of each shape: (namespace, dimensions, (name, unit), ...)."""


def _metadata_of(
    namespace: str, service: str, dimensions: dict[str, str], units: list[tuple[str, str]]
) -> str:
    shape = (namespace, service, tuple(dimensions.items()), tuple(units))
    found = _metadata.get(shape)
    if found is None:
        from aws_lambda_powertools.metrics import EphemeralMetrics

        emf = EphemeralMetrics(namespace=namespace, service=service)
        document = emf.serialize_metric_set(
            metrics={name: {"Unit": unit, "StorageResolution": 60, "Value": [0]} for name, unit in units},
            dimensions={"service": service, **dimensions},
            metadata={},
        )
        found = _metadata[shape] = json.dumps(document["_aws"]["CloudWatchMetrics"], separators=(",", ":"))
    return found


def write_emf(
    namespace: str, service: str, dimensions: dict[str, str], metrics: dict[str, tuple[str, list[float]]]
) -> None:
    """Print the EMF documents of ``metrics`` (name: (unit, values); a metric without values is left
    out) with ``dimensions`` and Powertools' ``service`` dimension."""
    pending = {name: (unit, values) for name, (unit, values) in metrics.items() if values}
    fields = json.dumps({"service": service, **dimensions}, separators=(",", ":"))[1:-1]
    start = 0
    while pending:
        metadata = _metadata_of(namespace, service, dimensions, [(n, u) for n, (u, _) in pending.items()])
        values = ",".join(
            f'"{name}":[{_numbers(unit, v[start : start + EMF_MAX_VALUES])}]'
            for name, (unit, v) in pending.items()
        )
        timestamp = int(time.time() * 1000)
        print(f'{{"_aws":{{"Timestamp":{timestamp},"CloudWatchMetrics":{metadata}}},{fields},{values}}}')
        start += EMF_MAX_VALUES
        pending = {name: (unit, v) for name, (unit, v) in pending.items() if len(v) > start}


def _numbers(unit: str, values: list[float]) -> str:
    """JSON numbers: times to the microsecond (a float's shortest form of a ``perf_counter``
    difference has 17 digits), counts as they are."""
    if unit == MILLISECONDS:
        return ",".join([f"{v:.3f}" for v in values])
    return ",".join([str(v) for v in values])
