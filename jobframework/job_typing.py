"""The type of what ``@job(...)`` returns, so that a type checker knows each job's payload model.

``@job("orders.fulfil")`` on ``def fulfil(order: Order) -> None`` gives a ``Job[Order]``: mypy and
pyright then check ``fulfil.enqueue(...)``, ``fulfil.request(...)`` and ``fulfil(...)`` against
``Order``. A batched job's function takes ``list[Item]``: it is a ``Job[Item]`` (enqueued one item at a
time). Whatever the function returns (``-> dict[str, Any]`` too: a fallback overload for any callable
made mypy resolve such a function, which matched both, to ``Job[Any]``, and stop checking its
enqueues). A function the decorator would refuse when it runs (its first parameter no model, the
context first, a method, a second parameter not the context) matches no overload: the type checker
flags it at the decorator.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeVar, overload

from pydantic import BaseModel

if TYPE_CHECKING:
    from jobframework.context import JobContext
    from jobframework.jobs import Job

M = TypeVar("M", bound=BaseModel)


class JobDecorator(Protocol):
    """``@job(...)``: turns the function into the :class:`~jobframework.jobs.Job` of its payload model."""

    @overload
    def __call__(self, fn: Callable[[list[M]], object], /) -> Job[M]: ...
    @overload
    def __call__(self, fn: Callable[[list[M], JobContext], object], /) -> Job[M]: ...
    @overload
    def __call__(self, fn: Callable[[M], object], /) -> Job[M]: ...
    @overload
    def __call__(self, fn: Callable[[M, JobContext], object], /) -> Job[M]: ...
