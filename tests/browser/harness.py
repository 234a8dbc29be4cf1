"""The console on the embedded AWS for the browser tests and the screenshot script.

One uvicorn server in a thread per console; a Chromium from the system's packages driven by
Playwright (its own browser download is not reachable here).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import Any

import boto3
import uvicorn

from jobframework.consumer import Consumer, consumer
from jobframework.jobs import JobRegistry
from jobframework.local.aws import REGION, free_port
from jobframework.testing import consume_once, provision_fresh, receive_all
from jobframework.topology import RuntimeConfig
from jobframework.ui.app import create_app
from jobframework.ui.console import Console

CHROMIUM = "/usr/bin/chromium"
LEAK_KEY_ID = "AKIAJFCONSOLELEAKTEST"
LEAK_SECRET = "jf-console-secret-must-never-reach-a-page"
"""Credentials of the console's boto3 session (the embedded AWS accepts any): no page may show them."""


def chromium_path() -> str | None:
    """The Chromium to drive: ``JF_CHROMIUM`` if set, else Debian's; ``None`` if it is not there."""
    path = os.environ.get("JF_CHROMIUM") or CHROMIUM
    return path if os.path.exists(path) else None


class Server:
    """A uvicorn server for an ASGI app on 127.0.0.1, in a thread."""

    def __init__(self, app: Any) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", access_log=False)
        )
        self._thread = threading.Thread(target=self._server.run, name="jf-ui-test-server", daemon=True)

    def start(self) -> Server:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the console's server did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(10)


@dataclass
class Shop:
    """A provisioned topology of :mod:`tests.browser.console_jobs`, a consumer, and the console's clients."""

    config: RuntimeConfig
    sqs: Any
    dynamodb: Any
    handler: Consumer
    registry: JobRegistry

    def console(self, *, read_only: bool = False) -> Console:
        return Console(
            config=self.config,
            sqs=self.sqs,
            dynamodb=self.dynamodb,
            registry=self.registry,
            read_only=read_only,
            job_modules=["tests.browser.console_jobs"],
        )

    def consume(self, lane: str, *, rounds: int = 5) -> int:
        """Run the consumer on a lane until it finds nothing (at most ``rounds`` batches)."""
        ran = 0
        for _ in range(rounds):
            records, _ = consume_once(self.handler, self.sqs, self.config.endpoints(lane).url)
            if not records:
                break
            ran += len(records)
        return ran

    def dlq_depth(self, lane: str) -> int:
        return self._depth(self.config.endpoints(lane).dlq_url)

    def _depth(self, url: str) -> int:
        attrs = self.sqs.get_queue_attributes(
            QueueUrl=url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attrs["ApproximateNumberOfMessages"]) + int(attrs["ApproximateNumberOfMessagesNotVisible"])

    def empty_queues(self) -> None:
        """Delete every message of every queue and DLQ (PurgeQueue allows one call a minute)."""
        for ep in self.config.queues.values():
            for url in (ep.url, ep.dlq_url):
                if not self._depth(url):
                    continue
                messages = receive_all(self.sqs, url)
                for start in range(0, len(messages), 10):
                    self.sqs.delete_message_batch(
                        QueueUrl=url,
                        Entries=[
                            {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]}
                            for n, m in enumerate(messages[start : start + 10])
                        ],
                    )


def shop(endpoint_url: str) -> Shop:
    from tests.browser import console_jobs

    _, config = provision_fresh(endpoint_url, console_jobs.registry)
    session = boto3.Session(
        aws_access_key_id=LEAK_KEY_ID, aws_secret_access_key=LEAK_SECRET, region_name=REGION
    )
    sqs = session.client("sqs", endpoint_url=endpoint_url)
    dynamodb = session.client("dynamodb", endpoint_url=endpoint_url)
    handler = consumer(console_jobs.registry, config=config, sqs_client=sqs)
    return Shop(config, sqs, dynamodb, handler, console_jobs.registry)


def serve(console: Console) -> Server:
    return Server(create_app(console)).start()
