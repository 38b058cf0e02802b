"""JSON-RPC to a connected Agent, kept raw for the debug drawer and read into the views the page draws."""

from __future__ import annotations

import secrets
import uuid
from typing import Any

import httpx
from a2a.types import Message, Role, Task
from google.protobuf import json_format

from nylorun_client import safe
from nylorun_client.client import CARD_PATH, PROFILE_V2, agent_url
from nylorun_client.console.card import card_checks, jsonrpc_interface, origin
from nylorun_client.console.sessions import Connected
from nylorun_client.errors import error_words
from nylorun_client.views import message_view, read_parts, task_view

TIMEOUT = httpx.Timeout(60.0, connect=10.0)
METHODS = frozenset({"SendMessage", "GetTask", "ListTasks", "CancelTask", "CreateTaskPushNotificationConfig"})


class Refused(Exception):
    """Something the console will not do, in words for the page (never a stack trace)."""


def _exchange(request: httpx.Request, response: httpx.Response | None, body: Any, error: str | None) -> dict[str, Any]:
    """One request and its answer as the drawer shows them; the bearer token never leaves the server."""
    headers = {k: ("Bearer •••" if k.lower() == "authorization" else v) for k, v in request.headers.items()}
    said: Any = None
    if response is not None:
        try:
            said = response.json()
        except ValueError:
            said = response.text[:4000]
    return {
        "request": {"method": request.method, "url": str(request.url), "headers": headers, "body": body},
        "response": None if response is None else {
            "status": response.status_code, "headers": dict(response.headers), "body": said,
        },
        "error": error,
    }  # fmt: skip


async def _call(request: httpx.Request, body: Any) -> tuple[dict[str, Any], Any]:
    """Send; returns the drawer's record and the JSON answer (None on failure, with the reason in `error`)."""
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        try:
            response = await http.send(request)
        except httpx.HTTPError as exc:
            return _exchange(request, None, body, f"{type(exc).__name__}: {exc or 'no answer'} ({request.url})"), None
    record = _exchange(request, response, body, None)
    answer = record["response"]["body"]
    if response.status_code != 200:
        record["error"] = f"HTTP {response.status_code} from {request.url}" + _said(answer, response.status_code)
        return record, None
    if isinstance(answer, dict) and answer.get("error") is not None:
        record["error"] = error_words(answer["error"])
        return record, None
    return record, answer


def _said(answer: Any, status: int) -> str:
    message = error_words(answer.get("error")) if isinstance(answer, dict) and answer.get("error") else ""
    hint = " (the token was refused or missing: enter one, or set $NYLORUN_TOKEN)" if status in (401, 403) else ""
    return (f": {message}" if message else "") + hint


async def connect(url: str, token: str | None, *, allow_other_host: bool = False) -> tuple[Connected | None, dict[str, Any]]:
    """Read the card at `url` (an Agent URL or its card URL) and check it; connected only when it can be used."""
    typed = agent_url(url)
    if origin(typed).split("://")[0] not in ("http", "https") or "://" not in typed:
        raise Refused(f"{url!r} is not an http(s) URL of an Agent or of its card")
    request = httpx.Request("GET", typed + CARD_PATH, headers={"Accept": "application/json"})
    record, card = await _call(request, None)
    page: dict[str, Any] = {"exchanges": [record], "url": typed}
    if not isinstance(card, dict):
        page["error"] = record["error"] or "the card is not a JSON object"
        return None, page
    checks = card_checks(card, typed)
    page.update(card=card, checks=[c.to_json() for c in checks])
    interface = jsonrpc_interface(card)
    if interface is None:
        page["error"] = "the card offers no JSON-RPC interface for A2A 1.0: the console cannot talk to it"
        return None, page
    if origin(interface) != origin(typed) and not allow_other_host:
        page["otherHost"] = origin(interface)
        page["error"] = (f"the card's interface is on {origin(interface)}, not {origin(typed)} that you typed: "
                         "your token is sent there only if you say so")  # fmt: skip
        return None, page
    declared = {e.get("uri") for e in (card.get("capabilities") or {}).get("extensions") or [] if isinstance(e, dict)}
    agent = Connected(
        id=secrets.token_urlsafe(16), url=typed, rpc_url=interface, token=token, card=card,
        extensions=[uri for uri in PROFILE_V2 if uri in declared],
    )  # fmt: skip
    return agent, page


async def forward(agent: Connected, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """One JSON-RPC call to the Agent, with A2A-Version, the Profile extensions it declares and the bearer token."""
    if method not in METHODS:
        raise Refused(f"the console does not send {method!r}")
    body = {"jsonrpc": "2.0", "id": uuid.uuid4().hex[:8], "method": method, "params": params}
    headers = {"A2A-Version": "1.0", "Content-Type": "application/json"}
    if agent.extensions:  # core tier: no A2A-Extensions, so nothing asks for what the Agent does not know
        headers["A2A-Extensions"] = ", ".join(agent.extensions)
    if agent.token:
        headers["Authorization"] = f"Bearer {agent.token}"
    record, answer = await _call(httpx.Request("POST", agent.rpc_url, headers=headers, json=body), body)
    page: dict[str, Any] = {"exchanges": [record]}
    if answer is None:
        page["error"] = record["error"]
        return page
    page["view"] = view_of(method, answer.get("result"))
    return page


def view_of(method: str, result: Any) -> Any:
    """What a person reads (nylorun_client.views), with terminal escapes removed; None for what it cannot read."""
    if not isinstance(result, dict):
        return None
    try:
        if method == "ListTasks":
            return {"tasks": [_task(t) for t in result.get("tasks") or []], "nextPageToken": result.get("nextPageToken", "")}
        if method == "SendMessage" and isinstance(result.get("message"), dict):
            message = json_format.ParseDict(result["message"], Message(), ignore_unknown_fields=True)
            return safe.scrub(message_view(message).to_json())
        if method == "SendMessage":
            return _task(result.get("task") or {})
        if method in ("GetTask", "CancelTask"):
            return _task(result)
    except json_format.ParseError as exc:
        raise Refused(f"the Agent's answer is not an A2A 1.0 {method} result: {exc}") from None
    return None


def _task(data: dict[str, Any]) -> dict[str, Any]:
    task = json_format.ParseDict(data, Task(), ignore_unknown_fields=True)
    view = task_view(task).to_json()
    view["history"] = [
        {"role": "you" if m.role == Role.ROLE_USER else "agent", "text": read_parts(m.parts)[0]} for m in task.history
    ]
    view["timestamp"] = task.status.timestamp.ToJsonString() if task.status.HasField("timestamp") else ""
    return dict(safe.scrub(view))
