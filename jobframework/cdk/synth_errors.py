"""Under ``cdk synth``/``deploy``, a configuration error of the framework is printed as its message.

The message of a :class:`~jobframework.errors.ConfigurationError` says what is wrong and what to do;
raised while a construct is made, it came at the end of some thirty lines of traceback through jsii's
runtime and the import machinery. When the CDK CLI runs the app (it sets ``CDK_OUTDIR``), the
process's exception hook prints such an error as ``jobframework: <message>`` and a pointer to
``JF_TRACEBACK=1``, which brings the whole traceback back; so too a bad value given to
:class:`~jobframework.topology_settings.TopologySettings`, which the app makes itself (pydantic's
error, as one line). Every other exception keeps its traceback.
"""

from __future__ import annotations

import os
import sys
from types import TracebackType

from pydantic import ValidationError

from jobframework.errors import ConfigurationError

ENV_TRACEBACK = "JF_TRACEBACK"


SETTINGS_MODELS = frozenset({"TopologySettings"})
"""The models an app makes itself (their ValidationError is printed as one line too)."""


def settings_problem(error: ValidationError) -> str:
    """A settings model's validation error as one line: each field, what is wrong and what it got; an
    unknown field with the names it takes.

    Example:
        >>> from jobframework.topology_settings import TopologySettings
        >>> try:
        ...     TopologySettings(app_name="acme", batch_size=0)
        ... except ValidationError as exc:
        ...     print(settings_problem(exc))
        TopologySettings: batch_size: Input should be greater than or equal to 1 (got 0); app_name: takes no such field (did you mean app?)
    """  # noqa: E501
    import difflib

    fields = _fields_of(error.title)
    problems = []
    for e in error.errors():
        where = ".".join(map(str, e["loc"])) or "-"
        if e["type"] == "extra_forbidden":
            close = difflib.get_close_matches(where, fields, n=1, cutoff=0.4)
            hint = f"did you mean {close[0]}?" if close else f"it takes {', '.join(fields)}"
            problems.append(f"{where}: takes no such field ({hint})")
        elif e["loc"]:
            problems.append(f"{where}: {e['msg']} (got {e['input']!r})")
        else:  # (the model's own check, across fields: its message says what it got)
            problems.append(str(e["msg"]).removeprefix("Value error, "))
    return f"{error.title}: {'; '.join(problems)}"


def _fields_of(title: str) -> list[str]:
    from jobframework.topology_settings import TopologySettings

    return list(TopologySettings.model_fields) if title == "TopologySettings" else []


def _hook(previous: object) -> object:
    def hook(kind: type[BaseException], error: BaseException, traceback: TracebackType | None) -> None:
        shown = os.environ.get(ENV_TRACEBACK, "") in ("", "0")
        if shown and isinstance(error, ValidationError) and error.title in SETTINGS_MODELS:
            print(f"jobframework: {settings_problem(error)}", file=sys.stderr)
            print(f"({ENV_TRACEBACK}=1 shows where)", file=sys.stderr)
            return
        if isinstance(error, ConfigurationError) and shown:
            print(f"jobframework: {error}", file=sys.stderr)
            print(
                f"(the construct refused the app's settings; {ENV_TRACEBACK}=1 shows where)", file=sys.stderr
            )
            return
        previous(kind, error, traceback)  # type: ignore[operator]

    hook.jobframework = True  # type: ignore[attr-defined]
    return hook


def install() -> None:
    """Print configuration errors as their message when the CDK CLI runs the app (once a process)."""
    if "CDK_OUTDIR" in os.environ and not getattr(sys.excepthook, "jobframework", False):
        sys.excepthook = _hook(sys.excepthook)  # type: ignore[assignment]
