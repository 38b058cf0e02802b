"""End to end, raw HTTP: every kind of bad input gets its documented JSON-RPC error and changes nothing.

Design, non-negotiables: "Bad input gets a clear JSON-RPC error and changes nothing. No stack traces to
callers." Each test scans the whole tasks table before and after the bad request. Bad requests are built
around an otherwise valid `SendMessage` wherever possible, so a check that went missing would write a
task and the table comparison would catch it.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from conftest import ALICE, auth, rpc, user_message
from nylorun_local.runtime import LocalRuntime
from table_scope import TableScan, settled, snapshot

pytestmark = pytest.mark.e2e


ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
BAD_REQUEST = "type.googleapis.com/google.rpc.BadRequest"
REASONS = {
    -32700: "PARSE_ERROR",
    -32600: "INVALID_REQUEST",
    -32601: "METHOD_NOT_FOUND",
    -32602: "INVALID_PARAMS",
    -32001: "TASK_NOT_FOUND",
    -32004: "UNSUPPORTED_OPERATION",
    -32005: "CONTENT_TYPE_NOT_SUPPORTED",
    -32009: "VERSION_NOT_SUPPORTED",
}
# What must never reach a caller: a stack trace, a source file, an install path.
INTERNALS = re.compile(r"Traceback|File \"|\w\.py\b|site-packages|/opt/python|/work/|nylorun/")


# ---------------------------------------------------------------------------------------------- helpers
def post(
    url: str, content: bytes | str | Iterator[bytes], headers: dict[str, str] | None = None
) -> httpx.Response:
    return httpx.post(
        url,
        content=content,
        headers={"Content-Type": "application/json", **(auth() if headers is None else headers)},
        timeout=60,
    )


def envelope(method: str, params: Any = None, request_id: Any = "req-1") -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        body["params"] = params
    return body


def send_params(**message_fields: Any) -> dict[str, Any]:
    """Valid SendMessage params; `message_fields` override fields of the message."""
    return {"message": {**user_message(f"bad-input {uuid.uuid4()}"), **message_fields}}


def assert_no_internals(text: str) -> None:
    leaked = INTERNALS.search(text)
    assert leaked is None, f"response leaks internals ({leaked.group(0)!r}): {text[:500]}"


def assert_error(response: httpx.Response, code: int, request_id: Any = ...) -> dict[str, Any]:
    """A JSON-RPC error object with HTTP 200 (docs/protocol.md §1.3) and an ErrorInfo first in `data` (§5.1)."""
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json")
    assert_no_internals(response.text)
    body = response.json()
    assert body.get("jsonrpc") == "2.0", body
    assert "result" not in body, body
    if request_id is not ...:
        assert body.get("id") == request_id, body
    error = body["error"]
    assert error["code"] == code, body
    assert isinstance(error["message"], str) and error["message"]
    info = error["data"][0]
    assert info["@type"] == ERROR_INFO
    assert info["reason"] == REASONS[code]
    assert info["domain"] == "a2a-protocol.org"
    assert isinstance(info["metadata"], dict)
    return dict(error)


def violated_fields(error: dict[str, Any]) -> list[str]:
    bad_requests = [d for d in error["data"] if d.get("@type") == BAD_REQUEST]
    assert bad_requests, f"no google.rpc.BadRequest in error.data: {error}"
    violations = bad_requests[0]["fieldViolations"]
    assert all(isinstance(v.get("description"), str) and v["description"] for v in violations)
    return [v["field"] for v in violations]


@pytest.fixture()
def echo_url(agent_url: Callable[[str], str]) -> str:
    return agent_url("echo")


@pytest.fixture(scope="module")
def alice_task(local_runtime: LocalRuntime) -> dict[str, Any]:
    """A task alice owns (echo, completed), for the bad inputs that name an existing task."""
    answer = rpc(local_runtime.agent_url("echo"), "SendMessage", {"message": user_message("existing task")})
    return dict(answer["result"]["task"])


# ---------------------------------------------------------------------------------------------- envelope
@pytest.mark.parametrize(
    ("body", "code"),
    [
        pytest.param(b'{"jsonrpc": "2.0", "id": 1, "method": "SendMessage"', -32700, id="truncated-json"),
        pytest.param(b"this is not json", -32700, id="plain-text"),
        pytest.param(b"", -32700, id="empty-body"),
        pytest.param(b"\xff\xfe\x00garbage", -32700, id="not-utf8"),
        pytest.param(b"[]", -32600, id="empty-batch"),
        pytest.param(
            json.dumps(
                [envelope("SendMessage", send_params(), 1), envelope("SendMessage", send_params(), 2)]
            ),
            -32600,
            id="batch-of-two-sends",
        ),
        pytest.param(b'"SendMessage"', -32600, id="json-string"),
        pytest.param(b"42", -32600, id="json-number"),
        pytest.param(
            json.dumps({**envelope("SendMessage", send_params()), "jsonrpc": "1.0"}), -32600, id="jsonrpc-1.0"
        ),
        pytest.param(
            json.dumps({k: v for k, v in envelope("SendMessage", send_params()).items() if k != "jsonrpc"}),
            -32600,
            id="jsonrpc-missing",
        ),
        pytest.param(
            json.dumps({**envelope("SendMessage", send_params()), "method": 7}), -32600, id="method-number"
        ),
        pytest.param(
            json.dumps({**envelope("SendMessage", send_params()), "id": {"a": 1}}), -32600, id="id-object"
        ),
    ],
)
def test_malformed_envelope_is_refused_and_writes_nothing(
    echo_url: str, table_items: TableScan, body: bytes | str, code: int
) -> None:
    # Given
    before = settled(table_items)
    # When
    response = post(echo_url, body)
    # Then
    assert_error(response, code)
    assert snapshot(table_items) == before


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_a_body_that_is_not_declared_json_is_content_type_not_supported(
    echo_url: str, table_items: TableScan, content_type: str | None
) -> None:
    # Given: a well-formed SendMessage, sent as a web page's form or plain text would send it
    before = settled(table_items)
    headers = {**auth(), **({"Content-Type": content_type} if content_type else {})}
    # When
    response = httpx.post(echo_url, content=json.dumps(envelope("SendMessage", send_params())), headers=headers)
    # Then: -32005 (the A2A TCK's JSON-RPC error mapping), and nothing was written
    assert_error(response, -32005, None)
    assert snapshot(table_items) == before


@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8", "APPLICATION/JSON"])
def test_json_content_types_are_accepted(echo_url: str, content_type: str) -> None:
    body = json.dumps(envelope("ListTasks", {}))
    response = httpx.post(echo_url, content=body, headers={**auth(), "Content-Type": content_type})
    assert "result" in response.json(), response.text


def test_parse_error_answers_with_a_null_id_and_later_errors_echo_the_id(echo_url: str) -> None:
    # Given: one body the server cannot read, one it can read up to the method
    unreadable = b'{"jsonrpc":"2.0","id":"abc","method":'
    readable = json.dumps(envelope("NoSuchMethod", {}, request_id="abc"))
    # When
    parse_error = post(echo_url, unreadable)
    method_error = post(echo_url, readable)
    # Then: docs/protocol.md §1.5: id is null when it could not be read, else the request's id
    assert_error(parse_error, -32700, request_id=None)
    assert_error(method_error, -32601, request_id="abc")


@pytest.mark.parametrize(
    "method",
    [
        "NoSuchMethod",
        "sendMessage",
        "send_message",
        # A2A 0.3 names are not A2A 1.0 methods (docs/protocol.md §2.1).
        "message/send",
        "message/stream",
        "tasks/get",
        "tasks/cancel",
        "tasks/pushNotificationConfig/set",
    ],
)
def test_unknown_and_0_3_methods_are_method_not_found(
    echo_url: str, table_items: TableScan, method: str
) -> None:
    # Given: the params of a valid send, so a method that slipped through would create a task
    before = settled(table_items)
    # When
    response = post(echo_url, json.dumps(envelope(method, send_params(), request_id=9)))
    # Then
    assert_error(response, -32601, request_id=9)
    assert snapshot(table_items) == before


# ---------------------------------------------------------------------------------------------- params
@pytest.mark.parametrize(
    ("method", "params", "field"),
    [
        pytest.param("SendMessage", send_params(parts="hello"), "message.parts", id="parts-not-a-list"),
        pytest.param("SendMessage", send_params(parts=[]), "message.parts", id="parts-empty"),
        pytest.param(
            "SendMessage",
            send_params(parts=[{"text": "a", "data": {}}]),
            "message.parts[0]",
            id="part-two-kinds",
        ),
        pytest.param("SendMessage", send_params(role="user"), "message.role", id="role-0.3-user"),
        pytest.param("SendMessage", send_params(role="ROLE_AGENT"), "message.role", id="role-agent"),
        pytest.param(
            "SendMessage",
            {"message": {k: v for k, v in user_message().items() if k != "role"}},
            "message.role",
            id="role-missing",
        ),
        pytest.param("SendMessage", send_params(messageId=""), "message.messageId", id="message-id-empty"),
        pytest.param(
            "SendMessage", send_params(messageId="m" * 257), "message.messageId", id="message-id-257"
        ),
        pytest.param(
            "SendMessage", send_params(messageId="m" * 100_000), "message.messageId", id="message-id-100k"
        ),
        pytest.param(
            "SendMessage", send_params(contextId="c" * 300), "message.contextId", id="context-id-300"
        ),
        pytest.param("SendMessage", send_params(taskId="t" * 300), "message.taskId", id="task-id-300"),
        pytest.param("SendMessage", send_params(messageId=17), "message.messageId", id="message-id-number"),
        pytest.param("SendMessage", {}, "message", id="message-missing"),
        pytest.param(
            "SendMessage",
            {**send_params(), "configuration": {"historyLength": -1}},
            "configuration.historyLength",
            id="send-history-negative",
        ),
        pytest.param("GetTask", {"id": "t-1", "historyLength": "abc"}, "historyLength", id="get-history-abc"),
        pytest.param(
            "GetTask", {"id": "t-1", "historyLength": -1}, "historyLength", id="get-history-negative"
        ),
        pytest.param("GetTask", {}, "id", id="get-id-missing"),
        pytest.param("ListTasks", {"pageSize": 0}, "pageSize", id="list-page-size-0"),
        pytest.param("ListTasks", {"pageSize": 101}, "pageSize", id="list-page-size-101"),
        pytest.param("ListTasks", {"historyLength": -1}, "historyLength", id="list-history-negative"),
        pytest.param("ListTasks", {"status": "completed"}, "status", id="list-status-0.3-name"),
        pytest.param(
            "ListTasks", {"statusTimestampAfter": "yesterday"}, "statusTimestampAfter", id="list-bad-time"
        ),
        pytest.param(
            "ListTasks",
            {"statusTimestampAfter": "0001-01-01T00:00:00+05:00"},
            "statusTimestampAfter",
            id="list-time-out-of-range",
        ),
        pytest.param("ListTasks", {"pageToken": "not-a-token"}, "pageToken", id="list-foreign-page-token"),
        pytest.param("CancelTask", {"id": ""}, "id", id="cancel-id-empty"),
        pytest.param(
            "CreateTaskPushNotificationConfig", {"taskId": "t-1"}, "url", id="push-create-url-missing"
        ),
        pytest.param("GetTaskPushNotificationConfig", {"taskId": "t-1"}, "id", id="push-get-id-missing"),
        pytest.param(
            "ListTaskPushNotificationConfigs", {"taskId": "t-1", "pageSize": 0}, "pageSize", id="push-list-0"
        ),
    ],
)
def test_wrong_params_are_invalid_params_naming_the_field(
    echo_url: str, table_items: TableScan, method: str, params: dict[str, Any], field: str
) -> None:
    # Given
    before = settled(table_items)
    # When
    response = post(echo_url, json.dumps(envelope(method, params)))
    # Then: -32602 with a google.rpc.BadRequest naming the field (docs/protocol.md §5.1)
    error = assert_error(response, -32602, request_id="req-1")
    assert field in violated_fields(error)
    assert snapshot(table_items) == before


def test_params_that_are_not_an_object_are_invalid_params(echo_url: str, table_items: TableScan) -> None:
    # Given
    before = settled(table_items)
    # When
    response = post(echo_url, json.dumps(envelope("SendMessage", [send_params()])))
    # Then
    assert_error(response, -32602)
    assert snapshot(table_items) == before


# ---------------------------------------------------------------------------------------------- headers
@pytest.mark.parametrize(
    ("headers", "query", "requested"),
    [
        pytest.param({"A2A-Version": "0.3"}, "", "0.3", id="header-0.3"),
        pytest.param({"A2A-Version": "2.0"}, "", "2.0", id="header-2.0"),
        pytest.param({"A2A-Version": "1.1"}, "", "1.1", id="header-1.1"),
        pytest.param({"A2A-Version": "1"}, "", "1", id="header-1"),
        pytest.param({"A2A-Version": "1.x"}, "", "1.x", id="header-1.x"),
        pytest.param({"A2A-Version": "abc"}, "", "abc", id="header-garbage"),
        pytest.param({"A2A-Version": ""}, "", "0.3", id="header-empty"),
        pytest.param({}, "", "0.3", id="missing"),
        pytest.param({}, "?A2A-Version=0.3", "0.3", id="query-0.3"),
        pytest.param({}, "?A2A-Version=1.1", "1.1", id="query-1.1"),
    ],
)
def test_unsupported_or_missing_version_is_refused_and_writes_nothing(
    echo_url: str, table_items: TableScan, headers: dict[str, str], query: str, requested: str
) -> None:
    # Given: a valid send, without version 1.0 (a missing one counts as 0.3, A2A §3.6.2; the card declares 1.0 only)
    before = settled(table_items)
    # When
    response = post(
        echo_url + query,
        json.dumps(envelope("SendMessage", send_params())),
        headers={"Authorization": f"Bearer {ALICE}", **headers},
    )
    # Then: -32009 naming what was asked and what is served, and nothing written
    error = assert_error(response, -32009, request_id="req-1")
    assert "1.0" in error["message"]  # it says what to send
    assert error["data"][0]["metadata"] == {"supportedVersions": "1.0", "requestedVersion": requested}
    assert snapshot(table_items) == before


@pytest.mark.parametrize("method", ["message/send", "tasks/get", "NoSuchMethod"])
def test_a_0_3_client_learns_its_version_is_not_served_before_its_method_is_looked_up(
    echo_url: str, table_items: TableScan, method: str
) -> None:
    # Given: what an A2A 0.3 client sends: a 0.3 method name and no A2A-Version header
    before = settled(table_items)
    # When
    response = post(echo_url, json.dumps(envelope(method, send_params())), headers={"Authorization": f"Bearer {ALICE}"})
    # Then: the version error (-32009, with the versions served), not "method not found" (-32601)
    error = assert_error(response, -32009, request_id="req-1")
    assert error["data"][0]["metadata"]["supportedVersions"] == "1.0"
    assert snapshot(table_items) == before


@pytest.mark.parametrize(
    ("headers", "query"),
    [
        pytest.param({"A2A-Version": "1.0"}, "", id="header-1.0"),
        pytest.param({"A2A-Version": "1.0.0"}, "", id="header-1.0-patch"),
        pytest.param({}, "?A2A-Version=1.0", id="query-1.0"),
    ],
)
def test_version_1_0_is_served(echo_url: str, headers: dict[str, str], query: str) -> None:
    # Given: version 1.0, as a header or the query parameter (A2A §3.6: a patch number is not negotiated)
    # When
    response = post(
        echo_url + query,
        json.dumps(envelope("ListTasks", {"pageSize": 1})),
        headers={"Authorization": f"Bearer {ALICE}", **headers},
    )
    # Then
    assert response.status_code == 200
    assert "error" not in response.json(), response.text
    assert response.json()["result"]["pageSize"] == 1


# ---------------------------------------------------------------------------------------------- unsupported
@pytest.mark.parametrize(
    ("method", "params"),
    [
        pytest.param("SendStreamingMessage", send_params(), id="SendStreamingMessage"),
        pytest.param("SubscribeToTask", None, id="SubscribeToTask"),
        pytest.param("GetExtendedAgentCard", None, id="GetExtendedAgentCard-no-params"),
        pytest.param("GetExtendedAgentCard", {}, id="GetExtendedAgentCard-empty-params"),
    ],
)
def test_streaming_and_extended_card_are_unsupported_operations(
    echo_url: str, table_items: TableScan, alice_task: dict[str, Any], method: str, params: Any
) -> None:
    # Given: the card says streaming false and extendedAgentCard false (Profile v2)
    if method == "SubscribeToTask":
        params = {"id": alice_task["id"]}
    before = settled(table_items)
    # When
    response = post(echo_url, json.dumps(envelope(method, params)), headers=auth())
    # Then: -32004, answered as plain JSON (no event stream is opened)
    assert_error(response, -32004, request_id="req-1")
    assert snapshot(table_items) == before


# ---------------------------------------------------------------------------------------------- size and shape
def _send_body_of_size(size: int) -> bytes:
    """A valid SendMessage request whose encoded body is exactly `size` bytes."""
    request = envelope("SendMessage", {"message": {**user_message(""), "messageId": f"m-big-{uuid.uuid4()}"}})
    bare = json.dumps(request).encode()
    request["params"]["message"]["parts"][0]["text"] = "a" * (size - len(bare))
    body = json.dumps(request).encode()
    assert len(body) == size
    return body


def test_a_body_just_over_the_limit_is_payload_too_large(
    local_runtime: LocalRuntime, echo_url: str, table_items: TableScan
) -> None:
    # Given: a valid send one byte over max_request_bytes (1 MiB by default)
    assert local_runtime.runtime is not None
    limit = local_runtime.runtime.settings.max_request_bytes
    body = _send_body_of_size(limit + 1)
    before = settled(table_items)
    # When
    response = post(echo_url, body)
    # Then
    error = assert_error(response, -32600, request_id=None)
    assert "Payload too large" in error["message"]
    assert snapshot(table_items) == before


def test_a_chunked_body_over_the_limit_is_payload_too_large(
    local_runtime: LocalRuntime, echo_url: str, table_items: TableScan
) -> None:
    # Given: the same body sent without Content-Length (chunked), so only counting the bytes can stop it
    assert local_runtime.runtime is not None
    body = _send_body_of_size(local_runtime.runtime.settings.max_request_bytes + 1)

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(body), 256 * 1024):
            yield body[start : start + 256 * 1024]

    before = settled(table_items)
    # When
    response = post(echo_url, chunks())
    # Then
    error = assert_error(response, -32600, request_id=None)
    assert "Payload too large" in error["message"]
    assert snapshot(table_items) == before


def test_a_message_too_big_to_store_is_invalid_params_not_an_internal_error(
    local_runtime: LocalRuntime, echo_url: str, table_items: TableScan
) -> None:
    # Given: a valid send of exactly max_request_bytes: accepted by the size check, far too big for one
    # stored message (a DynamoDB item holds at most 400 KB)
    assert local_runtime.runtime is not None
    body = _send_body_of_size(local_runtime.runtime.settings.max_request_bytes)
    before = settled(table_items)
    # When
    response = post(echo_url, body)
    # Then: a clear error naming the message, nothing half-written
    error = assert_error(response, -32602)
    assert "message" in violated_fields(error)
    assert snapshot(table_items) == before


def test_metadata_too_big_to_store_is_invalid_params(echo_url: str, table_items: TableScan) -> None:
    # Given: a small message with 300 KiB of request metadata (over the 256 KiB one item holds, under the body budget)
    params = {**send_params(), "metadata": {"blob": "x" * (300 * 1024)}}
    before = settled(table_items)
    # When
    response = post(echo_url, json.dumps(envelope("SendMessage", params)))
    # Then
    error = assert_error(response, -32602)
    assert "metadata" in violated_fields(error)
    assert snapshot(table_items) == before


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400", "-2E+999"])
def test_a_number_no_double_holds_is_invalid_params_not_silently_null(
    echo_url: str, table_items: TableScan, number: str
) -> None:
    # Given: metadata with NaN or Infinity (not JSON, though Python's parser reads them) or a JSON number
    # beyond a double's range (read as infinity): kept, each would come back as null
    message = json.dumps(user_message("numbers"))
    body = '{"jsonrpc":"2.0","id":"n","method":"SendMessage","params":{"message":' + message
    body += ',"metadata":{"ok":[1.5,{"n":' + number + "}]}}}"
    before = settled(table_items)
    # When
    response = post(echo_url, body)
    # Then
    error = assert_error(response, -32602, request_id="n")
    assert violated_fields(error) == ["metadata.ok[1].n"]
    assert snapshot(table_items) == before


@pytest.mark.parametrize("depth", [33, 64, 200_000])
def test_deeply_nested_json_is_invalid_request(echo_url: str, table_items: TableScan, depth: int) -> None:
    # Given: a valid send whose metadata nests `depth` arrays (deeper than Python's recursion limit too)
    nested = "[" * depth + "]" * depth
    message = json.dumps(user_message("deep"))
    body = '{"jsonrpc":"2.0","id":"deep","method":"SendMessage","params":{"message":' + message
    body += ',"metadata":{"deep":' + nested + "}}}"
    before = settled(table_items)
    # When
    response = post(echo_url, body)
    # Then
    assert_error(response, -32600)
    assert snapshot(table_items) == before


# ---------------------------------------------------------------------------------------------- push URLs
PRIVATE_OR_PLAIN_URLS = [
    pytest.param("https://10.0.0.1/hook", id="https-private-10"),
    pytest.param("https://192.168.1.20/hook", id="https-private-192"),
    pytest.param("https://169.254.169.254/latest/meta-data", id="https-link-local-metadata"),
    pytest.param("https://[fd00::1]/hook", id="https-unique-local-v6"),
    pytest.param("https://127.1/hook", id="https-loopback-short-form"),
    pytest.param("https://2130706433/hook", id="https-loopback-as-integer"),
    pytest.param("https://0x0a.0.0.1/hook", id="https-private-hex-form"),
    pytest.param("http://example.com/hook", id="http-public-host"),
    pytest.param("http://10.0.0.1/hook", id="http-private"),
    pytest.param("ftp://example.com/hook", id="ftp"),
    pytest.param("https://user:secret@example.com/hook", id="credentials-in-url"),
    pytest.param("/relative/hook", id="relative"),
]


@pytest.mark.parametrize("url", PRIVATE_OR_PLAIN_URLS)
def test_push_config_to_a_private_or_plain_http_url_is_refused(
    echo_url: str, table_items: TableScan, alice_task: dict[str, Any], url: str
) -> None:
    # Given: alice's own task, and a push URL the Runtime must not call (docs/protocol.md §8.2;
    # docs/calling/push.md#where-deliveries-may-go)
    before = settled(table_items)
    # When
    response = post(
        echo_url,
        json.dumps(envelope("CreateTaskPushNotificationConfig", {"taskId": alice_task["id"], "url": url})),
    )
    # Then
    error = assert_error(response, -32602)
    assert any(field.endswith("url") for field in violated_fields(error))
    assert snapshot(table_items) == before


@pytest.mark.parametrize("url", ["https://10.0.0.1/hook", "http://example.com/hook"])
def test_send_with_a_private_push_url_is_refused_before_any_task_is_made(
    echo_url: str, table_items: TableScan, url: str
) -> None:
    # Given: a valid message whose configuration names a push URL the Runtime must not call
    params = {**send_params(), "configuration": {"taskPushNotificationConfig": {"url": url}}}
    before = settled(table_items)
    # When
    response = post(echo_url, json.dumps(envelope("SendMessage", params)))
    # Then: no task, no push config, no messageId record
    error = assert_error(response, -32602)
    assert any(field.endswith("url") for field in violated_fields(error))
    assert snapshot(table_items) == before


# ---------------------------------------------------------------------------------------------- no internals
def test_no_answer_to_bad_input_carries_a_traceback_or_a_file_path(
    local_runtime: LocalRuntime, echo_url: str
) -> None:
    # Given: a spread of hostile bodies, including ones that reach the store and the params parser
    assert local_runtime.runtime is not None
    hostile: list[bytes | str] = [
        b"\x00\x01\x02",
        b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"\\ud800"}}',
        (
            b'{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"\\ud800",'
            b'"role":"ROLE_USER","parts":[{"text":"x"}]}}}'
        ),
        json.dumps(envelope("GetTask", {"id": "x" * 50_000})),
        json.dumps(envelope("ListTasks", {"contextId": "c" * 50_000, "pageToken": "p" * 50_000})),
        json.dumps(envelope("ListTasks", {"statusTimestampAfter": "9999-12-31T23:59:59-05:00"})),
        json.dumps(envelope("GetTaskPushNotificationConfig", {"taskId": "t" * 5000, "id": "i" * 5000})),
        json.dumps(envelope("SendMessage", send_params(parts=[{"raw": "%%% not base64 %%%"}]))),
        json.dumps(envelope("SendMessage", send_params(metadata=["not", "an", "object"]))),
        json.dumps(envelope("CancelTask", {"id": None})),
        _send_body_of_size(local_runtime.runtime.settings.max_request_bytes),
    ]
    for body in hostile:
        # When
        response = post(echo_url, body)
        # Then: a JSON-RPC answer, never an internal error, never a stack or a path
        assert response.status_code == 200, response.text
        assert_no_internals(response.text)
        answer = response.json()
        assert answer.get("error", {}).get("code") != -32603, answer


def test_a_large_message_under_the_storage_limit_is_still_served(
    echo_url: str, table_items: TableScan
) -> None:
    # Given: 200 KB of text, under the stored-message limit (the limit must not refuse real messages)
    text = "b" * (200 * 1024)
    before = settled(table_items)
    # When
    answer = rpc(
        echo_url, "SendMessage", {"message": user_message(text), "configuration": {"historyLength": 1}}
    )
    # Then
    assert "error" not in answer, str(answer)[:500]
    task = answer["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["status"]["message"]["parts"][0]["text"] == text
    # ...and the snapshot the other tests compare does see what a send writes (it is not vacuous)
    written = {item["PK"]["S"] for item in snapshot(table_items)} - {item["PK"]["S"] for item in before}
    assert f"TASK#{task['id']}" in written
