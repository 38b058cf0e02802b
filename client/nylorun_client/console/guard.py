"""The console's front door: loopback Host only, same-origin writes only, and the page's own headers (CSP)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]"})
SAFE_METHODS = frozenset({"GET", "HEAD"})
# Everything the page loads comes from its own origin: no CDN, no inline script or style, no frame around it.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
PAGE_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),  # the first URL carries the per-run secret
    (b"cache-control", b"no-store"),
]


def host_name(host: str) -> str:
    """`127.0.0.1:8080` → `127.0.0.1`, `[::1]:80` → `[::1]`."""
    if host.startswith("["):
        return host.split("]", 1)[0] + "]"
    return host.rsplit(":", 1)[0] if ":" in host else host


class Guard:
    """Refuses a Host other than loopback (DNS rebinding: a page on evil.example resolving to 127.0.0.1) and a
    state-changing request whose Origin is missing or not this console's own (another site, another local user's
    page). Push deliveries are the exception: the Runtime sends no Origin, and their signature is checked instead."""

    def __init__(self, app: ASGIApp, *, secret: str, push_prefix: str = "/push/") -> None:
        self.app = app
        self.secret = secret  # the per-run key: `?k=` on the first visit opens a session
        self.push_prefix = push_prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "")
        if host_name(host) not in LOOPBACK_NAMES:
            await _refuse(send, 421, f"the console answers only on its loopback address, not {host!r}")
            return
        path = scope["path"].removeprefix(scope.get("root_path", ""))
        if scope["method"] not in SAFE_METHODS and not path.startswith(self.push_prefix):
            origin = headers.get("origin")
            if origin != f"http://{host}":
                said = "no Origin" if origin is None else f"Origin {origin!r}"
                await _refuse(send, 403, f"refused: {said} is not this console's page")
                return

        async def with_headers(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *PAGE_HEADERS]
            await send(message)

        await self.app(scope, receive, with_headers)


async def _refuse(send: Send, status: int, error: str) -> None:
    body = json.dumps({"error": error}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *PAGE_HEADERS]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
