"""A cpu-profile job in the default registry, imported only by `jf worker` subprocesses in tests."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel

from jobframework import job


class Tick(BaseModel):
    n: int = 0


@job("scale.render", profile="cpu", priority="low")
def render(tick: Tick) -> None:
    """Records which process ran it."""
    with Path(os.environ["JF_TEST_LEDGER"]).open("a") as ledger:
        ledger.write(f"{tick.n} {os.getpid()}\n")
