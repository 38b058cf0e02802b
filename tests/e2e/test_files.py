"""Files (Profile v2: `url` file parts in and out; files/v1 on each file artifact), with the a2a-sdk client
as the caller: a raw file and a url file in, a versioned output out, downloaded by its presigned URL."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from a2a.client import ClientCallContext, ClientConfig, create_client
from a2a.types import Message, Part, Role, SendMessageRequest
from conftest import ALICE, rpc, user_message
from fastapi.testclient import TestClient
from google.protobuf import json_format
from nylorun.engine import Agent, Skill, Turn
from nylorun.wiring import Runtime
from nylorun_local.runtime import LocalRuntime

FILES = "https://docs.nylorun.com/a2a/files/v1"
SERVED = b"bytes served over http \x00\x01\x02"


@pytest.fixture(scope="module")
def file_server() -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.startswith("/missing"):
                self.send_response(404)
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(SERVED)))
            self.end_headers()
            self.wfile.write(SERVED)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


@pytest.fixture(scope="module")
def seen(local_runtime: LocalRuntime) -> dict[str, Any]:
    """A test agent that reads the caller's files and writes one output twice at one path."""
    record: dict[str, Any] = {}
    agent = Agent(
        name="t-files",
        description="reads files, writes a report twice",
        skills=[Skill(id="f", name="f", description="f", tags=["files"])],
        input_modes=["text/plain", "application/octet-stream", "image/*"],
    )

    @agent.turn
    def run(turn: Turn) -> None:
        record[turn.task_id] = [
            {"name": f.name, "size": f.size, "sha256": f.sha256, "read": hashlib.sha256(f.read()).hexdigest()}
            for f in turn.files
        ]
        turn.write_file("out/report.txt", "version one", kind="report", media_type="text/plain")
        turn.write_file("out/report.txt", "version two, longer", kind="report", media_type="text/plain")
        turn.reply("read and written")

    local_runtime.add_agent(agent)
    return record


def test_files_in_and_a_versioned_file_out(local_runtime: LocalRuntime, seen: dict[str, Any], file_server: str) -> None:
    raw = b"\x89PNG fake image bytes"

    async def body() -> dict[str, Any]:
        http = httpx.AsyncClient(headers={"Authorization": f"Bearer {ALICE}"}, timeout=60)
        client = await create_client(local_runtime.agent_url("t-files"), client_config=ClientConfig(streaming=False, httpx_client=http))
        # Given a message with a raw file and a url file
        message = Message(
            message_id=str(uuid.uuid4()),
            role=Role.ROLE_USER,
            parts=[
                Part(text="here are two files"),
                Part(raw=raw, media_type="image/png", filename="pic.png"),
                Part(url=f"{file_server}/data.bin", media_type="application/octet-stream", filename="data.bin"),
            ],
        )
        result: dict[str, Any] = {}
        context = ClientCallContext(service_parameters={"A2A-Extensions": FILES})
        async for response in client.send_message(SendMessageRequest(message=message), context=context):
            result = json_format.MessageToDict(response)
        await client.close()
        await http.aclose()
        return result["task"]

    task = asyncio.run(body())
    # Then the agent read both files, with the right sizes and digests
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    files = {f["name"]: f for f in seen[task["id"]]}
    assert files["pic.png"]["read"] == files["pic.png"]["sha256"] == hashlib.sha256(raw).hexdigest()
    assert files["data.bin"]["read"] == files["data.bin"]["sha256"] == hashlib.sha256(SERVED).hexdigest()
    assert files["data.bin"]["size"] == len(SERVED)
    # And GetTask shows one artifact for the path, at version 2, with its size and sha256
    got = rpc(local_runtime.agent_url("t-files"), "GetTask", {"id": task["id"]},
              headers={"A2A-Version": "1.0", "Authorization": f"Bearer {ALICE}", "A2A-Extensions": FILES})["result"]
    assert len(got["artifacts"]) == 1
    artifact = got["artifacts"][0]
    expected = b"version two, longer"
    assert artifact["metadata"][FILES] == {
        "kind": "report", "version": 2, "size": len(expected), "sha256": hashlib.sha256(expected).hexdigest(),
        "path": "out/report.txt",
    }
    assert FILES in artifact["extensions"]
    part = artifact["parts"][0]
    assert part["mediaType"] == "text/plain" and part["filename"] == "report.txt"
    # And the presigned URL downloads exactly version 2's bytes
    assert httpx.get(part["url"]).content == expected
    # And the caller's raw file is kept by reference in history (downloadable), not inlined
    first = got["history"][0]["parts"][1]
    assert "raw" not in first and httpx.get(first["url"]).content == raw


def test_without_files_v1_the_artifact_has_no_file_metadata(local_runtime: LocalRuntime, seen: dict[str, Any]) -> None:
    task = rpc(local_runtime.agent_url("t-files"), "SendMessage", {"message": user_message("no files")})["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    artifact = task["artifacts"][0]
    assert "metadata" not in artifact and "extensions" not in artifact
    assert httpx.get(artifact["parts"][0]["url"]).content == b"version two, longer"


def test_an_expired_url_is_regenerated_on_get_task(local_runtime: LocalRuntime, seen: dict[str, Any]) -> None:
    url = local_runtime.agent_url("t-files")
    task = rpc(url, "SendMessage", {"message": user_message("go")})["result"]["task"]
    first = task["artifacts"][0]["parts"][0]["url"]
    time.sleep(1.1)  # presigned URLs carry their signing time to the second
    again = rpc(url, "GetTask", {"id": task["id"]})["result"]["artifacts"][0]["parts"][0]["url"]
    # Then each read hands out a newly signed URL with the configured lifetime
    one, two = parse_qs(urlsplit(first).query), parse_qs(urlsplit(again).query)
    assert two["X-Amz-Date"][0] > one["X-Amz-Date"][0]
    assert two["X-Amz-Expires"][0] == str(local_runtime.runtime.settings.file_url_expiry_seconds)
    assert httpx.get(again).content == b"version two, longer"


def _message(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"messageId": f"m-{uuid.uuid4()}", "role": "ROLE_USER", "parts": [{"text": "file"}, *parts]}


def test_a_too_large_inbound_file_is_invalid_params(local_runtime: LocalRuntime, table_items: Any) -> None:
    # Given a Runtime whose inbound file limit is 1 KB
    runtime = local_runtime.runtime
    small = Runtime(settings=runtime.settings.model_copy(update={"max_file_bytes_in": 1024}), registry=runtime.registry)
    client = TestClient(small.app())
    before = table_items()
    raw = base64.b64encode(b"x" * 2048).decode()
    # When a 2 KB raw file arrives
    answer = client.post("/v1/a2a/agents/t-files", headers={"A2A-Version": "1.0", "Authorization": f"Bearer {ALICE}"},
                         json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                               "params": {"message": _message({"raw": raw, "mediaType": "image/png", "filename": "big.png"})}}).json()
    # Then -32602 saying so, and nothing written
    assert answer["error"]["code"] == -32602 and "too large" in answer["error"]["message"]
    assert table_items() == before


@pytest.mark.parametrize("url", ["http://example.com/f.bin", "https://10.0.0.7/f.bin", "https://169.254.169.254/latest"])
def test_a_forbidden_url_host_is_invalid_params(local_runtime: LocalRuntime, seen: dict[str, Any], url: str, table_items: Any) -> None:
    before = table_items()
    answer = rpc(local_runtime.agent_url("t-files"), "SendMessage",
                 {"message": _message({"url": url, "mediaType": "application/octet-stream"})})
    assert answer["error"]["code"] == -32602 and "not allowed" in answer["error"]["message"]
    assert table_items() == before


def test_a_media_type_the_agent_does_not_take_is_content_type_not_supported(local_runtime: LocalRuntime, table_items: Any) -> None:
    before = table_items()
    raw = base64.b64encode(b"%PDF-1.7").decode()
    answer = rpc(local_runtime.agent_url("echo"), "SendMessage",
                 {"message": _message({"raw": raw, "mediaType": "application/pdf", "filename": "a.pdf"})})
    assert answer["error"]["code"] == -32005
    assert table_items() == before


def test_a_url_file_that_cannot_be_fetched_fails_the_turn_naming_it(local_runtime: LocalRuntime, seen: dict[str, Any], file_server: str) -> None:
    answer = rpc(local_runtime.agent_url("t-files"), "SendMessage",
                 {"message": _message({"url": f"{file_server}/missing.csv", "mediaType": "text/plain", "filename": "missing.csv"})})
    task = answer["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    text = task["status"]["message"]["parts"][0]["text"]
    assert "missing.csv" in text and "HTTP 404" in text
