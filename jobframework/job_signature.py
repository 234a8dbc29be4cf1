"""What a job function's signature says: its payload model, and whether it takes the
:class:`~jobframework.context.JobContext` (``@job`` refuses another shape, saying what to write).

Every check raises :class:`~jobframework.core.ConfigurationError` naming what to change.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from jobframework.context import JobContext
from jobframework.core import ConfigurationError


def payload_model_of(
    fn: Callable[..., Any], name: str, batched: bool = False
) -> tuple[type[BaseModel], bool]:
    """The payload model of ``fn`` (its first parameter's annotation; a batched job's, of ``list[...]``)
    and whether it takes the JobContext second."""
    params = list(inspect.signature(fn).parameters.values())
    if not params or params[0].kind not in (params[0].POSITIONAL_ONLY, params[0].POSITIONAL_OR_KEYWORD):
        raise ConfigurationError(
            f"job {name}: the function must take the payload as its first parameter, annotated with a "
            f"pydantic model ({_SHAPE})"
        )
    if params[0].name in ("self", "cls"):
        raise ConfigurationError(
            f"job {name}: decorate a function, not a method (its first parameter is {params[0].name!r}): "
            f"a module-level function that calls your object's method ({_SHAPE})"
        )
    try:
        hints = typing.get_type_hints(fn)
    except Exception as exc:
        raise ConfigurationError(
            f"job {name}: cannot resolve the type hints of {getattr(fn, '__qualname__', fn)!r}: {exc}"
        ) from exc
    model = hints.get(params[0].name)
    if model is JobContext:
        raise ConfigurationError(f"job {name}: the payload comes first, then the JobContext ({_SHAPE})")
    if batched:
        args = typing.get_args(model)
        if typing.get_origin(model) is not list or len(args) != 1:
            raise ConfigurationError(
                f"job {name}: a batched job takes a list of payloads: annotate {params[0].name!r} as "
                "list[MyModel] (def send(emails: list[Email], ctx: JobContext) -> list[...])"
            )
        model = args[0]
    if not (inspect.isclass(model) and issubclass(model, BaseModel)):
        raise ConfigurationError(
            f"job {name}: annotate the first parameter {params[0].name!r} with a pydantic BaseModel "
            f"subclass (got {model!r})"
        )
    extra = params[1:]
    if len(extra) > 1:
        raise ConfigurationError(
            f"job {name}: after the payload a job takes at most one parameter, the JobContext ({_SHAPE}); "
            f"it has {len(extra)}: {', '.join(p.name for p in extra)}"
        )
    if extra:
        _check_context_parameter(name, extra[0], hints.get(extra[0].name), model)
    return model, bool(extra)


_SHAPE = "def my_job(payload: MyModel, ctx: JobContext) -> None"
"""A job's signature, as the refusals show it."""


def _check_context_parameter(name: str, given: inspect.Parameter, hint: Any, model: type[BaseModel]) -> None:
    """A job's second parameter is the JobContext, passed by position: annotated ``JobContext`` (or
    ``JobContext | None``), or not annotated and with no default but ``None``.

    Raises:
        ConfigurationError: another annotation, another default (``dry_run=False`` was given the
            context, which is truthy), or a parameter not taken by position (``*, ctx``, ``**kw``).
    """
    if given.kind not in (given.POSITIONAL_ONLY, given.POSITIONAL_OR_KEYWORD):
        mark = {given.VAR_POSITIONAL.name: "*", given.VAR_KEYWORD.name: "**"}.get(given.kind.name, "*, ")
        written = mark + given.name
        raise ConfigurationError(
            f"job {name}: its second parameter ({written}) is not taken by position, and the "
            f"JobContext is given by position: write {_SHAPE}, or no second parameter"
        )
    with_default = given.default is not inspect.Parameter.empty
    move = f"; to be an option of the job, make {given.name} a field of {model.__name__}"
    if hint is None and (not with_default or given.default is None):
        return  # (def f(p: M, ctx), ctx=None: the context)
    if hint is None:
        raise ConfigurationError(
            f"job {name}: its second parameter {given.name}={given.default!r} would be given the "
            f"JobContext, not its default: annotate it ({given.name}: JobContext) if it is the context" + move
        )
    if hint not in (JobContext, JobContext | None):
        raise ConfigurationError(
            f"job {name}: its second parameter {given.name!r} is annotated "
            f"{getattr(hint, '__name__', hint)}: a job's second parameter is the JobContext "
            f"({given.name}: JobContext), or it has none"
            + (
                f"; its default does not keep it from being given the JobContext{move}"
                if with_default
                else ""
            )
        )
