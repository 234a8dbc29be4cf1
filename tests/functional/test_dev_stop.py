"""Ctrl-C stops `jf dev`: the job being run finishes first, then one summary line (as `jf worker`'s)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from jobframework.local.aws import free_port

JF = str(Path(sys.executable).with_name("jf"))

JOB_MODULE = '''
import time
from pathlib import Path

from pydantic import BaseModel

from jobframework import PermanentError, Priority, job

HERE = Path(__file__).parent


class Step(BaseModel):
    name: str


@job("stop.quick", priority=Priority.HIGH)
def quick(step: Step) -> str:
    return step.name


@job("stop.declined", priority=Priority.HIGH)
def declined(step: Step) -> None:
    raise PermanentError(f"{step.name} is declined")


@job("stop.capped", priority=Priority.HIGH, timeout=120, concurrency=1)
def capped(step: Step) -> str:
    """One at a time; each runs until the test creates the file ``release``."""
    (HERE / "capped").write_text(step.name)
    give_up = time.monotonic() + 60
    while not (HERE / "release").exists() and time.monotonic() < give_up:
        time.sleep(0.05)
    return step.name


@job("stop.slow", priority=Priority.DEFAULT, timeout=120)
def slow(step: Step) -> str:
    """Runs until the test creates the file ``release`` (a minute at most)."""
    (HERE / "started").write_text(step.name)
    give_up = time.monotonic() + 60
    while not (HERE / "release").exists() and time.monotonic() < give_up:
        time.sleep(0.05)
    return step.name
'''


class _Dev:
    """`jf dev` on the job module above, in ``root``; its stdout read into ``lines`` by a thread."""

    def __init__(self, root: Path, *args: str, env: dict[str, str] | None = None) -> None:
        (root / "stopjobs.py").write_text(JOB_MODULE)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("JF_", "AWS_", "POWERTOOLS_"))}
        self.env["POWERTOOLS_METRICS_DISABLED"] = "true"
        self.env.update(env or {})
        self.root = root
        self.proc = subprocess.Popen(
            [JF, "dev", "--port", str(free_port()), "--jobs", "stopjobs", *args],
            cwd=root,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        self.wait_for(lambda: any(x.startswith(("# ready", '{"event": "ready"')) for x in self.lines))
        for line in self.lines:
            if line.startswith("export "):
                name, _, value = line[len("export ") :].partition("=")
                self.env[name] = value
            elif line.startswith('{"event": "ready"'):  # jf dev --json
                self.env.update(json.loads(line)["env"])

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, done: Callable[[], bool], what: str = "") -> None:
        deadline = time.monotonic() + 60
        while not done():
            assert self.proc.poll() is None, (what, self.lines, self.proc.stderr and self.proc.stderr.read())
            assert time.monotonic() < deadline, (what, self.lines)
            time.sleep(0.05)

    def enqueue(self, job_type: str, name: str, *options: str) -> str:
        sent = subprocess.run(
            [JF, "enqueue", job_type, json.dumps({"name": name}), *options],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert sent.returncode == 0, sent.stderr
        return sent.stdout.strip()

    def stop(self) -> int:
        """Wait for the exit (after a signal); its exit code."""
        try:
            return self.proc.wait(timeout=60)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()


def test_ctrl_c_lets_the_job_being_run_finish_then_prints_what_ran(tmp_path):
    dev = _Dev(tmp_path)
    try:
        dev.enqueue("stop.quick", "a")
        dev.enqueue("stop.declined", "b")
        dev.wait_for(lambda: sum(" stop." in x for x in dev.lines) >= 2, "two outcome lines")
        slow = dev.enqueue("stop.slow", "c")
        dev.enqueue("stop.quick", "later", "--delay", "5m")
        dev.wait_for((tmp_path / "started").exists, "the slow job started")
        dev.proc.send_signal(signal.SIGINT)
        dev.wait_for(lambda: any("draining" in x for x in dev.lines), "the Ctrl-C taken")
        (tmp_path / "release").write_text("")  # only now can the job in flight end
    finally:
        code = dev.stop()
    assert code == 0, dev.lines
    [done] = [i for i, x in enumerate(dev.lines) if slow in x]
    assert "succeeded" in dev.lines[done]  # it was not cut off by the stop
    assert re.fullmatch(
        r"jf dev: stopped \(drained\); 3 records in \d batch(?:es)?, 3 done, 0 handed back; "
        r"jobs: 2 succeeded, 0 retried, 1 dead-lettered; gone with the embedded AWS: 1 job not yet run "
        r"\(1 due later\), 1 dead letter",
        dev.lines[-1],
    ), dev.lines[-1]
    assert done < len(dev.lines) - 1


def test_jf_dev_json_lines_name_the_app_and_ctrl_c_ends_them_with_a_json_summary(tmp_path):
    dev = _Dev(tmp_path, "--json")
    try:
        dev.enqueue("stop.quick", "a")
        dev.wait_for(lambda: any('"outcome"' in x for x in dev.lines), "an outcome record")
        dev.proc.send_signal(signal.SIGINT)
    finally:
        code = dev.stop()
    assert code == 0, dev.lines
    every = [json.loads(x) for x in dev.lines]  # every stdout line is a JSON object: no banner, no exports
    assert all(isinstance(x, dict) for x in every), dev.lines
    ready = every[0]
    assert ready["event"] == "ready" and ready["env"]["JF_ENDPOINT_URL"] == ready["endpoint_url"]
    assert ready["jobs"] == ["stopjobs"] and ready["workers"] is True
    [outcome] = [x for x in every if "outcome" in x]
    assert outcome["service"] == "jf"  # its topology's app, what the stack sets (not "jobframework")
    summary = every[-1]
    assert summary["event"] == "stopped" and summary["stopped"] == "jf dev" and summary["drained"] is True
    assert (summary["records"], summary["succeeded"], summary["dead_lettered"]) == (1, 1, 0)
    assert summary["left"] == {"unrun": 0, "delayed": 0, "backing_off": 0, "dead_letters": 0}


def test_jf_dev_app_names_the_local_topology_as_the_construct_would(tmp_path):
    """`jf dev --app billing` provisions billing-dev-* queues and tables and logs as service billing, as
    the stack deployed with app_name="billing" does; a name AWS would refuse is a usage error."""
    dev = _Dev(tmp_path, "--app", "billing", "--json")
    try:
        assert dev.env["JF_QUEUE_URL_HIGH"].endswith("/billing-dev-high")
        assert dev.env["JF_STATE_TABLE"] == "billing-dev-state"
        assert dev.env["JF_TOPOLOGY_PARAMETER"] == "/billing/dev/topology"
        dev.enqueue("stop.quick", "a")
        dev.wait_for(lambda: any('"outcome"' in x for x in dev.lines), "an outcome line")
        outcome = json.loads(next(x for x in dev.lines if '"outcome"' in x))
        assert outcome["service"] == "billing"
        dev.proc.send_signal(signal.SIGINT)
    finally:
        assert dev.stop() == 0, dev.lines
    bad = subprocess.run(
        [JF, "dev", "--app", "Billing", "--jobs", "stopjobs"],
        cwd=tmp_path,
        env=dev.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 2 and "--app 'Billing'" in bad.stderr, bad.stderr


def test_jf_dev_exits_1_when_its_drain_time_runs_out_with_a_job_still_running(tmp_path):
    dev = _Dev(tmp_path, "--drain-timeout", "1")
    try:
        dev.enqueue("stop.slow", "c")
        dev.wait_for((tmp_path / "started").exists, "the slow job started")
        dev.proc.send_signal(signal.SIGINT)
        dev.wait_for(lambda: any("stopped (drain time ran out)" in x for x in dev.lines), "the stop line")
    finally:
        (tmp_path / "release").write_text("")  # (the job's thread may still be waiting for it)
        code = dev.stop()
    assert code == 1, dev.lines  # as jf worker: a script running jf dev learns that jobs were cut off


def test_jf_dev_prints_the_first_hand_back_over_a_limit_then_counts_them(tmp_path):
    """Records over a concurrency limit come back by themselves: one `released` line says so (the
    stop line counts them all), not one line per hand-back plus a log line restating each. (With
    JF_LIMIT_WAIT=0: by default they would wait in the process for the first run's lease.)"""
    dev = _Dev(tmp_path, env={"JF_LIMIT_WAIT": "0"})
    try:
        dev.enqueue("stop.capped", "first")
        dev.wait_for((tmp_path / "capped").exists, "the first capped job started")
        waiting = [dev.enqueue("stop.capped", f"w{n}") for n in range(4)]
        time.sleep(4)  # each comes back over the cap every 1 to 3 s while the first runs
        (tmp_path / "release").write_text("")
        dev.wait_for(lambda: sum("succeeded" in x and "stop.capped" in x for x in dev.lines) == 5, "all ran")
        dev.proc.send_signal(signal.SIGINT)
    finally:
        (tmp_path / "release").write_text("")
        code = dev.stop()
    assert code == 0, dev.lines
    released = [x for x in dev.lines if " released " in x]
    assert len(released) == 1, released  # the first, well under 30 s
    assert "more hand-backs of stop.capped (concurrency limit)" in released[0]
    assert any(w in released[0] for w in waiting)
    assert not [x for x in dev.lines if "over its concurrency cap" in x]  # said by the released line
    counted = re.search(r"(\d+) released", dev.lines[-1])
    assert counted and int(counted.group(1)) >= 4, dev.lines[-1]  # each waiting one at least once


def test_jf_dev_says_a_superseded_debounce_in_one_line(tmp_path):
    dev = _Dev(tmp_path)
    try:
        first = dev.enqueue("stop.quick", "a", "--key", "k", "--debounce", "5")
        last = dev.enqueue("stop.quick", "b", "--key", "k", "--debounce", "5")
        dev.wait_for(lambda: any(last in x and "succeeded" in x for x in dev.lines), "the last ran")
        dev.wait_for(lambda: any(first in x for x in dev.lines), "the first's line")
        dev.proc.send_signal(signal.SIGINT)
    finally:
        code = dev.stop()
    assert code == 0, dev.lines
    [superseded] = [x for x in dev.lines if first in x]  # its outcome line, no log line saying it again
    assert "skipped" in superseded and f"debounced: superseded by {last}" in superseded
