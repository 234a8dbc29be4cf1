"""The type of what ``@job(...)`` returns, so that a type checker knows each job's payload model and result.

``@job("orders.fulfil")`` on ``def fulfil(order: Order) -> Receipt`` gives a ``Job[Order, Receipt]``:
mypy and pyright then check ``fulfil.enqueue(...)``, ``fulfil.request(...)`` and ``fulfil(...)`` against
``Order``, and ``run_inline(fulfil, ...)`` is a ``Receipt``. An ``async def`` job's result is what it
returns once awaited. A batched job's function takes ``list[Item]``: it is a ``Job[Item]`` (enqueued
one item at a time; its result, one outcome per item, is not typed). A function the decorator would
refuse when it runs (its first parameter no model, the context first, a method, a second parameter not
the context) matches no overload: the type checker flags it at the decorator.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, overload

from pydantic import BaseModel

if TYPE_CHECKING:
    from jobframework.context import JobContext
    from jobframework.jobs import Job

M = TypeVar("M", bound=BaseModel)
R = TypeVar("R")


class JobDecorator(Protocol):
    """``@job(...)``: turns the function into the :class:`~jobframework.jobs.Job` of its payload model."""

    @overload
    def __call__(self, fn: Callable[[list[M]], object], /) -> Job[M]: ...
    @overload
    def __call__(self, fn: Callable[[list[M], JobContext], object], /) -> Job[M]: ...
    @overload
    def __call__(self, fn: Callable[[M], Coroutine[Any, Any, R]], /) -> Job[M, R]: ...
    @overload
    def __call__(self, fn: Callable[[M, JobContext], Coroutine[Any, Any, R]], /) -> Job[M, R]: ...
    @overload
    def __call__(self, fn: Callable[[M], R], /) -> Job[M, R]: ...
    @overload
    def __call__(self, fn: Callable[[M, JobContext], R], /) -> Job[M, R]: ...
