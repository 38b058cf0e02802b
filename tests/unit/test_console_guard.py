"""The console's front door, in process: the per-run key opens a session (HttpOnly, SameSite=Strict cookie), a
foreign Host or a missing/foreign Origin is refused, and it forwards only to Agents the page connected to."""

from __future__ import annotations

import functools
import json
from typing import Any

import httpx
import pytest
from nylorun_client.console import console_app
from nylorun_client.console.guard import Guard
from nylorun_client.console.sessions import IDLE_SECONDS, Sessions
from starlette.testclient import TestClient

BASE = "http://127.0.0.1:8090"
ORIGIN = {"Origin": BASE}
AGENT = "http://agent.test/a2a/"
CARD = {
    "name": "mock", "description": "An Agent answered in process.", "version": "1.0.0",
    "supportedInterfaces": [{"url": AGENT, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
    "capabilities": {}, "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
    "skills": [{"id": "s", "name": "S", "description": "d", "tags": ["t"]}],
}  # fmt: skip


def opened(app: Guard | None = None) -> TestClient:
    client = TestClient(app or console_app("the-key"), base_url=BASE)
    client.get("/?k=the-key", follow_redirects=False)
    return client


@pytest.fixture()
def agent_calls(monkeypatch: pytest.MonkeyPatch) -> list[httpx.Request]:
    """The console's calls to Agents answered in process (no network): a card at AGENT, and {} to JSON-RPC."""
    calls: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        if request.method == "GET":
            return httpx.Response(200, json=CARD)
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": json.loads(request.content)["id"], "result": {}})

    client = functools.partial(httpx.AsyncClient, transport=httpx.MockTransport(answer))
    monkeypatch.setattr("nylorun_client.console.forward.httpx.AsyncClient", client)
    return calls


def test_the_key_opens_a_session_with_a_strict_httponly_cookie_and_the_page_has_a_self_only_csp() -> None:
    # Given
    client = TestClient(console_app("the-key"), base_url=BASE)
    # When
    without = client.get("/")
    wrong = client.get("/?k=not-the-key", follow_redirects=False)
    first = client.get("/?k=the-key", follow_redirects=False)
    page = client.get("/")
    # Then
    assert without.status_code == 403
    assert wrong.status_code == 403 and "set-cookie" not in wrong.headers
    cookie = [part.strip().lower() for part in first.headers["set-cookie"].split(";")]
    assert first.status_code == 303 and first.headers["location"] == "/"
    assert "httponly" in cookie and "samesite=strict" in cookie and "path=/" in cookie
    assert page.status_code == 200
    assert page.headers["content-security-policy"].startswith("default-src 'self'")


def test_a_host_other_than_loopback_is_refused() -> None:
    # Given: a page on another name that resolves to 127.0.0.1 (DNS rebinding)
    client = opened()
    # When
    answer = client.get("/", headers={"Host": "evil.example:8090"})
    # Then
    assert answer.status_code == 421
    assert "loopback" in answer.json()["error"]


def test_a_write_without_the_consoles_origin_is_refused() -> None:
    # Given
    client = opened()
    body: dict[str, Any] = {"url": "http://127.0.0.1:9/"}
    # When
    missing = client.post("/api/connect", json=body)
    foreign = client.post("/api/connect", json=body, headers={"Origin": "http://evil.example"})
    # Then
    assert missing.status_code == 403 and "no Origin" in missing.json()["error"]
    assert foreign.status_code == 403 and "evil.example" in foreign.json()["error"]


def test_it_is_not_an_open_proxy(agent_calls: list[httpx.Request]) -> None:
    # Given: one page connected to an Agent, and another page (its own session) that connected to nothing
    app = console_app("the-key")
    mine, other = opened(app), opened(app)
    connected = mine.post("/api/connect", json={"url": AGENT}, headers=ORIGIN).json()
    call = {"agent": connected["agent"], "method": "GetTask", "params": {"id": "t"}}
    # When: the other page names the first page's Agent, an Agent by URL, or nothing
    borrowed = other.post("/api/rpc", json=call, headers=ORIGIN)
    by_url = other.post("/api/rpc", json={**call, "agent": AGENT, "url": AGENT}, headers=ORIGIN)
    unknown = other.post("/api/rpc", json={**call, "agent": "x"}, headers=ORIGIN)
    # Then: each is refused in words and none reached the Agent; the page that connected is forwarded
    for refused in (borrowed, by_url, unknown):
        assert refused.status_code == 400
        assert "only to Agents you connected to" in refused.json()["error"]
    assert [c.method for c in agent_calls] == ["GET"]
    assert "error" not in mine.post("/api/rpc", json=call, headers=ORIGIN).json()
    assert [c.method for c in agent_calls] == ["GET", "POST"]


def test_api_calls_need_the_session(agent_calls: list[httpx.Request]) -> None:
    # Given: no visit with the key, or a cookie the console never gave
    app = console_app("the-key")
    stranger = TestClient(app, base_url=BASE)
    forged = TestClient(app, base_url=BASE, cookies={"nylorun_console": "made-up"})
    opened(app)  # another page has a session: it does not open one for these
    # When / Then: every call the page makes is refused in words, and nothing reaches an Agent
    for client in (stranger, forged):
        answers = [
            client.get("/api/config"),
            client.post("/api/connect", json={"url": AGENT}, headers=ORIGIN),
            client.post("/api/rpc", json={"agent": "x", "method": "GetTask"}, headers=ORIGIN),
            client.post("/api/watch", json={"agent": "x", "taskId": "t"}, headers=ORIGIN),
        ]
        for answer in answers:
            assert answer.status_code == 400
            assert "open the URL the console printed" in answer.json()["error"]
    assert agent_calls == []


def test_a_session_unused_for_12_hours_is_forgotten_with_its_agents() -> None:
    # Given: two pages' sessions, each connected to an Agent
    now = [1000.0]
    sessions = Sessions(clock=lambda: now[0])
    idle, used = sessions.new(), sessions.new()
    idle.agents["a-idle"] = used.agents["a-used"] = object()  # type: ignore[assignment]
    # When: 12 h pass, one page working all along and the other not
    now[0] += IDLE_SECONDS - 60
    assert sessions.get(used.id) is used
    now[0] += 120
    # Then: the idle one is gone (its page must open the printed URL again; its pushes find no one), the used one stays
    assert sessions.get(idle.id) is None
    assert sessions.by_agent("a-idle") is None
    assert sessions.get(used.id) is used
    assert sessions.by_agent("a-used") == (used, used.agents["a-used"])
