"""Cross-site request protection and the response headers every page carries.

Every request that is not ``GET``/``HEAD``/``OPTIONS`` (an action) must:

1. come when the console is not ``--read-only`` (else 403);
2. carry an ``Origin`` (or, without one, a ``Referer``) equal to the console's own origin, so a page
   of another site (or another port) cannot post to it;
3. carry the console's CSRF token in the ``X-CSRF-Token`` header. The token is random per process and
   is written only into the console's own pages (htmx sends it with every request, from the
   ``hx-headers`` of ``<body>``), which another site cannot read.

The host names a request may use are checked first (Starlette's ``TrustedHostMiddleware``), which
stops DNS rebinding. These checks stop a page of another site in a browser, not a client on the
network: the console has no login (it listens on 127.0.0.1 unless told otherwise; see
docs/console.md). Every action is logged (:data:`audit`). Pages are sent with a strict
Content-Security-Policy (scripts and styles only from the console itself), ``X-Frame-Options: DENY``
and no referrer to other sites.
"""

from __future__ import annotations

import hmac
import logging
import secrets
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

audit = logging.getLogger("jobframework.console.audit")
"""Every action the console took (``jf ui`` prints it on stderr): method, path, client, status."""
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
TOKEN_HEADER = "x-csrf-token"
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
]


def new_token() -> str:
    return secrets.token_urlsafe(32)


def _origin(value: str) -> str | None:
    parts = urlsplit(value)
    if not parts.scheme or not parts.netloc:
        return None
    return f"{parts.scheme}://{parts.netloc}".lower()


def refusal(method: str, headers: Headers, scheme: str, *, token: str, read_only: bool) -> str | None:
    """Why an action request is refused (``None``: it may proceed).

    Example:
        >>> h = Headers({"host": "127.0.0.1:8080", "origin": "http://evil.example", "x-csrf-token": "t"})
        >>> refusal("POST", h, "http", token="t", read_only=False)
        'cross-site request refused: Origin http://evil.example is not this console (http://127.0.0.1:8080)'
    """
    if method.upper() in SAFE_METHODS:
        return None
    if read_only:
        return "this console is read-only (started with --read-only): actions are off"
    own = f"{scheme}://{headers.get('host', '')}".lower()
    origin = headers.get("origin")
    claimed = _origin(origin) if origin and origin != "null" else None
    if claimed is None:
        referer = headers.get("referer")
        claimed = _origin(referer) if referer else None
    if claimed is None:
        return "cross-site request refused: the request names no Origin or Referer"
    if claimed != own:
        return f"cross-site request refused: Origin {claimed} is not this console ({own})"
    sent = headers.get(TOKEN_HEADER, "")
    if not sent or not hmac.compare_digest(sent.encode(), token.encode()):
        return "cross-site request refused: missing or wrong CSRF token (reload the page)"
    return None


class Protect:
    """ASGI middleware: refuse unsafe cross-site or read-only actions; add the security headers."""

    def __init__(self, app: ASGIApp, *, token: str, read_only: bool) -> None:
        self.app = app
        self.token = token
        self.read_only = read_only

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        why = refusal(
            scope["method"],
            Headers(scope=scope),
            scope.get("scheme", "http"),
            token=self.token,
            read_only=self.read_only,
        )

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], *_HEADERS]
            await send(message)

        if why is not None:
            client = scope.get("client")
            audit.warning(  # (a network client without the page's token, or a cross-site form)
                "%s %s from %s refused: %s",
                scope["method"],
                scope.get("path", "?"),
                client[0] if client else "?",
                why,
            )
            await PlainTextResponse(why, status_code=403)(scope, receive, with_headers)
            return
        if scope["method"] in SAFE_METHODS:
            await self.app(scope, receive, with_headers)
            return
        answered: list[int] = []

        async def noted(message: Message) -> None:
            if message["type"] == "http.response.start":
                answered.append(int(message["status"]))
            await with_headers(message)

        try:
            await self.app(scope, receive, noted)
        finally:  # (who acted, on what, and how it ended: a purge, a redrive, a cancel, a pause)
            client = scope.get("client")
            audit.info(
                "%s %s from %s: %s",
                scope["method"],
                scope.get("path", "?"),
                client[0] if client else "?",
                answered[0] if answered else "failed",
            )
