"""Listeners of every consumer in the process: what a job module registers with :func:`on_outcome`.

``consumer(listeners=[...])`` hears one handler's records; the Lambda function the ``JobFramework``
construct deploys runs the framework's own handler, which a team does not write. A job module
registers its listener instead, as Celery's ``task_success.connect`` and BullMQ's
``worker.on("completed")`` do, and every consumer of the process tells it each record's
:class:`~jobframework.delivery.RecordOutcome`: the deployed function (which imports the job modules),
``jf dev``, ``jf worker`` and a test's handler.

A listener runs in the consumer after the batch's records settled, before the invocation returns:
keep it short (a metric, a log line, a message to a queue), as its time is the batch's. One that
raises is logged and the rest are told.

Example:
    >>> from jobframework.delivery import RecordOutcome
    >>> @on_outcome
    ... def note_failure(outcome: RecordOutcome) -> None:
    ...     if outcome.outcome == "dead_lettered":
    ...         print(f"{outcome.job_type} {outcome.job_id} died: {outcome.reason}")
    >>> registered()[-1] is note_failure
    True
    >>> remove_outcome_listener(note_failure)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from jobframework.delivery import Listener

_registered: tuple[Listener, ...] = ()
"""Replaced, never changed in place: a consumer telling them iterates the tuple it read."""


def on_outcome(listener: Listener) -> Listener:
    """Tell ``listener`` each record's outcome in every consumer of this process (a decorator)."""
    if not callable(cast(object, listener)):  # (not a function: its result, by mistake)
        from jobframework.errors import ConfigurationError

        raise ConfigurationError(
            f"on_outcome takes a function of one RecordOutcome, got {type(listener).__name__}: "
            "decorate the function, @on_outcome"
        )
    global _registered
    if listener not in _registered:
        _registered = (*_registered, listener)
    return listener


def remove_outcome_listener(listener: Listener) -> None:
    """Stop telling ``listener`` (registered with :func:`on_outcome`); nothing if it is not."""
    global _registered
    _registered = tuple(known for known in _registered if known is not listener)


def registered() -> tuple[Listener, ...]:
    """The listeners :func:`on_outcome` registered, in their order."""
    return _registered
