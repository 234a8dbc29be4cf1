"""The README's code blocks that claim to run do run (the convention: ``tests/docs/readme_runner.py``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.docs.readme_runner import blocks

ROOT = Path(__file__).parents[2]
README = ROOT / "README.md"


def test_every_python_block_of_the_readme_runs_in_order_against_an_embedded_aws():
    python = [b for b in blocks(README.read_text()) if b.lang == "python"]
    runnable = [b for b in python if b.skip is None]
    assert len(runnable) >= 5  # writing jobs, schedules, consumer, client, testing
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JF_", "AWS_"))}
    env.update(
        POWERTOOLS_METRICS_DISABLED="true", POWERTOOLS_LOG_LEVEL="WARNING", AWS_DEFAULT_REGION="us-east-1"
    )
    ran = subprocess.run(
        [sys.executable, "-m", "tests.docs.readme_runner", str(README)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout[-4000:] + ran.stderr[-4000:]
    summary = re.search(r"README: (\d+) blocks ran, (\d+) tests passed, (\d+) skipped", ran.stdout)
    assert summary is not None, ran.stdout
    assert int(summary.group(1)) == len(runnable)
    assert int(summary.group(2)) >= 4  # the testing section's tests, called with their fixtures
    assert int(summary.group(3)) == len(python) - len(runnable)


def test_a_skip_marker_applies_to_the_next_block_and_carries_its_reason():
    text = (
        "<!-- readme-test: skip: needs a deployed stack -->\n```python\nboom()\n```\n\n"
        "```python\nx = 1\n```\n```console\n$ jf demo\n```\n"
    )
    found = blocks(text)
    assert [(b.lang, b.skip, b.line) for b in found] == [
        ("python", "needs a deployed stack", 2),
        ("python", None, 6),
        ("console", None, 9),
    ]
    assert found[1].code == "x = 1\n"


def test_every_skipped_readme_block_says_why():
    for block in blocks(README.read_text()):
        if block.skip is not None:
            assert block.skip.strip(), f"README.md:{block.line}: a skip marker needs a reason"
