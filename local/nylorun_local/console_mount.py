"""`nylorun serve` serves the console at /console beside the api (locally only: the api function never does)."""

from __future__ import annotations

from typing import Any

from nylorun_client.console import console_app
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.types import Receive, Scope, Send

PREFIX = "/console"


def with_console(api: Any, key: str, *, agents: list[str], token: str | None) -> Any:
    """The api app, with /console/… answered by the console (its key in the printed URL, `token` its default)."""
    console = Starlette(routes=[Mount(PREFIX, app=console_app(key, agents=agents, token=token))])

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and (path == PREFIX or path.startswith(PREFIX + "/")):
            await console(scope, receive, send)
        else:
            await api(scope, receive, send)

    return app
