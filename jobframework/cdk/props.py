"""One-line errors for construct props that a pydantic model checks (``stage=``, ``app_name=``,
``retry_budget=``): the prop as the user wrote it, what is wrong, and what to give instead."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import ValidationError

from jobframework.errors import ConfigurationError

NAME_ADVICE = "lowercase letters, digits and '-', starting with a letter; it prefixes every resource name"

Prop = tuple[str, object, str]
"""A prop as the user gave it: ``(name, value, advice)``."""


def prop_error(owner: str, exc: ValidationError, props: Mapping[str, Prop]) -> ConfigurationError:
    """``exc`` as one line naming the props: ``props`` maps the model's field to the prop behind it.

    Example:
        >>> from jobframework.topology import TopologySettings
        >>> try:
        ...     TopologySettings(stage="Prod")
        ... except ValidationError as exc:
        ...     print(prop_error("JobFramework", exc, {"stage": ("stage", "Prod", "e.g. 'prod'")}))
        JobFramework: stage='Prod': String should match pattern '^[a-z][a-z0-9-]{0,15}$' (e.g. 'prod')
    """
    problems = []
    for error in exc.errors():
        field = str(error["loc"][0]) if error["loc"] else ""
        if field in props:
            name, value, advice = props[field]
            problems.append(f"{name}={value!r}: {error['msg']} ({advice})")
        else:
            problems.append(f"{'.'.join(map(str, error['loc'])) or exc.title}: {error['msg']}")
    return ConfigurationError(f"{owner}: {'; '.join(problems)}")
