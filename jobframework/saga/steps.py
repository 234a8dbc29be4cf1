"""The steps a saga is declared from: :func:`step` (run a job, with its compensation) and :func:`wait`."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from jobframework.errors import ConfigurationError
from jobframework.jobs import Job

_STEP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_\-.]{0,63}$")

InputFn = Callable[[dict[str, Any]], Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class Step:
    """A saga step that runs a job; made by :func:`step`."""

    job: Job[Any]
    name: str
    compensate: Job[Any] | None = None
    input: InputFn | None = None
    compensate_input: InputFn | None = None

    def payload(self, data: dict[str, Any]) -> dict[str, Any]:
        """The step's payload from the saga's data; raises pydantic ``ValidationError``."""
        return _payload(self.job, self.input, data)

    def compensation_payload(self, data: dict[str, Any]) -> dict[str, Any]:
        assert self.compensate is not None
        return _payload(self.compensate, self.compensate_input, data)


@dataclass(frozen=True, slots=True)
class Wait:
    """A saga step that waits for a signal; made by :func:`wait`. ``timeout`` is seconds."""

    name: str
    timeout: float


def _payload(target: Job[Any], build: InputFn | None, data: dict[str, Any]) -> dict[str, Any]:
    source = dict(build(dict(data))) if build is not None else data
    dumped: dict[str, Any] = target.validate(source).model_dump(mode="json")
    return dumped


def _require_job(value: Any, what: str) -> Job[Any]:
    if isinstance(value, str):  # the job's name: the step needs the job itself
        raise ConfigurationError(
            f"{what} takes the job object that @job returned (import it and pass it), not its name {value!r}"
        )
    if not isinstance(value, Job):
        name = getattr(value, "__qualname__", repr(value))
        raise ConfigurationError(
            f"{what} must be a registered job (decorate {name} with @job(...)), got {type(value).__name__}"
        )
    return value


def step(
    job_: Job[Any],
    *,
    compensate: Job[Any] | None = None,
    name: str | None = None,
    input: InputFn | None = None,
    compensate_input: InputFn | None = None,
) -> Step:
    """A saga step: run ``job_``; if a later step fails, run ``compensate`` to undo it.

    Args:
        job_: the step's job (a ``@job`` function).
        compensate: the job that undoes it (gets the saga's data, including this step's output).
        name: the step's name in the saga (default: the job's name); unique within the saga.
        input: builds the payload from the saga's data (default: the data itself, validated against
            the job's model, extra keys ignored).
        compensate_input: the same for the compensation.

    Raises:
        ConfigurationError: the job or the compensation is not a job, a name is not valid.
    """
    target = _require_job(job_, "a saga step")
    undo = _require_job(compensate, f"the compensation of step {target.name}") if compensate else None
    step_name = name if name is not None else target.name
    if not isinstance(step_name, str) or not _STEP_NAME.match(step_name):
        raise ConfigurationError(
            f"saga step name {step_name!r} is not valid: 1-64 letters, digits, '.', '_' or '-'"
        )
    for option, fn in (("input", input), ("compensate_input", compensate_input)):
        if fn is not None and not callable(fn):
            raise ConfigurationError(f"step {step_name}: {option}= must be a function of the saga's data")
    if compensate_input is not None and undo is None:
        raise ConfigurationError(f"step {step_name}: compensate_input= needs compensate=")
    return Step(target, step_name, undo, input, compensate_input)


def wait(name: str, *, timeout: float | timedelta) -> Wait:
    """A saga step that waits for the signal ``name``; past ``timeout`` seconds the saga compensates.

    Raises:
        ConfigurationError: a bad name, or a timeout not within (0 s, 1 year].
    """
    if not isinstance(name, str) or not _STEP_NAME.match(name):
        raise ConfigurationError(f"wait name {name!r} is not valid: 1-64 letters, digits, '.', '_' or '-'")
    seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not 0 < seconds <= 365 * 86400:
        raise ConfigurationError(f"wait {name}: timeout must be within (0, 1 year] seconds, got {timeout!r}")
    return Wait(name, float(seconds))
