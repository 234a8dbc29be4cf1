"""The type of what ``@job(...)`` returns, so that a type checker knows each job's payload model.

``@job("orders.fulfil")`` on ``def fulfil(order: Order) -> None`` gives a ``Job[Order]``: mypy and
pyright then check ``fulfil.enqueue(...)``, ``fulfil.request(...)`` and ``fulfil(...)`` against
``Order``. A batched job's function takes ``list[Item]``: it is a ``Job[Item]`` (enqueued one item at a
time). A function whose first parameter is not a pydantic model type is a ``Job[Any]``: the decorator
refuses it when it runs, saying what to write.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, overload

from pydantic import BaseModel

if TYPE_CHECKING:
    from jobframework.context import JobContext
    from jobframework.jobs import Job

M = TypeVar("M", bound=BaseModel)


class JobDecorator(Protocol):
    """``@job(...)``: turns the function into the :class:`~jobframework.jobs.Job` of its payload model."""

    @overload
    def __call__(self, fn: Callable[[list[M]], Any], /) -> Job[M]: ...
    @overload
    def __call__(self, fn: Callable[[list[M], JobContext], Any], /) -> Job[M]: ...
    @overload
    def __call__(self, fn: Callable[[M], Any], /) -> Job[M]: ...
    @overload
    def __call__(self, fn: Callable[[M, JobContext], Any], /) -> Job[M]: ...
    @overload
    def __call__(self, fn: Callable[..., Any], /) -> Job[Any]: ...
