"""The api function's real `handler` driven in-process with the API Gateway (HTTP API, payload 2.0) sample events,
through Mangum, as deployed: NYLORUN_AUTH=jwt, the caller is the JWT authorizer's `sub` claim.
"""

from __future__ import annotations

import base64
import copy
import importlib.util
import json
import uuid
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from nylorun_local.lambda_shim import LambdaContext
from nylorun_local.runtime import LocalRuntime

REPO_ROOT = Path(__file__).resolve().parents[2]

EVENTS = REPO_ROOT / "events"
Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


def load_event(name: str) -> dict[str, Any]:
    return dict(json.loads((EVENTS / name).read_text()))


@pytest.fixture(scope="module")
def api_module(local_runtime: LocalRuntime) -> ModuleType:
    """functions/api/app.py imported under its own name with NYLORUN_AUTH=jwt (the template's value).

    The local Runtime's env says `dev`; the module builds its runtime from env at import, so set jwt just for
    the import and restore the env afterwards (other tests keep the dev app).
    """
    with pytest.MonkeyPatch.context() as env:
        env.setenv("NYLORUN_AUTH", "jwt")
        path = REPO_ROOT / "functions/api/app.py"
        spec = importlib.util.spec_from_file_location(f"nylorun_api_jwt_{uuid.uuid4().hex}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    assert module.runtime.settings.auth == "jwt"
    return module


@pytest.fixture()
def call(api_module: ModuleType) -> Callable[[dict[str, Any]], tuple[int, dict[str, str], Any]]:
    def run(event: dict[str, Any]) -> tuple[int, dict[str, str], Any]:
        out = api_module.handler(event, LambdaContext("nylorun-local-ApiFunction"))
        body = out.get("body") or ""
        if out.get("isBase64Encoded"):
            body = base64.b64decode(body).decode()
        headers = {k.lower(): v for k, v in (out.get("headers") or {}).items()}
        return int(out["statusCode"]), headers, json.loads(body) if body else None

    return run


def rpc_event(method: str, params: dict[str, Any], sub: str | None, agent: str = "echo") -> dict[str, Any]:
    """The sample SendMessage event with another JSON-RPC body and the authorizer's `sub` (None: no claims)."""
    event = copy.deepcopy(load_event("api-send-message.json"))
    event["body"] = json.dumps(
        {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method, "params": params}
    )
    event["rawPath"] = event["requestContext"]["http"]["path"] = f"/v1/a2a/agents/{agent}"
    event["pathParameters"] = {"agent": agent}
    if sub is None:
        del event["requestContext"]["authorizer"]
    else:
        event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = sub
    return event


def test_the_sample_card_event_returns_the_agent_card(call: Any) -> None:
    # Given the sample GET of echo's card (no authorizer on this route)
    event = load_event("api-get-card.json")
    # When the api handler serves it
    status, headers, card = call(event)
    # Then it is echo's card, its URL on the API's public host
    assert status == 200
    assert headers["content-type"].startswith("application/json")
    assert card["name"] == "echo"
    assert card["supportedInterfaces"] == [
        {
            "url": "https://abc123example.execute-api.us-east-1.amazonaws.com/v1/a2a/agents/echo/",
            "protocolBinding": "JSONRPC",
            "protocolVersion": "1.0",
        }
    ]


def test_send_message_makes_a_task_owned_by_the_jwt_subject(call: Any, local_runtime: LocalRuntime) -> None:
    # Given the sample SendMessage event, as the JWT authorizer passes it on, for a new subject
    sub = f"user-{uuid.uuid4()}"
    event = load_event("api-send-message.json")
    body = json.loads(event["body"])
    body["params"]["message"]["messageId"] = f"m-{uuid.uuid4()}"
    event["body"] = json.dumps(body)
    event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = sub
    # When the api handler runs it (blocking: it waits for the turn)
    status, _, answer = call(event)
    # Then it answers a JSON-RPC result: the COMPLETED task that echoes the text
    assert status == 200
    assert answer["id"] == body["id"] and "error" not in answer, answer
    task = answer["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["history"][-1]["parts"] == [{"text": "hello"}]
    # And the task belongs to the token's subject, on the agent of the path
    assert local_runtime.runtime is not None
    record = local_runtime.runtime.store.get(task["id"])
    assert record is not None and (record.owner.subject, record.owner.agent) == (sub, "echo")

    # When the same subject gets the task through the same handler
    status, _, same = call(rpc_event("GetTask", {"id": task["id"]}, sub))
    # Then it sees it
    assert status == 200 and same["result"]["id"] == task["id"]
    assert same["result"]["status"]["state"] == "TASK_STATE_COMPLETED"

    # When another subject asks for it
    status, _, other = call(rpc_event("GetTask", {"id": task["id"]}, f"user-{uuid.uuid4()}"))
    # Then it is "not found" (-32001), not forbidden: nothing leaks
    assert status == 200
    assert other["error"]["code"] == -32001
    assert "result" not in other


def test_a_request_without_jwt_claims_is_unauthenticated(call: Any, table_items: Any) -> None:
    # Given a SendMessage event that no authorizer verified (no claims), with a bearer header
    message_id = f"m-{uuid.uuid4()}"
    event = rpc_event(
        "SendMessage",
        {"message": {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": "hi"}]}},
        sub=None,
    )
    assert event["headers"]["authorization"].startswith("Bearer ")
    # When the api handler runs it
    status, headers, body = call(event)
    # Then it is a 401 (jwt mode reads only the verified claims, never the raw header) and nothing was written
    assert status == 401
    assert headers["www-authenticate"].startswith("Bearer")
    assert "error" in body
    assert not any(message_id in json.dumps(item) for item in table_items())
