"""Run the README's Python blocks, in order, in one namespace, against an embedded AWS of its own.

Run as ``python -m tests.docs.readme_runner README.md`` (what ``tests/docs/test_readme.py`` does, in a
fresh process, so that the README's jobs do not meet the test suite's registries).

The convention:

- Every ```` ```python ```` block runs, top to bottom, sharing one namespace (a later block may use a
  job an earlier one defined), as a reader pasting them into one session would.
- A block that cannot run here (it needs a deployed stack, say) is marked on the line just before
  its fence with ``<!-- readme-test: skip: <reason> -->``; the reason is required.
- Blocks in other languages (``bash``, ``console``, plain) are commands and transcripts, not run.
- The process has what the README says a reader has: an embedded AWS (moto over HTTP) provisioned
  with the topology of the jobs the blocks register (provisioned anew, under a new stage, after each
  block that adds one),
  and ``JF_ENDPOINT_URL`` / ``JF_TOPOLOGY_PARAMETER`` set as ``jf dev`` prints them.
- A ``test_*`` function a block defines is called after its block, with the pytest fixtures of
  ``jobframework.testing`` it asks for by name (``jf_aws``: this embedded AWS; ``jf_config``: a freshly
  provisioned topology), as pytest would.

Prints one line per block and per test, then ``README: N blocks ran, T tests passed, S skipped``.
"""

from __future__ import annotations

import inspect
import os
import re
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FENCE = re.compile(r"^```(?P<lang>[\w+-]*)\s*$")
SKIP = re.compile(r"^<!--\s*readme-test:\s*skip:\s*(?P<reason>.*?)\s*-->\s*$")
STAGE = "readme"


@dataclass(frozen=True)
class Block:
    line: int
    """1-based line of the opening fence."""
    lang: str
    code: str
    skip: str | None
    """Why it is not run (``None``: it runs)."""


def blocks(text: str) -> list[Block]:
    """The fenced code blocks of a Markdown text, with their skip markers."""
    found: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start = i
        i += 1
        body: list[str] = []
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        marker = SKIP.match(lines[start - 1]) if start else None
        found.append(
            Block(start + 1, m.group("lang"), "\n".join(body) + "\n", marker and marker.group("reason"))
        )
        i += 1
    return found


def main(path: str) -> int:
    from jobframework.client import set_default_client
    from jobframework.jobs import registry
    from jobframework.local.aws import FAKE_CREDENTIALS, EmbeddedAWS
    from jobframework.testing import provision_fresh
    from jobframework.topology import Topology, TopologySettings

    readme = Path(path)
    todo = [b for b in blocks(readme.read_text()) if b.lang == "python"]
    aws = EmbeddedAWS().start()
    try:
        stages = iter(range(1, 1000))

        def provision() -> None:
            """A topology of the jobs registered so far, under a new stage (queues keep their settings)."""
            topology = Topology.from_registry(registry, TopologySettings(stage=f"{STAGE}{next(stages)}"))
            aws.provision(topology)
            os.environ["JF_TOPOLOGY_PARAMETER"] = topology.topology_parameter
            set_default_client(None)  # `my_job.enqueue` reads the new one

        os.environ.update(FAKE_CREDENTIALS)
        os.environ["JF_ENDPOINT_URL"] = aws.endpoint_url
        provision()
        fixtures = {
            "jf_aws": lambda: aws,
            "jf_config": lambda: provision_fresh(aws.endpoint_url)[1],
        }
        namespace: dict[str, Any] = {"__name__": "readme"}
        ran = tests = skipped = 0
        for block in todo:
            where = f"{readme.name}:{block.line}"
            if block.skip is not None:
                skipped += 1
                print(f"skip {where}: {block.skip}")
                continue
            before = set(namespace)
            jobs_before = len(registry)
            try:
                exec(compile(block.code, where, "exec"), namespace)
            except Exception:
                print(f"FAIL {where}\n{traceback.format_exc()}")
                return 1
            ran += 1
            print(f"ran  {where}")
            if len(registry) != jobs_before:
                provision()
            for name in [n for n in namespace if n not in before and n.startswith("test_")]:
                test = namespace[name]
                args = {p: fixtures[p]() for p in inspect.signature(test).parameters}
                try:
                    test(**args)
                except Exception:
                    print(f"FAIL {where} {name}\n{traceback.format_exc()}")
                    return 1
                tests += 1
                print(f"pass {where} {name}")
        print(f"README: {ran} blocks ran, {tests} tests passed, {skipped} skipped")
        return 0
    finally:
        aws.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "README.md"))
