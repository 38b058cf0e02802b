"""The console's Starlette app: the page, its assets, and the few calls the page makes to its own origin."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Route

from nylorun_client.console import live
from nylorun_client.console.forward import Refused, connect, forward
from nylorun_client.console.guard import Guard
from nylorun_client.console.sessions import COOKIE, Session, Sessions

STATIC = Path(__file__).parent / "static"
ASSETS = {"console.css": "text/css", "main.js": "text/javascript", "render.js": "text/javascript",
          "api.js": "text/javascript", "forms.js": "text/javascript", "events.js": "text/javascript"}  # fmt: skip
MAX_BODY = 1_000_000


def console_app(secret: str | None = None, *, agents: list[str] | None = None, token: str | None = None) -> Guard:
    """The console. `secret` is the per-run key in the printed URL (a new one if None: read `.secret`);
    `agents` are URLs offered on the page; `token` is the default bearer token (else $NYLORUN_TOKEN)."""
    key = secret or secrets.token_urlsafe(24)
    sessions = Sessions()
    default_token = token or os.environ.get("NYLORUN_TOKEN") or None

    def session_of(request: Request) -> Session:
        session = sessions.get(request.cookies.get(COOKIE))
        if session is None:
            raise Refused("this page has no console session (or it was unused for 12 h): open the URL the console printed")
        return session

    async def page(request: Request) -> Response:
        if secrets.compare_digest(request.query_params.get("k", ""), key):
            session = sessions.new()
            base = request.scope.get("root_path", "") + "/"
            answer = RedirectResponse(base, status_code=303)  # the secret leaves the address bar
            answer.set_cookie(COOKIE, session.id, httponly=True, samesite="strict", path=base)
            return answer
        if sessions.get(request.cookies.get(COOKIE)) is None:
            return PlainTextResponse("Open the URL the console printed (it carries this run's key).", status_code=403)
        return FileResponse(STATIC / "index.html", media_type="text/html")

    async def asset(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in ASSETS:
            return PlainTextResponse("not found", status_code=404)
        return FileResponse(STATIC / name, media_type=ASSETS[name])

    async def config(request: Request) -> Response:
        session_of(request)
        return JSONResponse({"agents": agents or [], "defaultToken": default_token is not None})

    async def do_connect(request: Request) -> Response:
        session, body = session_of(request), await _body(request)
        url, typed_token = str(body.get("url") or ""), str(body.get("token") or "") or None
        agent, answer = await connect(url, typed_token or default_token, allow_other_host=body.get("allowOtherHost") is True)
        if agent is not None:
            session.agents[agent.id] = agent
            answer.update(agent=agent.id, core=not agent.extensions, extensions=agent.extensions)
            answer["live"] = await live.push_mode(agent)
        return JSONResponse(answer)

    async def rpc(request: Request) -> Response:
        session, body = session_of(request), await _body(request)
        agent = session.agents.get(str(body.get("agent")))
        if agent is None:  # not an open proxy: only an Agent this page connected to
            raise Refused("connect to the Agent first: the console forwards only to Agents you connected to")
        params = body.get("params")
        return JSONResponse(await forward(agent, str(body.get("method")), params if isinstance(params, dict) else {}))

    async def do_watch(request: Request) -> Response:
        session, body = session_of(request), await _body(request)
        agent = session.agents.get(str(body.get("agent")))
        if agent is None:
            raise Refused("connect to the Agent first")
        receiver = f"http://{request.headers['host']}{request.scope.get('root_path', '')}/push/{agent.id}"
        return JSONResponse(await live.watch(agent, str(body.get("taskId")), receiver))

    async def stream(request: Request) -> Response:
        return StreamingResponse(live.events(session_of(request)), media_type="text/event-stream")

    async def push(request: Request) -> Response:
        found = sessions.by_agent(request.path_params["agent"])
        if found is None:
            return Response(status_code=410)  # Standard Webhooks: gone, the Runtime stops sending
        headers = {k.lower(): v for k, v in request.headers.items()}
        return Response(status_code=live.receive(*found, await request.body(), headers))

    async def refused(request: Request, exc: Exception) -> Response:
        return JSONResponse({"error": str(exc)}, status_code=400)

    app = Starlette(
        routes=[
            Route("/", page), Route("/static/{name}", asset), Route("/api/config", config),
            Route("/api/connect", do_connect, methods=["POST"]), Route("/api/rpc", rpc, methods=["POST"]),
            Route("/api/watch", do_watch, methods=["POST"]), Route("/api/events", stream),
            Route("/push/{agent}", push, methods=["POST"]),
        ],
        exception_handlers={Refused: refused},
    )  # fmt: skip
    return Guard(app, secret=key)


async def _body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if len(raw) > MAX_BODY:
        raise Refused("the request is too large")
    try:
        body = json.loads(raw)
    except ValueError:
        raise Refused("the request is not JSON") from None
    if not isinstance(body, dict):
        raise Refused("the request is not a JSON object")
    return body
