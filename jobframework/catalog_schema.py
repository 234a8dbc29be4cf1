"""A registered job's entry in the topology's job catalog: its route and its payload's JSON Schema.

The stack and ``jf dev`` make one :class:`~jobframework.config.JobRoute` per job with
:func:`route_of`; a producer that does not import the job reads it back and validates payloads
against the schema (:mod:`jobframework.catalog`). The schema is pydantic's, made small (no titles,
descriptions or examples) and, for URL types, with the schemes the type takes as a pattern.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from jobframework.config import JobRoute
from jobframework.payloads import retry_horizon

if TYPE_CHECKING:
    from jobframework.jobs import Job

_DROPPED = ("title", "description", "examples")
"""Annotations that do not change what validates: left out to keep the parameter small."""
_MAPS = ("properties", "$defs", "definitions", "patternProperties", "dependentSchemas")


def compact_schema(schema: Any) -> Any:
    """A JSON Schema without titles, descriptions and examples (properties named so are kept).

    Example:
        >>> compact_schema({"title": "M", "properties": {"title": {"title": "Title", "type": "string"}}})
        {'properties': {'title': {'type': 'string'}}}
    """
    if isinstance(schema, list):
        return [compact_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _DROPPED:
            continue
        if key in _MAPS and isinstance(value, dict):
            out[key] = {name: compact_schema(sub) for name, sub in value.items()}
        else:
            out[key] = compact_schema(value)
    return out


def route_of(job: Job[Any], *, fifo: bool = False) -> JobRoute:
    """The catalog entry of a registered job (``fifo``: its lane's queue is a FIFO queue)."""
    return JobRoute(
        priority=job.priority,
        lane=job.lane,
        fifo=fifo,
        version=job.version,
        dedup_window=job.dedup_window,
        track=job.track,
        retry_horizon=retry_horizon(job.retry),
        payload_schema=compact_schema(
            job.payload_model.model_json_schema(mode="validation", schema_generator=_CatalogSchema)
        ),
    )


URL_SCHEMES = "x-url-schemes"
"""The schemes a URL field takes, beside the pattern that checks them (named in the refusal)."""


def _scheme_pattern(schemes: list[str]) -> str:
    """A portable (ECMA-262 and Python) pattern for a URL in one of ``schemes``, any case.

    Example:
        >>> _scheme_pattern(["http", "https"])
        '^(?:[Hh][Tt][Tt][Pp]|[Hh][Tt][Tt][Pp][Ss]):'
    """
    cased = (
        "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else re.escape(c) for c in s) for s in schemes
    )
    return f"^(?:{'|'.join(cased)}):"


class _CatalogSchema(GenerateJsonSchema):
    """Pydantic's JSON Schema, with a URL type's allowed schemes as a pattern: ``format: uri`` alone
    passed an ``ftp://`` value for an ``HttpUrl`` field, which the consumer's model then refused
    (dead-lettered ``invalid-payload``); the producer now refuses it before sending."""

    def url_schema(self, schema: core_schema.UrlSchema) -> JsonSchemaValue:
        return self._schemes(super().url_schema(schema), schema.get("allowed_schemes"))

    def multi_host_url_schema(self, schema: core_schema.MultiHostUrlSchema) -> JsonSchemaValue:
        return self._schemes(super().multi_host_url_schema(schema), schema.get("allowed_schemes"))

    @staticmethod
    def _schemes(json_schema: JsonSchemaValue, schemes: list[str] | None) -> JsonSchemaValue:
        if schemes and "pattern" not in json_schema:
            json_schema["pattern"] = _scheme_pattern(schemes)
            json_schema[URL_SCHEMES] = list(schemes)  # (for the error: a JSON Schema validator ignores it)
        return json_schema
