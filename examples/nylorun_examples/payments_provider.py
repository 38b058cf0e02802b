"""EXAMPLE ONLY — a tiny OAuth 2.0 provider and payments API for the `support` walk-through, on loopback.

`nylorun serve` runs it beside the Runtime (never in the Lambda layer) and declares it as the provider `payments`,
so the walk-through shows a real consent page and a real authorized call. It is no model of a real provider: one
client, tokens in memory, an account name typed on the consent page, no login. Its pages say so.

    GET  /authorize   the consent page (authorization code flow, PKCE S256 required)
    POST /authorize   Allow or Deny: back to the client's redirect URI with a code, or with error=access_denied
    POST /token       authorization_code (the PKCE verifier checked) and refresh_token grants
    POST /revoke      RFC 7009 revocation
    POST /refunds     the payments API: a refund, with `Authorization: Bearer <access token>` and scope `refunds`
"""

from __future__ import annotations

import base64
import html
import secrets
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlencode

import uvicorn
from authlib.oauth2.rfc7636 import create_s256_code_challenge
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from nylorun_examples.support import ORDERS, issue_refund

BANNER = "EXAMPLE OAuth provider (local only, not a real payments service)"


@dataclass
class _Grant:
    account: str
    scope: str
    expires_at: float
    client_id: str = ""
    redirect_uri: str = ""
    challenge: str = ""


@dataclass
class ExamplePaymentsProvider:
    client_id: str = "nylorun-local"
    client_secret: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    redirect_uri: str = ""
    token_seconds: int = 3600
    codes: dict[str, _Grant] = field(default_factory=dict)
    access: dict[str, _Grant] = field(default_factory=dict)
    refresh: dict[str, _Grant] = field(default_factory=dict)
    refreshes: int = 0  # how many refresh grants it answered (tests read it)
    revoked: int = 0
    port: int = 0
    _server: uvicorn.Server | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def declaration(self) -> dict[str, Any]:
        """How the Runtime declares it (NYLORUN_CONNECTION_PROVIDERS): the client secret inline, as locally only."""
        return {
            "name": "payments", "title": "Example Payments", "authorizeUrl": f"{self.url}/authorize",
            "tokenUrl": f"{self.url}/token", "revokeUrl": f"{self.url}/revoke", "clientId": self.client_id,
            "clientSecret": self.client_secret,
        }

    # ------------------------------------------------------------------ pages and endpoints
    async def authorize_page(self, request: Request) -> Response:
        q = request.query_params
        if q.get("client_id") != self.client_id or q.get("redirect_uri") != self.redirect_uri:
            return HTMLResponse(_page("Unknown client or redirect URI."), status_code=400)
        if q.get("response_type") != "code" or q.get("code_challenge_method") != "S256" or not q.get("code_challenge"):
            return HTMLResponse(_page("This provider requires the code flow with PKCE S256."), status_code=400)
        hidden = "".join(
            f'<input type="hidden" name="{k}" value="{html.escape(q.get(k, ""))}">'
            for k in ("state", "scope", "code_challenge")
        )
        body = (
            f"<p>The Nylorun Runtime asks to issue refunds from your account (scope: {html.escape(q.get('scope', ''))}).</p>"
            f'<form method="post" action="/authorize">{hidden}<label>Account <input name="account" value="demo-account">'
            '</label> <button name="decision" value="allow">Allow</button> '
            '<button name="decision" value="deny">Deny</button></form>'
        )
        return HTMLResponse(_page(body))

    async def authorize(self, request: Request) -> Response:
        form = {k: v[0] for k, v in parse_qs((await request.body()).decode()).items()}
        state = form.get("state", "")
        if form.get("decision") != "allow":
            query = {"error": "access_denied", "error_description": "The person denied access", "state": state}
            return RedirectResponse(f"{self.redirect_uri}?{urlencode(query)}", status_code=303)
        code = secrets.token_urlsafe(24)
        with self._lock:
            self.codes[code] = _Grant(form.get("account", "demo-account"), form.get("scope", ""), time.time() + 300,
                                      self.client_id, self.redirect_uri, form.get("code_challenge", ""))
        return RedirectResponse(f"{self.redirect_uri}?{urlencode({'code': code, 'state': state})}", status_code=303)

    def _client_ok(self, request: Request, form: dict[str, str]) -> bool:
        scheme, _, encoded = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "basic":
            client_id, _, secret = base64.b64decode(encoded).decode().partition(":")
        else:
            client_id, secret = form.get("client_id", ""), form.get("client_secret", "")
        return client_id == self.client_id and secrets.compare_digest(secret, self.client_secret)

    async def token(self, request: Request) -> Response:
        form = {k: v[0] for k, v in parse_qs((await request.body()).decode()).items()}
        if not self._client_ok(request, form):
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        with self._lock:
            if form.get("grant_type") == "authorization_code":
                grant = self.codes.pop(form.get("code", ""), None)  # a code is good once
                verifier = form.get("code_verifier", "")
                if (grant is None or grant.expires_at < time.time() or grant.redirect_uri != form.get("redirect_uri")
                        or create_s256_code_challenge(verifier) != grant.challenge):
                    return JSONResponse({"error": "invalid_grant"}, status_code=400)
                refresh_token = secrets.token_urlsafe(24)
                self.refresh[refresh_token] = grant
            elif form.get("grant_type") == "refresh_token":
                refresh_token = form.get("refresh_token", "")
                grant_or_none = self.refresh.get(refresh_token)
                if grant_or_none is None:
                    return JSONResponse({"error": "invalid_grant"}, status_code=400)
                grant, self.refreshes = grant_or_none, self.refreshes + 1
            else:
                return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)
            access_token = secrets.token_urlsafe(24)
            self.access[access_token] = _Grant(grant.account, grant.scope, time.time() + self.token_seconds)
        return JSONResponse({
            "access_token": access_token, "token_type": "Bearer", "expires_in": self.token_seconds,
            "refresh_token": refresh_token, "scope": grant.scope,
        }, headers={"Cache-Control": "no-store"})

    async def revoke(self, request: Request) -> Response:
        form = {k: v[0] for k, v in parse_qs((await request.body()).decode()).items()}
        if not self._client_ok(request, form):
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        with self._lock:
            grant = self.refresh.pop(form.get("token", ""), None) or self.access.pop(form.get("token", ""), None)
            if grant is not None:
                self.revoked += 1
                self.access = {t: g for t, g in self.access.items() if g.account != grant.account}
        return Response(status_code=200)

    async def refunds(self, request: Request) -> Response:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        with self._lock:
            grant = self.access.get(token) if scheme.lower() == "bearer" else None
        if grant is None or grant.expires_at < time.time() or "refunds" not in grant.scope.split():
            return JSONResponse({"error": "invalid_token"}, status_code=401,
                                headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})
        body = await request.json()
        order = ORDERS.get(str(body.get("orderId", "")).upper())
        if order is None:
            return JSONResponse({"error": "no such order"}, status_code=404)
        refund = issue_refund(order, request.headers.get("idempotency-key", ""))
        return JSONResponse({**refund, "account": grant.account})

    # ------------------------------------------------------------------ serving
    def start(self, redirect_uri: str) -> ExamplePaymentsProvider:
        with socket.socket() as probe:  # a free port on loopback
            probe.bind(("127.0.0.1", 0))
            self.redirect_uri, self.port = redirect_uri, probe.getsockname()[1]
        app = Starlette(routes=[
            Route("/authorize", self.authorize_page, methods=["GET"]),
            Route("/authorize", self.authorize, methods=["POST"]),
            Route("/token", self.token, methods=["POST"]),
            Route("/revoke", self.revoke, methods=["POST"]),
            Route("/refunds", self.refunds, methods=["POST"]),
        ])
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        threading.Thread(target=self._server.run, name="example-payments", daemon=True).start()
        deadline = time.monotonic() + 10
        while not self._server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True


def _page(body: str) -> str:
    if not body.startswith("<"):
        body = f"<p>{html.escape(body)}</p>"
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Example Payments</title></head>'
        f'<body style="font-family:sans-serif;max-width:36em;margin:3em auto"><p><b>{BANNER}</b></p>'
        f"<h1>Example Payments</h1>{body}</body></html>"
    )
