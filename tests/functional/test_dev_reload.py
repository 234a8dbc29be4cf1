"""`jf dev --reload`: a change to the job modules restarts the workers with the new code, and the
embedded AWS (queues, statuses) stays; a module that does not load is waited out; Ctrl-C stops it all."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import boto3

from jobframework.local.aws import free_port

JF = str(Path(sys.executable).with_name("jf"))

JOBS_V1 = """
from pydantic import BaseModel

from jobframework import job


class Name(BaseModel):
    name: str


@job("reload.greet")
def greet(who: Name) -> str:
    return "hello " + who.name
"""

JOBS_V2 = (
    JOBS_V1.replace('"hello "', '"hi "')
    + """

@job("reload.part", timeout=600)  # a longer job: its queue's visibility timeout grows
def part(who: Name) -> str:
    return "bye " + who.name
"""
)


class _Dev:
    """`jf dev --reload` in ``root``, its stdout read into ``lines`` by a thread."""

    def __init__(self, root: Path, *args: str) -> None:
        (root / "reloadjobs.py").write_text(JOBS_V1)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("JF_", "AWS_", "POWERTOOLS_"))}
        self.env["POWERTOOLS_METRICS_DISABLED"] = "true"
        self.root, self.port = root, free_port()
        self.proc = subprocess.Popen(
            [JF, "dev", "--reload", "--port", str(self.port), "--jobs", "reloadjobs", *args],
            cwd=root,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self.errors: list[str] = []
        threading.Thread(target=self._read, args=(self.proc.stdout, self.lines), daemon=True).start()
        threading.Thread(target=self._read, args=(self.proc.stderr, self.errors), daemon=True).start()
        self.wait_for(lambda: any(x.startswith("# ready") for x in self.lines), "ready")
        for line in self.lines:
            if line.startswith("export "):
                name, _, value = line[len("export ") :].partition("=")
                self.env[name] = value

    @staticmethod
    def _read(stream: object, into: list[str]) -> None:
        for line in stream:  # type: ignore[attr-defined]
            into.append(line.rstrip("\n"))

    def wait_for(self, done: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + 60
        while not done():
            assert self.proc.poll() is None, (what, self.lines, self.errors)
            assert time.monotonic() < deadline, (what, self.lines, self.errors)
            time.sleep(0.05)

    def jf(self, *args: str) -> str:
        done = subprocess.run(
            [JF, *args], cwd=self.root, env=self.env, capture_output=True, text=True, timeout=60, check=False
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    def result(self, job_id: str) -> object:
        self.wait_for(lambda: any(job_id in x and "succeeded" in x for x in self.lines), f"{job_id} ran")
        return json.loads(self.jf("status", job_id, "--json"))["result"]

    def change(self, text: str) -> None:
        """Write the module anew, with a modification time the last one cannot share."""
        path = self.root / "reloadjobs.py"
        before = path.stat().st_mtime_ns
        path.write_text(text)
        os.utime(path, ns=(before + 2_000_000_000, before + 2_000_000_000))

    def visibility_timeout(self, lane: str) -> int:
        sqs = boto3.client(
            "sqs",
            endpoint_url=self.env["JF_ENDPOINT_URL"],
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        url = self.env[f"JF_QUEUE_URL_{lane.upper()}"]
        got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"])
        return int(got["Attributes"]["VisibilityTimeout"])

    def stop(self, signum: int = signal.SIGINT) -> int:
        """Send ``signum`` and wait for the exit; its exit code."""
        self.proc.send_signal(signum)
        return self.proc.wait(timeout=60)

    def __enter__(self) -> _Dev:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:  # (a failed assertion: no jf dev left behind)
            self.proc.kill()

    def count(self, start: str) -> int:
        return sum(x.startswith(start) for x in self.lines)


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_a_change_reloads_the_workers_and_keeps_what_the_embedded_aws_holds(tmp_path):
    with _Dev(tmp_path) as dev:
        first = dev.jf("enqueue", "reload.greet", '{"name": "ada"}', "--track")
        assert dev.result(first) == "hello ada"

        assert dev.visibility_timeout("default") < 3600
        dev.change(JOBS_V2)  # a new job type, and the old one changed
        dev.wait_for(lambda: dev.count("jf dev: reloaded jobs from reloadjobs") == 1, "the reload")
        assert any(x == "jf dev: reloading: reloadjobs.py changed" for x in dev.lines), dev.lines
        # (the workers' drain says who stopped them: it had read "signal 15: draining", an outside kill)
        assert any(
            "jf dev: stopping these workers (a reload, jf dev stopping, or a SIGTERM): draining" in x
            for x in dev.lines
        )
        one = "jf dev workers: stopped (drained); 1 record in"
        assert any(x.startswith(one) for x in dev.lines), dev.lines
        assert dev.result(dev.jf("enqueue", "reload.part", '{"name": "bob"}', "--track")) == "bye bob"
        assert dev.result(dev.jf("enqueue", "reload.greet", '{"name": "cy"}', "--track")) == "hi cy"
        assert (
            json.loads(dev.jf("status", first, "--json"))["result"] == "hello ada"
        )  # the state table stayed
        assert dev.visibility_timeout("default") >= 3600  # the queue given the longer job's timeout

        dev.change(JOBS_V2 + "\ndef broken(:\n")
        dev.wait_for(lambda: any("the workers stopped (exit 1)" in x for x in dev.lines), "waited out")
        assert any("SyntaxError" in x for x in dev.errors), dev.errors
        queued = dev.jf("enqueue", "reload.part", '{"name": "dee"}', "--track")  # waits in its queue
        dev.change(JOBS_V2)
        assert dev.result(queued) == "bye dee"
        assert dev.count("jf dev: reloaded jobs from reloadjobs") == 2
        code = dev.stop()
    assert code == 0, (dev.lines, dev.errors)
    # The last line counts every worker's jobs, not the last workers' since their reload (a trial's).
    assert re.fullmatch(
        r"jf dev: stopped; in all \(3 reloads\): 4 records in \d+ batch(?:es)?, 4 done, 0 handed back; jobs: "
        r"4 succeeded, 0 retried, 0 dead-lettered; the embedded AWS and what it held are gone",
        dev.lines[-1],
    ), dev.lines
    assert dev.lines[-2].startswith("jf dev workers: stopped (drained); 1 record in"), dev.lines
    assert not _listening(dev.port)


def test_jobs_arriving_through_a_burst_of_reloads_all_run(tmp_path):
    """A trial saved its module 8 times, 0.7 s apart, while delayed jobs came due: one stayed in flight
    for its queue's visibility timeout (a long poll under way when the workers stopped got it)."""
    with _Dev(tmp_path) as dev:
        ids = [
            dev.jf("enqueue", "reload.greet", json.dumps({"name": f"n{n}"}), "--track", "--delay", str(n))
            for n in range(6)
        ]
        for n in range(5):
            dev.change(JOBS_V1 + f"\n# save {n}\n")
            time.sleep(0.7)
        dev.wait_for(lambda: dev.count("jf dev: reloaded jobs from reloadjobs") >= 1, "a reload")
        for job_id in ids:
            assert dev.result(job_id) == f"hello n{ids.index(job_id)}"
        assert dev.stop() == 0, (dev.lines, dev.errors)


def test_a_new_lane_prints_the_exports_again_and_a_hangup_stops_it_all(tmp_path):
    with _Dev(tmp_path) as dev:
        dev.change(JOBS_V1 + '\n\n@job("reload.fetch", profile="io")\ndef fetch(who: Name) -> None: ...\n')
        dev.wait_for(lambda: any(x.startswith("# the lanes changed") for x in dev.lines), "the lanes note")
        assert any(x.startswith("export JF_QUEUE_URL_DEFAULT_IO=") for x in dev.lines), dev.lines
        dev.change(JOBS_V1 + "\ndef broken(:\n")
        dev.wait_for(lambda: any("the workers stopped (exit 1)" in x for x in dev.lines), "waited out")
        code = dev.stop(signal.SIGHUP)  # (the terminal closed)
    assert code == 0, (dev.lines, dev.errors)  # its workers had failed: said then, not again at the stop
    assert dev.lines[-1].startswith("jf dev: stopped; in all (2 reloads): 0 records in 0 batches"), dev.lines
    assert dev.lines[-1].endswith("; the embedded AWS and what it held are gone"), dev.lines
    assert not any("polling" in e and "failed" in e for e in dev.errors), dev.errors[-5:]
    assert not _listening(dev.port)
