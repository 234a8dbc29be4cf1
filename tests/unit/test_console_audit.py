"""The console logs each action it takes (a fintech trial purged a payout's letter from another
machine, and nothing said so), and each it refused; a page read is no action."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import MutableMapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from starlette.responses import PlainTextResponse

from jobframework.ui.security import Protect

TOKEN = "t" * 32


def _call(method: str, headers: dict[str, str]) -> int:
    async def endpoint(scope: Any, receive: Any, send: Any) -> None:
        await PlainTextResponse("done")(scope, receive, send)

    app = Protect(endpoint, token=TOKEN, read_only=False)
    scope = {
        "type": "http",
        "method": method,
        "path": "/dlq/critical/purge",
        "scheme": "http",
        "client": ("10.0.4.7", 51234),
        "server": ("127.0.0.1", 8089),
        "headers": [
            (k.lower().encode(), v.encode()) for k, v in {"host": "127.0.0.1:8089", **headers}.items()
        ],
    }
    sent: list[MutableMapping[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    # (a thread of its own: a browser test's Playwright leaves a loop running in the main thread)
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, app(scope, receive, send)).result()
    return int(sent[0]["status"])


def test_each_action_is_logged_with_its_client_and_outcome_and_nothing_else_is(caplog):
    ours = {"origin": "http://127.0.0.1:8089", "x-csrf-token": TOKEN}
    with caplog.at_level(logging.INFO, logger="jobframework.console.audit"):
        assert _call("POST", ours) == 200
        assert _call("GET", {}) == 200
        assert _call("POST", {"origin": "http://evil.example"}) == 403
    said = [r.getMessage() for r in caplog.records if r.name == "jobframework.console.audit"]
    assert said[0] == "POST /dlq/critical/purge from 10.0.4.7: 200" and len(said) == 2
    assert said[1].startswith("POST /dlq/critical/purge from 10.0.4.7 refused: ")
