"""A job catalog's payload schema compiled into a check (``fastjsonschema``, what Powertools' validation
utility uses), with the formats pydantic reads checked as pydantic reads them."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from datetime import date, datetime, time, timedelta
from typing import Any
from uuid import UUID

from jobframework.catalog_schema import NUMBER_MEANS, STRICT_FORMAT, decimal_bounds

_KNOWN_FORMATS = {
    "email",
    "hostname",
    "idn-email",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "iri",
    "iri-reference",
    "json-pointer",
    "regex",
    "relative-json-pointer",
    "uri",
    "uri-reference",
    "uri-template",
}
"""Formats ``fastjsonschema`` checks itself; the others are checked as pydantic reads them, or not."""


_PYDANTIC_FORMATS: dict[str, type] = {
    "date-time": datetime,
    "date": date,
    "time": time,
    "duration": timedelta,
    "uuid": UUID,
}
"""Formats checked as pydantic reads them in the consumer (fastjsonschema's own date-time wants a
zone; it knows no uuid nor duration, which went unchecked)."""


@functools.cache
def _format_check(name: str) -> Callable[[object], bool]:
    """The check of the format ``name``: as pydantic reads a value of its type (strictly for a strict
    field's, ``date-time:strict``), or none. Made once a name: a schema is compiled whole, then a field
    or a union's branch alone to say what is wrong, and a pydantic adapter takes milliseconds to make."""
    strict = name.endswith(STRICT_FORMAT)
    name = name.removesuffix(STRICT_FORMAT)
    kind: Any = _PYDANTIC_FORMATS.get(name)
    bounds = decimal_bounds(name)
    if bounds is not None:  # a decimal string's bounds (catalog_schema.decimal_format)
        from decimal import Decimal
        from typing import Annotated

        import annotated_types

        made = {"gt": annotated_types.Gt, "ge": annotated_types.Ge, "lt": annotated_types.Lt}
        made |= {"le": annotated_types.Le, "multiple_of": annotated_types.MultipleOf}
        kind = Annotated[(Decimal, *(made[key](Decimal(value)) for key, value in bounds.items()))]
    if kind is None:
        return lambda _value: True
    from pydantic import TypeAdapter, ValidationError

    adapter: TypeAdapter[Any] = TypeAdapter(kind)

    def check(value: object) -> bool:
        try:
            adapter.validate_json(json.dumps(value), strict=strict)
        except ValidationError:
            return False
        return True

    return check


def _formats(schema: Any, found: set[str]) -> set[str]:
    if isinstance(schema, dict):
        value = schema.get("format")
        if isinstance(value, str):
            found.add(value)
        for sub in schema.values():
            _formats(sub, found)
    elif isinstance(schema, list):
        for sub in schema:
            _formats(sub, found)
    return found


def compile_schema(schema: dict[str, Any]) -> Callable[[Any], Any]:
    """``schema`` compiled by ``fastjsonschema`` (formats it does not know checked as pydantic reads
    them, or accepted), filling in defaults."""
    import fastjsonschema

    formats: dict[str, Callable[[object], bool]] = {
        name: _format_check(name) for name in _formats(schema, set()) if name not in _KNOWN_FORMATS
    }
    return fastjsonschema.compile(schema, formats=formats, use_default=True)


_FORMAT_WORDS = {
    "date-time": "a date and time as ISO 8601 text (2026-12-05T10:00:00Z)",
    "date": "a date as ISO 8601 text (2026-12-05)",
    "time": "a time of day as ISO 8601 text (10:00:00)",
    "duration": "a duration as ISO 8601 text (PT1H) or [-][D days, ]HH:MM:SS",
    "uuid": "a UUID as text (0b6e6b5e-3c3c-4f6a-9b1e-6a4f3c2b1a00)",
}


def format_refusal(definition: Any) -> str | None:
    """What to say of a value a field of a known format (``definition``) refused, or ``None``.

    Example:
        >>> format_refusal({"type": "string", "format": "uuid"})
        'must be a UUID as text (0b6e6b5e-3c3c-4f6a-9b1e-6a4f3c2b1a00)'
    """
    if isinstance(definition, dict) and isinstance(definition.get(NUMBER_MEANS), str):
        return f"must be a number ({definition[NUMBER_MEANS]})"
    name = definition.get("format") if isinstance(definition, dict) else None
    if not isinstance(name, str):
        return None
    if decimal_bounds(name) is not None:
        return None  # (a Decimal's branch: its refusal is the union's, catalog_schema.decimal_refusal)
    words = _FORMAT_WORDS.get(name.removesuffix(STRICT_FORMAT))
    return f"must be {words}" if words else None
