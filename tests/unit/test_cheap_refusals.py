"""A body over the request budget is refused from its length, before any of it is parsed: as `nylorun serve` gets it
(with Content-Length, or chunked without one) and as Lambda gets it through Mangum (the body whole). Parsing 2.1 MB
of `{}` parts took seconds of CPU for an answer that was always "too large"; here the JSON-RPC decoder is counted,
not timed. The app runs in-process over the in-memory adapters (no network)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fastapi.testclient import TestClient
from mangum import Mangum
from nylorun.api.app import create_app
from nylorun.api.auth import Authenticator
from nylorun.engine.agent import AgentRegistry
from nylorun.protocol import jsonrpc
from unit_support import AGENT, Runtime, agent_of, runtime

A2A = {"A2A-Version": "1.0", "Content-Type": "application/json"}
SAMPLE_EVENT = Path(__file__).parents[2] / "events" / "api-send-message.json"


def empty_parts_body(size: int) -> bytes:
    """A SendMessage whose message is `size` bytes of empty parts: `{}` after `{}`, as in the finding."""
    head = b'{"jsonrpc":"2.0","id":"big","method":"SendMessage","params":{"message":{"messageId":"m-big",'
    head += b'"role":"ROLE_USER","parts":['
    tail = b"]}}}"
    count = (size - len(head) - len(tail) + 1) // 3
    return head + b",".join([b"{}"] * count) + tail


@pytest.fixture()
def decoded(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of every body the JSON-RPC decoder was handed."""
    calls: list[int] = []
    real = jsonrpc.decode

    def counting(body: bytes, *args: Any, **kwargs: Any) -> jsonrpc.Request:
        calls.append(len(body))
        return real(body, *args, **kwargs)

    monkeypatch.setattr(jsonrpc, "decode", counting)
    return calls


@pytest.fixture()
def rt() -> Runtime:
    return runtime(agent_of(lambda turn: turn.reply("hi")))


def app_of(rt: Runtime) -> Any:
    registry = AgentRegistry([agent_of(lambda turn: turn.reply("hi"))])
    return create_app(rt.service, registry, rt.settings, Authenticator(rt.settings), hop_to_thread=False)


def assert_too_large(answer: dict[str, Any], limit: int) -> None:
    assert answer["error"]["code"] == -32600, answer
    assert answer["error"]["message"] == f"Payload too large: the limit is {limit} bytes"


def test_a_2_1_mb_body_is_refused_by_its_content_length_without_being_parsed(rt: Runtime, decoded: list[int]) -> None:
    # Given a 2.1 MB SendMessage of empty parts, its length declared
    body = empty_parts_body(2_100_000)
    client = TestClient(app_of(rt))
    # When it is posted
    response = client.post(f"/v1/a2a/agents/{AGENT}", content=body, headers=A2A)
    # Then it is "Payload too large" (-32600), the decoder never ran, and no task was made
    assert response.status_code == 200
    assert_too_large(response.json(), rt.settings.max_request_bytes)
    assert decoded == []
    listed = client.post(f"/v1/a2a/agents/{AGENT}", content=b'{"jsonrpc":"2.0","id":1,"method":"ListTasks"}', headers=A2A)
    assert listed.json()["result"]["tasks"] == []


def test_a_2_1_mb_chunked_body_is_refused_once_the_budget_is_read_without_being_parsed(
    rt: Runtime, decoded: list[int]
) -> None:
    # Given the same body sent without Content-Length, in 64 KiB chunks, so only counting the bytes can stop it
    body = empty_parts_body(2_100_000)

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(body), 64 * 1024):
            yield body[start : start + 64 * 1024]

    # When it is posted
    response = TestClient(app_of(rt)).post(f"/v1/a2a/agents/{AGENT}", content=chunks(), headers=A2A)
    # Then it is "Payload too large" and the decoder never ran
    assert_too_large(response.json(), rt.settings.max_request_bytes)
    assert decoded == []


def test_a_2_1_mb_body_through_mangum_is_refused_without_being_parsed(rt: Runtime, decoded: list[int]) -> None:
    # Given the sample API Gateway event with a 2.1 MB body (Lambda hands the body whole) and no Content-Length
    event = json.loads(SAMPLE_EVENT.read_text())
    event["rawPath"] = event["requestContext"]["http"]["path"] = f"/v1/a2a/agents/{AGENT}/"
    event["pathParameters"] = {"agent": f"{AGENT}/"}
    event["body"] = empty_parts_body(2_100_000).decode()
    handler = Mangum(app_of(rt), lifespan="off")
    # When the api function's handler serves it
    result = handler(event, SimpleNamespace(aws_request_id="req-unit", function_name="api"))
    # Then it is "Payload too large" and the decoder never ran
    assert result["statusCode"] == 200
    assert_too_large(json.loads(result["body"]), rt.settings.max_request_bytes)
    assert decoded == []


def test_a_body_under_the_budget_is_still_parsed_and_answered(rt: Runtime, decoded: list[int]) -> None:
    # Given a 300 KB text message: under the body budget, over what one stored message may hold
    message = {"messageId": "m-300k", "role": "ROLE_USER", "parts": [{"text": "a" * 300_000}]}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}).encode()
    # When it is posted
    response = TestClient(app_of(rt)).post(f"/v1/a2a/agents/{AGENT}", content=body, headers=A2A)
    # Then it was decoded once and refused naming the message (-32602), as before: the budget hides no real error
    assert decoded == [len(body)]
    assert response.json()["error"]["code"] == -32602
    assert "message is too large" in response.json()["error"]["message"]


def test_a_message_of_60000_bad_parts_is_invalid_params_naming_the_first_ones(rt: Runtime) -> None:
    # Given a 180 KB SendMessage (under the budget) of about 60,000 empty parts, each one a field violation
    body = empty_parts_body(180_000)
    # When it is posted
    response = TestClient(app_of(rt)).post(f"/v1/a2a/agents/{AGENT}", content=body, headers=A2A)
    # Then it is -32602 naming the first 20 bad parts and how many there were, not an internal error (-32603)
    # from an answer that listed all 60,000 and outgrew the 5 MiB limit
    error = response.json()["error"]
    assert error["code"] == -32602, error["message"]
    (bad_request,) = [item for item in error["data"] if item["@type"].endswith("BadRequest")]
    assert [v["field"] for v in bad_request["fieldViolations"]] == [f"message.parts[{i}]" for i in range(20)]
    assert f"{body.count(b'{}')} problems in all; the first 20 are listed" in error["message"]
