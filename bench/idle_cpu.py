"""Idle CPU of ``jf dev``: the share of one core that it uses while no job runs.

Starts ``jf dev --jobs handlers.jobs`` (embedded AWS, the pollers of the four queues, the local
scheduler) in its own process, waits for its ready line and a settling second, then reads the
process's CPU time (user + system, ``/proc/PID/stat``, Linux) over ``--seconds`` of wall time.
Prints the ratio CPU time / wall time (1.0 is one core busy) against the 0.05 budget, and how many
warnings it wrote meanwhile. Target: at most 0.05.

    python bench/idle_cpu.py [--seconds 20]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BUDGET = 0.05
"""At most 5 % of a core while idle."""


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # after the command: state(0) ... utime(11) stime(12), in clock ticks
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(seconds: float = 20.0) -> dict[str, Any]:
    """Run ``jf dev`` idle for ``seconds`` and return its CPU share, the budget and the warnings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JF_", "AWS_"))}
    env["PYTHONPATH"] = str(ROOT)
    jf = str(Path(sys.executable).with_name("jf"))
    proc = subprocess.Popen(
        [jf, "dev", "--jobs", "handlers.jobs"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("# ready"):
                break
        else:
            raise RuntimeError(f"jf dev exited before it was ready (exit code {proc.wait()})")
        time.sleep(1.0)
        cpu0, wall0 = _cpu_seconds(proc.pid), time.monotonic()
        time.sleep(seconds)
        cpu1, wall1 = _cpu_seconds(proc.pid), time.monotonic()
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
    share = (cpu1 - cpu0) / (wall1 - wall0)
    warnings = [line for line in (out + err).splitlines() if "WARNING" in line or "pool is full" in line]
    return {
        "core_share": share,
        "ratio_to_budget": share / BUDGET,
        "seconds": wall1 - wall0,
        "warnings": len(warnings),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args(argv)
    r = measure(args.seconds)
    print(f"jf dev idle over {r['seconds']:.0f} s")
    print(f"  CPU / wall time     {r['core_share']:.3f} of a core")
    print(f"  vs the 0.05 budget  {r['ratio_to_budget']:.2f}x (target <= 1.0x)")
    print(f"  warnings written    {r['warnings']}")


if __name__ == "__main__":
    main()
