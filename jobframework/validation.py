"""Pydantic validation errors as one readable line (for messages that say what to change)."""

from __future__ import annotations

from pydantic import ValidationError


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
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'payload'}: {e['msg']}" for e in exc.errors()[:limit])
