"""A registered job's entry in the topology's job catalog: its route and its payload's JSON Schema.

The stack and ``jf dev`` make one :class:`~jobframework.config.JobRoute` per job with
:func:`route_of`; a producer that does not import the job reads it back and validates payloads
against the schema (:mod:`jobframework.catalog`). The schema is pydantic's, made small (no titles,
descriptions or examples) and, for URL types, with the schemes the type takes as a pattern.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode, JsonSchemaValue
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
        retry_budget=job.retry_budget if isinstance(job.retry_budget, str) else None,
        retry_horizon=retry_horizon(job.retry),
        payload_schema=compact_schema(_payload_schema(job)),
    )


def _payload_schema(job: Job[Any]) -> dict[str, Any]:
    """The JSON Schema of the job's payload model; a model with a field that cannot travel as JSON
    (an arbitrary type, such as ``asyncio.Event``) is refused, naming the job and the field."""
    from pydantic import PydanticInvalidForJsonSchema, TypeAdapter

    model = job.payload_model
    try:
        return dict(model.model_json_schema(mode="validation", schema_generator=_CatalogSchema))
    except PydanticInvalidForJsonSchema as exc:
        fields = []
        for name, field in model.model_fields.items():  # (which of them: the refusal names it)
            try:
                TypeAdapter(field.annotation).json_schema(mode="validation")
            except Exception:
                fields.append(f"{name}: {field.annotation!r}")
        from jobframework.errors import ConfigurationError

        raise ConfigurationError(
            f"job {job.name}: its payload model {model.__name__} has a field that cannot travel as JSON "
            f"({'; '.join(fields) or exc.message.splitlines()[0]}): a payload is sent as JSON, so each "
            "field needs a JSON type (str, int, float, bool, a list, a dict, a pydantic model, datetime, "
            "UUID, Decimal, ...); keep other objects out of the payload and make them in the job"
        ) from None


URL_SCHEMES = "x-url-schemes"
"""The schemes a URL field takes, beside the pattern that checks them (named in the refusal)."""


DECIMAL = "x-decimal"
"""Marks a ``Decimal`` field's string branch (the refusal then says a decimal number is wanted): its
``decimal_places``, else ``true``."""


NUMBER_MEANS = "x-number-means"
"""What a number stands for where text is the usual form (a datetime's Unix time), for the refusal."""
STRICT_FORMAT = ":strict"
"""Ends the format of a strict field (``date-time:strict``)."""
DECIMAL_BOUNDS = ("gt", "ge", "lt", "le", "multiple_of")
DECIMAL_FORMAT = "x-decimal"
"""A decimal string's bounds as a format, ``x-decimal(gt=0,le=100)``: JSON Schema bounds hold for
numbers only, and a pattern can hold only a sign."""


def decimal_format(bounds: dict[str, Any]) -> str:
    """The format that names a decimal string's bounds (:data:`DECIMAL_FORMAT`).

    Example:
        >>> decimal_format({"gt": 0, "le": 99.5})
        'x-decimal(gt=0,le=99.5)'
    """
    return f"{DECIMAL_FORMAT}({','.join(f'{name}={value}' for name, value in bounds.items())})"


def decimal_bounds(name: str) -> dict[str, str] | None:
    """The bounds a :func:`decimal_format` names, or ``None`` when ``name`` is another format.

    Example:
        >>> decimal_bounds("x-decimal(gt=0,le=99.5)")
        {'gt': '0', 'le': '99.5'}
    """
    if not (name.startswith(DECIMAL_FORMAT + "(") and name.endswith(")")):
        return None
    pairs = (item.partition("=") for item in name[len(DECIMAL_FORMAT) + 1 : -1].split(","))
    bounds = {key: value for key, _, value in pairs}
    return bounds if bounds and set(bounds) <= set(DECIMAL_BOUNDS) else None


def decimal_refusal(definition: Any) -> str | None:
    """What to say of a value a ``Decimal`` field's schema (``definition``: its ``anyOf``) refused, or
    ``None`` when it is not one.

    Example:
        >>> decimal_refusal({"anyOf": [{"type": "number"}, {"type": "string", DECIMAL: True}], "minimum": 0})
        'must be a decimal number (a JSON number, or one as a string) at least 0'
    """
    branches = _branches(definition)
    if not any(b.get(DECIMAL) for b in branches):
        return None
    bounds = {**definition, **next((b for b in definition.get("anyOf", []) if "anyOf" in b), {})}
    for branch in branches:
        if branch.get("type") == "number":
            bounds.update(branch)
    words = {
        "exclusiveMinimum": "above",
        "minimum": "at least",
        "maximum": "at most",
        "exclusiveMaximum": "below",
        "multipleOf": "a multiple of",
    }
    said = [f"{word} {_number(bounds[key])}" for key, word in words.items() if _is_number(bounds.get(key))]
    places = next((b[DECIMAL] for b in branches if DECIMAL in b), True)
    if places is not True:
        said.append(f"with at most {places} decimal places")
    wanted = " ".join(["a decimal number (a JSON number, or one as a string)", " and ".join(said)]).strip()
    return f"must be {wanted}{', or null' if any(b.get('type') == 'null' for b in branches) else ''}"


def _branches(definition: Any) -> list[dict[str, Any]]:
    """The alternatives of an ``anyOf``, those of an ``anyOf`` in it too (``Decimal | float | None``)."""
    found: list[dict[str, Any]] = []
    for branch in definition.get("anyOf", []) if isinstance(definition, dict) else []:
        if isinstance(branch, dict):
            found += _branches(branch) if "anyOf" in branch else [branch]
    return found


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _number(value: float) -> str:
    """A bound as written: ``100`` (not ``100.0``), ``99999.99`` (not ``100000``)."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


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


_NOT_NEGATIVE = "(?!-[0-9.]*[1-9])"
"""Refuses a decimal string below zero (``-0`` and ``-0e5`` are zero, so they pass)."""
_BOUNDS = {"gt": "exclusiveMinimum", "ge": "minimum", "lt": "exclusiveMaximum", "le": "maximum"}
"""Pydantic's names of a union's bounds (``Decimal | float = Field(gt=0)``), which a JSON Schema
validator ignores, and JSON Schema's (they apply to the union's number branch, as they should)."""


_DECIMAL_START = "^\\s*"
"""How a decimal string's pattern begins: the spaces pydantic strips (then :data:`_NOT_NEGATIVE`, or not)."""


def _decimal_pattern(inner: str, lower: float | None) -> str:
    """A decimal string's pattern: ``inner`` (pydantic's, unanchored) with the spaces around it that
    pydantic strips, and no minus sign when the lower bound is zero or more."""
    pattern = f"{_DECIMAL_START}(?:{inner})\\s*$"
    return _unsigned(pattern) if lower is not None and lower >= 0 else pattern


def _unsigned(pattern: str) -> str:
    """A decimal string's pattern (:func:`_decimal_pattern`) refusing a minus sign."""
    return _DECIMAL_START + _NOT_NEGATIVE + pattern.removeprefix(_DECIMAL_START)


def _union_bounds(node: Any) -> Any:
    """``node`` with a union's pydantic bounds as JSON Schema's, and a decimal string branch under a
    lower bound of zero or more refusing a minus sign."""
    if isinstance(node, list):
        return [_union_bounds(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {
        key: {name: _union_bounds(sub) for name, sub in value.items()}
        if key in _MAPS and isinstance(value, dict)
        else _union_bounds(value)
        for key, value in node.items()
    }
    if "anyOf" not in out or not any(k in out for k in _BOUNDS):
        return out
    for name, standard in _BOUNDS.items():
        if isinstance(out.get(name), int | float):
            out[standard] = out.pop(name)
    lower = out.get("minimum", out.get("exclusiveMinimum"))
    if isinstance(lower, int | float) and lower >= 0:
        for branch in out["anyOf"]:
            pattern = branch.get("pattern", "") if isinstance(branch, dict) else ""
            if branch.get("type") == "string" and pattern.startswith(_DECIMAL_START + "(?:"):
                branch["pattern"] = _unsigned(pattern)
    return out


def _repeats_allowed(json_schema: JsonSchemaValue) -> JsonSchemaValue:
    """A set's items may repeat in JSON: pydantic keeps one of each (``uniqueItems`` refused them)."""
    json_schema.pop("uniqueItems", None)
    return json_schema


class _CatalogSchema(GenerateJsonSchema):
    """Pydantic's JSON Schema, with what it leaves unchecked checked where a pattern or a bound can:

    - a URL type's allowed schemes as a pattern: ``format: uri`` alone passed an ``ftp://`` value for
      an ``HttpUrl`` field, which the consumer's model then refused (dead-lettered ``invalid-payload``);
    - a ``Decimal`` sent as a string matched any string (``"abc"``), and its lower bound did not hold for
      strings (``"-3"`` under ``gt=0``): it gets pydantic's decimal pattern and, under a lower bound of
      zero or more, no minus sign; its own bounds as a format checked as pydantic reads the string
      (:func:`decimal_format`; a union's bounds hold for a string only as far as its sign);
    - a union's bounds (``Decimal | float = Field(gt=0)``), which pydantic writes under its own names
      that a validator ignores, become JSON Schema's;
    - a tuple's positions in draft 7's form, which the validator reads; a set's repeats allowed; a
      datetime or a duration taken as a number too, unless strict (formats are checked as pydantic
      reads them: :mod:`jobframework.catalog`).
    """

    def generate(
        self, schema: core_schema.CoreSchema, mode: JsonSchemaMode = "validation"
    ) -> JsonSchemaValue:
        generated: JsonSchemaValue = _union_bounds(super().generate(schema, mode))
        return generated

    def decimal_schema(self, schema: core_schema.DecimalSchema) -> JsonSchemaValue:
        json_schema = super().decimal_schema(schema)
        bounds = {name: schema[name] for name in DECIMAL_BOUNDS if schema.get(name) is not None}  # type: ignore[literal-required]
        for branch in json_schema.get("anyOf", [json_schema]):
            if branch.get("type") == "string":
                places = schema.get("decimal_places")
                branch[DECIMAL] = places if places is not None else True
                if bounds:  # (checked as pydantic reads the string: jobframework.catalog)
                    branch["format"] = decimal_format(bounds)
        return json_schema

    def get_decimal_pattern(self, schema: core_schema.DecimalSchema) -> str | None:
        lower = schema.get("ge", schema.get("gt"))
        # Any digit Decimal() reads (Unicode ones too) and underscores between them ("1_000"), as
        # pydantic takes them: a refused payload that the model takes would be worse than one let by.
        inner = self.build_decimal_pattern(schema).removeprefix("^").removesuffix("$")
        inner = inner.replace("[0-9]", "[\\d_]")
        return _decimal_pattern(inner, None if lower is None else float(lower))

    def datetime_schema(self, schema: core_schema.DatetimeSchema) -> JsonSchemaValue:
        return self._or_number(super().datetime_schema(schema), schema, "a Unix time")

    def timedelta_schema(self, schema: core_schema.TimedeltaSchema) -> JsonSchemaValue:
        return self._or_number(super().timedelta_schema(schema), schema, "seconds")

    def date_schema(self, schema: core_schema.DateSchema) -> JsonSchemaValue:
        return self._strictly(super().date_schema(schema), schema)

    def time_schema(self, schema: core_schema.TimeSchema) -> JsonSchemaValue:
        return self._strictly(super().time_schema(schema), schema)

    def uuid_schema(self, schema: core_schema.UuidSchema) -> JsonSchemaValue:
        return self._strictly(super().uuid_schema(schema), schema)

    def _strict(self, schema: Any) -> bool:
        """The field is strict (``Strict()``, or its model's ``ConfigDict(strict=True)``)."""
        config = self._config_wrapper_stack.tail
        return bool(schema.get("strict") or (config is not None and config.config_dict.get("strict")))

    def _strictly(self, json_schema: JsonSchemaValue, schema: Any) -> JsonSchemaValue:
        """A strict field's format marked so (``date:strict``): checked as pydantic's strict mode reads
        it (:mod:`jobframework.catalog_check`); a validator that knows no such format takes the value."""
        if self._strict(schema) and isinstance(json_schema.get("format"), str):
            json_schema["format"] += STRICT_FORMAT
        return json_schema

    def _or_number(self, json_schema: JsonSchemaValue, schema: Any, means: str) -> JsonSchemaValue:
        """A datetime or a duration as text, or (as pydantic's lax mode reads them) as a number: a
        Unix time, seconds (``means``, for the refusal)."""
        if self._strict(schema) or json_schema.get("type") != "string":
            return self._strictly(json_schema, schema)
        return {"anyOf": [json_schema, {"type": "number", NUMBER_MEANS: means}]}

    def tuple_schema(self, schema: core_schema.TupleSchema) -> JsonSchemaValue:
        """Each position's schema as draft 7 writes it (``items`` a list), which ``fastjsonschema`` reads:
        it ignores 2020-12's ``prefixItems``, and a tuple's positions went unchecked."""
        json_schema = super().tuple_schema(schema)
        positions = json_schema.pop("prefixItems", None)
        if positions is not None:
            rest = json_schema.pop("items", None)
            json_schema["items"] = positions
            if rest is not None:  # (``tuple[int, *tuple[str, ...]]``: what follows the positions)
                json_schema["additionalItems"] = rest
        return json_schema

    def set_schema(self, schema: core_schema.SetSchema) -> JsonSchemaValue:
        return _repeats_allowed(super().set_schema(schema))

    def frozenset_schema(self, schema: core_schema.FrozenSetSchema) -> JsonSchemaValue:
        return _repeats_allowed(super().frozenset_schema(schema))

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
