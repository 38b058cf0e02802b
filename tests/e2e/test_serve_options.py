"""`nylorun serve` as a user starts it: a subprocess with options, called over real HTTP, stopped with ^C."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import A2A, nylorun_serve, user_message

pytestmark = pytest.mark.e2e

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    env = {**os.environ, "NYLORUN_AGENTS": "slow_agent:agent", "PYTHONPATH": str(HERE)}
    args = ["--auth", "none", "--no-push", "--wait-ms", "1000"]
    with nylorun_serve(args, "slow/.well-known/agent-card.json", env=env) as base:
        yield base


def call(url: str, method: str, params: dict) -> dict:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    response = httpx.post(url, json=body, headers=A2A, timeout=30)
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_no_push_turns_push_off_in_the_card_and_the_methods(served: str) -> None:
    # When: the card is read, and a push config is created, on a Runtime started with --no-push
    card = httpx.get(f"{served}/echo/.well-known/agent-card.json", timeout=10).json()
    task = call(f"{served}/echo/", "SendMessage", {"message": user_message("hi")})["result"]["task"]
    created = call(f"{served}/echo/", "CreateTaskPushNotificationConfig", {"taskId": task["id"], "url": "https://h.example.com/x"})
    # Then: the card says so, and every push method answers -32003
    assert card["capabilities"]["pushNotifications"] is False
    assert created["error"]["code"] == -32003, created


def test_wait_ms_bounds_a_blocking_send(served: str) -> None:
    url = f"{served}/slow/"
    # When: a blocking SendMessage reaches a turn that takes 3 s, with --wait-ms 1000
    started = time.monotonic()
    answer = call(url, "SendMessage", {"message": user_message("go", f"m-{uuid.uuid4()}")})["result"]["task"]
    waited = time.monotonic() - started
    # Then: the answer is the task still working, before the turn could have ended
    assert answer["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"), answer["status"]
    assert waited < 3
    # And the turn still ends, as GetTask shows
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        task = call(url, "GetTask", {"id": answer["id"]})["result"]
        if task["status"]["state"] == "TASK_STATE_COMPLETED":
            break
        time.sleep(0.2)
    assert task["status"]["message"]["parts"][0]["text"] == "late"


def test_serve_does_not_show_the_push_secret(tmp_path: Path) -> None:
    # Given a Runtime whose deliveries are signed with each caller's own key (the default), from a push secret given
    # on the command line (whoever holds it can sign any subject's deliveries)
    secret = "whsec_" + "c2VjcmV0LWZvci10aGUtc2VydmUtdGVzdC0xMjM0NTY="
    out = tmp_path / "serve.out"
    with out.open("w") as said, nylorun_serve(["--push-secret", secret], "echo/.well-known/agent-card.json",
                                               stdout=said, stderr=said):  # fmt: skip
        pass
    # Then what it printed shows no secret, and tells a receiver how to get its own key
    text = out.read_text()
    assert secret not in text and "whsec_" not in text
    assert "nylorun webhooks --from" in text and "each caller's own key" in text, text
