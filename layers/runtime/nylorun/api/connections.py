"""The connection routes (docs/writing/connections.md): the pages a person's browser sees while connecting an
account, and a caller's own connections.

    GET    /v1/a2a/connections/start?task=…&interaction=…   the authorizationUrl: a page naming the subject and the
                                                            Agent, with a Connect button (no token: a browser)
    POST   /v1/a2a/connections/confirm                      that button: on to the provider's consent page
    POST   /v1/a2a/connections/start                        the subject's own client (its token): the same, as JSON
    GET    /v1/a2a/connections/callback                     the provider's redirect (no token: the state is the key)
    GET    /v1/a2a/connections                              the caller's connections (never a token)
    DELETE /v1/a2a/connections/{agent}/{provider}           revoke one

The browser that starts a consent carries a cookie whose digest its state keeps; the callback completes only in
that browser. Every page is plain text in HTML, each value escaped: a provider's error parameters are shown as text.
"""

from __future__ import annotations

import hmac
import html
import secrets
from collections.abc import Callable, Collection
from typing import Any
from urllib.parse import parse_qs

from fastapi import FastAPI, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from starlette.concurrency import run_in_threadpool

from nylorun.api.auth import Authenticator, Unauthenticated
from nylorun.domain.behalf import (
    MARK,
    ON_BEHALF_HEADER,
    BadScope,
    acting_subject,
    authenticated_subject,
    honoured_scope,
)
from nylorun.domain.connections import START_SECONDS
from nylorun.service.connections import CALLBACK_PATH, ConnectionFlow, ConnectRefused

BASE = "/v1/a2a/connections"
COOKIE = "nylorun_connect"
# A page the browser must not keep, frame or send elsewhere (its URL carries a task id and, on the callback, a code).
_PAGE_HEADERS = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self' https: http:",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}
_MAX_FORM_BYTES = 4096


def add_connection_routes(
    app: FastAPI,
    flow: ConnectionFlow | None,
    authenticator: Authenticator,
    unauthorized: Callable[[Unauthenticated], Response],
    delegators: Collection[str] = (),
) -> None:
    async def call(fn: Callable[..., Any], *args: Any) -> Any:
        return await run_in_threadpool(fn, *args)

    def caller(request: Request) -> str | Response:
        """The subject whose connections these are, or the 401 (400) that answers for it. A delegating identity's
        are kept per original caller (nylorun.domain.behalf): it names which with the same header as for A2A."""
        try:
            subject = authenticator.subject(request)
            return acting_subject(subject, honoured_scope(subject, request.headers.get(ON_BEHALF_HEADER), delegators))
        except Unauthenticated as exc:
            return unauthorized(exc)
        except BadScope as bad:
            return JSONResponse({"error": str(bad)}, status_code=400)

    def off() -> Response:
        return JSONResponse({"error": "This Runtime declares no connection providers"}, status_code=404)

    @app.get(BASE + "/start", response_model=None)
    async def start_page(request: Request) -> Response:
        if flow is None:
            return off()
        task, interaction = request.query_params.get("task", ""), request.query_params.get("interaction", "")
        try:
            waiting = await call(flow.waiting, task, interaction)
        except ConnectRefused as refused:
            return _page("Nothing to connect", str(refused), status=404)
        browser = request.cookies.get(COOKIE) or secrets.token_urlsafe(32)
        record, provider = waiting.record, waiting.provider
        who, through = authenticated_subject(record.owner.subject), MARK in record.owner.subject
        # Delegated (nylorun.domain.behalf): the delegate knows the delegating Agent, never its caller; the account
        # is kept for that one caller's work through it, so the page names the Agent and says so.
        whom, only_if = (f"<b>{_e(who)}</b>, for the person who asked it", f"asked {_e(who)} for this yourself") if through \
            else (f"<b>{_e(who)}</b>", f"are {_e(who)} and asked for this")
        body = (
            f"<p>The Agent <b>{_e(record.owner.agent)}</b> asks to use your <b>{_e(provider.label)}</b> account on "
            f"behalf of {whom}.</p><p>Continue only if you {only_if}. If someone sent you this link, close this "
            "page: connecting would give them your account.</p>"
            f'<form method="post" action="{BASE}/confirm">'
            f'<input type="hidden" name="task" value="{_e(task)}"><input type="hidden" name="interaction" '
            f'value="{_e(interaction)}"><input type="hidden" name="browser" value="{_e(browser)}">'
            f'<button type="submit">Connect {_e(provider.label)}</button></form>'
        )
        response = _page(f"Connect {provider.label}?", body, raw=True)
        _set_cookie(response, request, browser)
        return response

    @app.post(BASE + "/confirm", response_model=None)
    async def confirm(request: Request) -> Response:
        if flow is None:
            return off()
        body = await request.body()
        form = {k: v[0] for k, v in parse_qs(body[:_MAX_FORM_BYTES].decode(errors="replace")).items()}
        cookie = request.cookies.get(COOKIE, "")
        # A page elsewhere cannot post this form for the person: the browser sends a SameSite=Lax cookie with a
        # top-level GET only, so a cross-site post arrives without it (double-submit check).
        if not cookie or not hmac.compare_digest(cookie, form.get("browser", "")):
            return _page("Not connected", "Open the connection link again and press Connect.", status=403)
        try:
            waiting = await call(flow.waiting, form.get("task", ""), form.get("interaction", ""))
            url = await call(flow.start, waiting, cookie)
        except ConnectRefused as refused:
            return _page("Nothing to connect", str(refused), status=404)
        return RedirectResponse(url, status_code=303, headers={"Cache-Control": "no-store"})

    @app.post(BASE + "/start", response_model=None)
    async def start_for_client(request: Request) -> Response:
        # The subject's own client (console, CLI) with its token: the cookie lands in the browser it runs in.
        subject = caller(request)
        if isinstance(subject, Response):
            return subject
        if flow is None:
            return off()
        task, interaction = request.query_params.get("task", ""), request.query_params.get("interaction", "")
        try:
            waiting = await call(flow.waiting, task, interaction, subject)
            browser = request.cookies.get(COOKIE) or secrets.token_urlsafe(32)
            url = await call(flow.start, waiting, browser)
        except ConnectRefused as refused:
            return JSONResponse({"error": str(refused)}, status_code=404)
        response = JSONResponse({"authorizeUrl": url}, headers={"Cache-Control": "no-store"})
        _set_cookie(response, request, browser)
        return response

    @app.get(CALLBACK_PATH, response_model=None)
    async def callback(request: Request) -> Response:
        if flow is None:
            return off()
        query = request.query_params
        if "error" in query:
            # RFC 6749 §4.1.2.1: the provider's error parameters, shown as text (escaped), never as markup.
            said = " ".join(filter(None, (query.get("error", "")[:100], query.get("error_description", "")[:300])))
            if state := query.get("state"):
                await call(flow.abandon, state)
            return _page("Not connected", f"The provider said: {said}. Nothing was connected; the Agent still "
                         "waits, so you can open its link again.", status=400)
        try:
            label = await call(flow.complete, query.get("state", ""), query.get("code", ""), request.cookies.get(COOKIE, ""))
        except ConnectRefused as refused:
            return _page("Not connected", str(refused), status=400)
        response = _page(f"Connected {label}", "Connected. You can close this page; the Agent goes on by itself.")
        response.delete_cookie(COOKIE, path=BASE)
        return response

    @app.get(BASE, response_model=None)
    async def list_connections(request: Request) -> Response:
        subject = caller(request)
        if isinstance(subject, Response):
            return subject
        found = await call(flow.list, subject) if flow is not None else []
        return JSONResponse({"connections": found}, headers={"Cache-Control": "no-store"})

    @app.delete(BASE + "/{agent}/{provider}", response_model=None)
    async def revoke(request: Request, agent: str, provider: str) -> Response:
        subject = caller(request)
        if isinstance(subject, Response):
            return subject
        if flow is None or not await call(flow.revoke, subject, agent, provider):
            # Another subject's connection is "not found", never "forbidden" (nothing leaks).
            return JSONResponse({"error": f"No {provider[:64]!r} connection for Agent {agent[:64]!r}"}, status_code=404)
        return Response(status_code=204)


def _e(text: str) -> str:
    return html.escape(text, quote=True)


def _page(title: str, body: str, *, status: int = 200, raw: bool = False) -> HTMLResponse:
    text = body if raw else f"<p>{_e(body)}</p>"
    page = (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
        '<meta name="viewport" content="width=device-width"></head>'
        f'<body style="font-family:sans-serif;max-width:36em;margin:3em auto"><h1>{_e(title)}</h1>{text}</body></html>'
    )
    return HTMLResponse(page, status_code=status, headers=_PAGE_HEADERS)


def _set_cookie(response: Response, request: Request, value: str) -> None:
    secure = request.headers.get("x-forwarded-proto", request.url.scheme) == "https"
    response.set_cookie(COOKIE, value, max_age=START_SECONDS, path=BASE, httponly=True, samesite="lax", secure=secure)
