"""Under ``cdk synth``/``deploy``, a configuration error of the framework is printed as its message.

The message of a :class:`~jobframework.errors.ConfigurationError` says what is wrong and what to do;
raised while a construct is made, it came at the end of some thirty lines of traceback through jsii's
runtime and the import machinery. When the CDK CLI runs the app (it sets ``CDK_OUTDIR``), the
process's exception hook prints such an error as ``jobframework: <message>`` and a pointer to
``JF_TRACEBACK=1``, which brings the whole traceback back. Every other exception keeps its traceback.
"""

from __future__ import annotations

import os
import sys
from types import TracebackType

from jobframework.errors import ConfigurationError

ENV_TRACEBACK = "JF_TRACEBACK"


def _hook(previous: object) -> object:
    def hook(kind: type[BaseException], error: BaseException, traceback: TracebackType | None) -> None:
        if isinstance(error, ConfigurationError) and os.environ.get(ENV_TRACEBACK, "") in ("", "0"):
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
