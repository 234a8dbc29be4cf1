"""Payloads validated as the data they are, and pydantic's errors as one readable line."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import to_json

M = TypeVar("M", bound=BaseModel)


def validate_data(model: type[M], data: Any) -> M:
    """``data`` as ``model``: validated as Python data, else as the JSON it would be sent as.

    A payload given as a dict is the JSON it came as (a message's, a saga's record, the command
    line's) or Python values (a test's ``datetime``); a strict model takes a datetime, a UUID or a
    Decimal only as an object in Python mode and only as text in JSON mode, so a dict that holds only
    JSON's types is taken if either mode takes it (one that holds Python values, in Python mode only).
    When neither does, the JSON mode's error is raised, unless the Python mode's finds fewer problems.
    """
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        python_error = exc
    if not isinstance(data, dict) or not _is_json(data):  # (Python values: the Python mode's reading)
        raise python_error
    try:
        return model.model_validate_json(to_json(data))
    except ValidationError as exc:
        # The JSON mode's reads the data as what it is (a strict model's Python mode asks for "an
        # instance of UUID", which JSON cannot send, beside the field that is wrong), unless the
        # Python mode's finds fewer problems.
        raise (exc if exc.error_count() <= python_error.error_count() else python_error) from None


def _is_json(value: Any, depth: int = 0) -> bool:
    """``value`` holds only what JSON carries (objects with text keys, arrays, text, numbers, booleans,
    null): data that came as JSON, not Python values (a ``datetime`` given for a ``str`` field is a
    mistake the JSON reading would hide by making it text)."""
    if value is None or isinstance(value, str | int | float | bool):
        return True
    if depth > 100:
        return False
    if isinstance(value, list):
        return all(_is_json(item, depth + 1) for item in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json(v, depth + 1) for k, v in value.items())
    return False


def validation_problems(exc: ValidationError, limit: int = 10) -> str:
    """A pydantic error as one line: ``field: message; other.field: message``.

    Example:
        >>> from pydantic import BaseModel
        >>> class Model(BaseModel):
        ...     report_id: str
        >>> try:
        ...     Model.model_validate({})
        ... except ValidationError as exc:
        ...     print(validation_problems(exc))
        report_id: Field required
    """
    return fields_text(validation_fields(exc, limit))


def fields_text(fields: Iterable[tuple[str, str]]) -> str:
    """Problems by field as one line: ``field: message; other.field: message`` (``payload``: the whole).

    Example:
        >>> fields_text([("lines.0.sku", "Field required"), ("", "Input should be an object")])
        'lines.0.sku: Field required; payload: Input should be an object'
    """
    return "; ".join(f"{field or 'payload'}: {message}" for field, message in fields)


def validation_fields(exc: ValidationError, limit: int = 10) -> list[tuple[str, str]]:
    """A pydantic error's problems as ``(dotted field path, message)`` (``""``: the payload itself).

    Example:
        >>> from pydantic import BaseModel
        >>> class Line(BaseModel):
        ...     sku: str
        >>> class Order(BaseModel):
        ...     lines: list[Line]
        >>> try:
        ...     Order.model_validate({"lines": [{"sku": 7}]})
        ... except ValidationError as exc:
        ...     print(validation_fields(exc))
        [('lines.0.sku', 'Input should be a valid string')]
    """
    return [(".".join(map(str, e["loc"])), e["msg"]) for e in exc.errors(include_url=False)[:limit]]
