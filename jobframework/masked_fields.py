"""Payload fields pydantic would send masked: a ``SecretStr`` (or ``SecretBytes``, ``Secret[...]``)
is ``"**********"`` in JSON, so the job would run on the mask, silently (a fintech trial's card number).

``@job`` refuses such a payload model unless the field has a serializer of its own that says what to
send (``@field_serializer``, or ``Annotated[SecretStr, PlainSerializer(...)]``). A secret belongs in
Secrets Manager or SSM, with its name in the payload; the message, its dead letter and ``jf dlq
export`` all hold the payload as it was sent.
"""

# (No ``from __future__ import annotations``: the example's model is made where its annotations can be
# resolved, as a team's module is; a doctest inherits the future's string annotations, and pydantic
# cannot resolve them in a doctest's namespace.)
import typing
from typing import Any

from pydantic import BaseModel, PlainSerializer, Secret, SecretBytes, SecretStr, WrapSerializer

_SECRETS = (SecretStr, SecretBytes, Secret)


def masked_fields(model: type[BaseModel]) -> list[str]:
    """The dotted paths of ``model``'s fields (nested models' too) that JSON would carry masked.

    Example:
        >>> from pydantic import SecretStr
        >>> class Payout(BaseModel):
        ...     iban: str
        ...     card_number: SecretStr
        >>> masked_fields(Payout)
        ['card_number']
    """
    return _masked(model, "", set())


def _masked(model: type[BaseModel], prefix: str, seen: set[type[BaseModel]]) -> list[str]:
    if model in seen:  # (a model that holds itself: its fields are looked at once)
        return []
    seen.add(model)
    serialized = {
        name
        for decorator in model.__pydantic_decorators__.field_serializers.values()
        for name in decorator.info.fields
    }
    found: list[str] = []
    for name, info in model.model_fields.items():
        if name in serialized or any(isinstance(m, PlainSerializer | WrapSerializer) for m in info.metadata):
            continue
        path = f"{prefix}{name}"
        for kind in _types_in(info.annotation):
            if isinstance(kind, type) and issubclass(kind, _SECRETS):
                found.append(path)
                break
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                found.extend(_masked(kind, f"{path}.", seen))
    return found


def _types_in(annotation: Any) -> list[Any]:
    """``annotation`` and every type within it (``list[Card] | None``: the list, ``Card``, ``None``)."""
    kinds = [typing.get_origin(annotation) or annotation]
    for arg in typing.get_args(annotation):
        kinds.extend(_types_in(arg))
    return kinds
