"""The console's front door, in process: the per-run key opens a session (HttpOnly, SameSite=Strict cookie), a
foreign Host or a missing/foreign Origin is refused, and it forwards only to Agents the page connected to."""

from __future__ import annotations

from typing import Any

from nylorun_client.console import console_app
from starlette.testclient import TestClient

BASE = "http://127.0.0.1:8090"
ORIGIN = {"Origin": BASE}


def opened() -> TestClient:
    client = TestClient(console_app("the-key"), base_url=BASE)
    client.get("/?k=the-key", follow_redirects=False)
    return client


def test_the_key_opens_a_session_with_a_strict_httponly_cookie_and_the_page_has_a_self_only_csp() -> None:
    # Given
    client = TestClient(console_app("the-key"), base_url=BASE)
    # When
    without = client.get("/")
    first = client.get("/?k=the-key", follow_redirects=False)
    page = client.get("/")
    # Then
    assert without.status_code == 403
    cookie = first.headers["set-cookie"].lower()
    assert first.status_code == 303 and "httponly" in cookie and "samesite=strict" in cookie
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


def test_it_is_not_an_open_proxy() -> None:
    # Given: a session that connected to nothing
    client = opened()
    # When
    answer = client.post("/api/rpc", json={"agent": "x", "method": "GetTask", "params": {"id": "t"}}, headers=ORIGIN)
    # Then
    assert answer.status_code == 400
    assert "only to Agents you connected to" in answer.json()["error"]


def test_api_calls_need_the_session() -> None:
    # Given: no visit with the key
    client = TestClient(console_app("the-key"), base_url=BASE)
    # When
    answer = client.post("/api/rpc", json={"agent": "x", "method": "GetTask"}, headers=ORIGIN)
    # Then
    assert answer.status_code == 400
    assert "open the URL the console printed" in answer.json()["error"]
