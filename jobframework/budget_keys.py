"""Which retry budget a job's records count in (``@job(retry_budget=...)``).

A budget caps retries at a fraction of the first attempts counted in it (:mod:`jobframework.budget`).
By default a job counts in its queue's budget: one failing downstream then spends the budget of every
job on that queue, and a job calling a healthy but flaky host is dead-lettered ``budget`` on its first
failure. A job can count elsewhere:

- ``True`` (the default): its queue's budget.
- a name (``"smtp"``): a budget of that name, shared by the jobs that give it (those that call one
  downstream), apart from their queues'.
- a function of the payload giving a name (``lambda p: p.url.host``): one budget per name, so a dead
  host spends only its own; when the function raises or gives no name, the queue's budget.
- ``False``: none: the job is retried as its policy says, and its attempts count in no budget.

Whatever the option, a record whose payload could not be read (the payload store or the key ring
unavailable) counts in its queue's budget: that failure is not the job's downstream's.

Each name is a budget of its own: its own counters (a write per process every few seconds while it
has first attempts, two reads in a batch that retries it) and its own floor (100 retries a window). A
function should give a few names (a host, a provider), not one per job.

Example:
    >>> budget_key(True, None, "high"), budget_key("smtp", None, "high"), budget_key(False, None, "high")
    ('high', '@smtp', None)
    >>> budget_label(budget_key(lambda p: p["host"], {"host": "hooks.example.com"}, "high"))
    "'hooks.example.com'"
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Iterable
from typing import Any

from jobframework.core import ConfigurationError

log = logging.getLogger(__name__)

RetryBudgetOption = bool | str | Callable[[Any], str]
"""What ``@job(retry_budget=)`` takes (checked by :func:`checked_retry_budget`)."""

MAX_NAME = 200
"""The longest budget name (it is part of the counter's key in the state table)."""

_NAMED = "@"
"""Begins a named budget's key: no SQS queue name has it, so a name never shares a queue's counter."""


def checked_retry_budget(value: object, job_name: str) -> RetryBudgetOption:
    """``retry_budget=`` as given, or a :class:`ConfigurationError` saying what it takes."""
    if value is None or isinstance(value, bool):
        return True if value is None else value
    if isinstance(value, str) and _valid_name(value):
        return value
    if callable(value) and not isinstance(value, str):
        if not _takes_one_argument(value):
            raise ConfigurationError(
                f"job {job_name}: retry_budget= is a function of the payload: it takes one argument and "
                "returns the budget's name, e.g. retry_budget=lambda d: d.url.host"
            )
        return value
    raise ConfigurationError(
        f"job {job_name}: retry_budget= takes True (its queue's budget, the default), False (none: "
        "retried as its policy says), the name of a budget shared by the jobs that call one downstream "
        '("smtp"), or a function of the payload giving one (lambda p: p.url.host); names are 1 to '
        f"{MAX_NAME} characters without spaces at either end; got {value!r}"
    )


def budget_key(option: RetryBudgetOption, payload: Any, queue: str, job_name: str = "") -> str | None:
    """The key of the budget a record of ``job_name`` counts in (``None``: none); ``payload`` ``None``
    when it is not read yet (a function's budget is then the queue's)."""
    if option is True:
        return queue
    if option is False:
        return None
    if isinstance(option, str):
        return named_budget_key(option)
    if payload is None:
        return queue
    try:
        name = option(payload)
    except Exception:
        _warn_once(
            job_name,
            "retry_budget= of %s raised; counted in the budget of %s",
            job_name,
            queue,
            exc_info=True,
        )
        return queue
    if not isinstance(name, str) or not _valid_name(name):
        _warn_once(
            job_name,
            "retry_budget= of %s gave %r, not a name (a str of 1 to %d characters, such as d.url.host); "
            "counted in the budget of %s",
            job_name,
            name,
            MAX_NAME,
            queue,
        )
        return queue
    return _NAMED + name


def budget_label(key: str) -> str:
    """How a budget's key reads in a message: its queue's name, or the budget's own name in quotes (a
    budget named ``high`` is not the high queue's)."""
    return repr(key[len(_NAMED) :]) if key.startswith(_NAMED) else key


def _takes_one_argument(fn: Callable[..., Any]) -> bool:
    try:
        inspect.signature(fn).bind(None)
    except TypeError:
        return False
    except ValueError:  # (no signature to read: a builtin; it is called as given)
        return True
    return True


def _warn_once(job_name: str, message: str, *args: Any, exc_info: bool = False) -> None:
    """A job's budget function's failure, logged once per job and kind (it would be every record's)."""
    if (job_name, message) not in _warned:
        _warned.add((job_name, message))
        log.warning(message + " (said once per job)", *args, exc_info=exc_info)


_warned: set[tuple[str, str]] = set()


def _valid_name(name: str) -> bool:
    return 0 < len(name) <= MAX_NAME and name == name.strip()


def named_budget_key(name: str) -> str:
    """The counters' key of the budget ``retry_budget=name`` names.

    Example:
        >>> named_budget_key("crm")
        '@crm'
    """
    return _NAMED + name


def shared_budgets(options: Iterable[tuple[str, object]]) -> dict[str, list[str]]:
    """The named budgets among ``(job type, retry_budget)`` pairs (a job's option, or its catalog
    entry's name), each with its job types: what ``jf queue ls`` and the console show beside the
    queues' budgets.

    Example:
        >>> shared_budgets([("crm.deal", "crm"), ("crm.note", "crm"), ("mail.send", True), ("x", None)])
        {'crm': ['crm.deal', 'crm.note']}
    """
    named: dict[str, set[str]] = {}
    for job_type, option in options:
        if isinstance(option, str):
            named.setdefault(option, set()).add(job_type)
    return {name: sorted(types) for name, types in sorted(named.items())}
