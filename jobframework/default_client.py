"""The default client: the one ``my_job.enqueue(...)`` uses without ``client=`` (set by
:func:`set_default_client`, a consumer's topology while it runs a job, else made from ``JF_*``
variables on first use; the test plugin refuses that last one). Importable from
:mod:`jobframework.client` too."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from jobframework.errors import ConfigurationError

if TYPE_CHECKING:
    from jobframework.client import JobClient
    from jobframework.recorder import EnqueueRecorder

__all__ = ["default_client", "enqueues_with", "refuse_env_client", "set_default_client"]

_default: JobClient | None = None
"""The client :func:`set_default_client` gave."""
_from_env: JobClient | None = None
"""The client made from ``JF_*`` variables, on first use."""
_env_refusal: str | None = None
"""Why no client may be made from ``JF_*`` here (the test plugin's: a test's enqueue must not reach
the shell's deployment), or ``None``."""
_enqueues_with: contextvars.ContextVar[tuple[Callable[[], JobClient], bool] | None] = contextvars.ContextVar(
    "jf_enqueues_with", default=None
)
"""While a consumer given its configuration, or ``run_inline``, runs a job: what makes the client its
enqueues go to, and whether that wins over :func:`set_default_client`'s (see :func:`enqueues_with`)."""


def default_client() -> JobClient:
    """The client ``my_job.enqueue(...)`` uses: the one :func:`set_default_client` gave; inside a job
    that a consumer given its ``config=`` runs (``jf dev``, ``jf worker``, a test's handler), that
    consumer's topology; else one configured from ``JF_*`` variables on first use."""
    global _from_env
    running = _enqueues_with.get()
    if running is not None and running[1]:
        return running[0]()
    if _default is not None:
        return _default
    if running is not None:
        return running[0]()
    if _from_env is None:
        if _env_refusal is not None:
            raise ConfigurationError(_env_refusal)
        from jobframework.client import JobClient

        _from_env = JobClient()
    return _from_env


def refuse_env_client(why: str | None) -> None:
    """Make :func:`default_client` raise ``ConfigurationError(why)`` where it would make a client from
    ``JF_*`` variables (``None``: make it again). The pytest plugin does, for the session: a test's
    ``my_job.enqueue(...)`` with no client went where the shell's ``JF_*`` pointed."""
    global _env_refusal
    _env_refusal = why


def set_default_client(client: JobClient | EnqueueRecorder | None) -> JobClient | None:
    """Replace (or, with ``None``, forget) the client that ``my_job.enqueue`` uses; returns the one
    it replaces (``None``: none was set), to put back. An ``EnqueueRecorder`` (a test's: it records,
    or with ``run=True`` runs, and answers ``enqueue``, ``enqueue_many``, ``status`` and ``wait``)
    stands for a client; :func:`default_client` then returns it."""
    global _default, _from_env
    previous = _default
    _default, _from_env = client, None  # type: ignore[assignment]  # (a recorder stands for a client)
    return previous


@contextlib.contextmanager
def enqueues_with(make: Callable[[], JobClient], *, first: bool = False) -> Iterator[None]:
    """Jobs run in this block (and the threads and tasks they start with its context) enqueue with
    the client ``make`` gives (made on their first enqueue), unless :func:`set_default_client` set one
    and ``first`` is false (``run_inline(client=...)``'s is first: the test named it)."""
    token = _enqueues_with.set((make, first))
    try:
        yield
    finally:
        _enqueues_with.reset(token)
