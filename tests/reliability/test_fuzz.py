"""Fuzzing the JSON-RPC endpoint over real HTTP: whatever a caller sends, it gets one valid JSON-RPC 2.0
answer (HTTP 200, never a 5xx or a stack trace), and input the Runtime must refuse writes nothing.

Hypothesis generates the bodies: random bytes and JSON, deep nesting, strings up to ~100 KB, random method
names, and the A2A methods with garbage or wrongly typed params. Every body here is one the Runtime must
refuse (or, for reads such as ListTasks, answer without writing), so each batch ends with the tasks table
exactly as it began.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nylorun.limits import MAX_REQUEST_BYTES
from nylorun_local.runtime import LocalRuntime
from reliability_kit import TableScan, auth, settled, snapshot, user_message

pytestmark = [
    pytest.mark.e2e,
    # Hypothesis seeds the global `random` while it generates, and warns when that state moves: here the
    # Runtime's own threads (push jitter, moto) use `random` meanwhile, not the strategies.
    pytest.mark.filterwarnings("ignore:Do not use the `random` module inside strategies"),
]

ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
A2A_METHODS = [
    "SendMessage",
    "SendStreamingMessage",
    "GetTask",
    "ListTasks",
    "CancelTask",
    "SubscribeToTask",
    "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfig",
    "GetExtendedAgentCard",
]
# Methods that may legitimately answer with a result to garbage params (ListTasks ignores unknown fields).
READS_WITH_DEFAULTS = {"ListTasks"}
SCOPE = ("echo",)  # the agent under test: the no-change checks compare its part of the table


def fuzz_settings(examples: int) -> settings:
    """A modest number of examples (the suite runs in `make test`), no example database written to disk."""
    return settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )


# ---------------------------------------------------------------------------------------------- strategies
leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
)
json_values = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
    max_leaves=25,
)
json_objects = st.dictionaries(st.text(max_size=12), json_values, max_size=6)
# Strings up to ~100 KB, built by repetition so generating them stays cheap.
huge_strings = st.builds(
    lambda seed, size: (seed * (size // len(seed) + 1))[:size],
    st.text(min_size=1, max_size=16),
    st.integers(min_value=1_000, max_value=100_000),
)
request_ids = (
    st.none()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.text(max_size=30)
    | huge_strings
    | st.booleans()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.lists(st.integers(), max_size=2)
    | st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)
)
non_strings = json_values.filter(lambda v: not isinstance(v, str))
non_objects = json_values.filter(lambda v: not isinstance(v, dict))
non_lists = json_values.filter(lambda v: not isinstance(v, list))


def nested(depth: int, leaf: Any, kind: str) -> str:
    """JSON text nested `depth` levels deep (built as text: json.dumps itself stops near 1000 levels)."""
    opening, closing = ("[", "]") if kind == "list" else ('{"a":', "}")
    return opening * depth + json.dumps(leaf) + closing * depth


@st.composite
def envelopes(draw: st.DrawFn, method: st.SearchStrategy[str], params: st.SearchStrategy[Any]) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": draw(request_ids), "method": draw(method)}
    if draw(st.booleans()):
        body["params"] = draw(params)
    return body


@st.composite
def raw_bodies(draw: st.DrawFn) -> bytes:
    """Anything at all: bytes, JSON of any shape, broken envelopes, very deep nesting, huge strings."""
    kind = draw(st.sampled_from(["bytes", "json", "envelope", "deep", "huge", "nan"]))
    if kind == "bytes":
        return draw(st.binary(max_size=300))
    if kind == "json":
        return json.dumps(draw(json_values)).encode()
    if kind == "envelope":
        body = {
            "jsonrpc": draw(st.sampled_from(["2.0", "1.0", 2.0, None]) | json_values),
            "id": draw(request_ids),
            "method": draw(st.sampled_from(A2A_METHODS) | st.text(max_size=30) | huge_strings | json_values),
            "params": draw(json_values),
        }
        keys = draw(st.lists(st.sampled_from(sorted(body)), unique=True))
        return json.dumps({key: body[key] for key in keys}).encode()
    if kind == "deep":
        depth = draw(st.integers(min_value=20, max_value=3_000))
        inner = nested(depth, draw(leaves), draw(st.sampled_from(["list", "dict"])))
        request_id = json.dumps(draw(request_ids))
        method = json.dumps(draw(st.sampled_from(A2A_METHODS)))
        return f'{{"jsonrpc":"2.0","id":{request_id},"method":{method},"params":{{"x":{inner}}}}}'.encode()
    if kind == "huge":
        return json.dumps(
            {"jsonrpc": "2.0", "id": draw(request_ids), "method": draw(huge_strings), "params": {draw(huge_strings): 1}}
        ).encode()
    # Not JSON by RFC 8259 (Python's parser takes it): the answer must still be strict JSON.
    token = draw(st.sampled_from(["NaN", "Infinity", "-Infinity"]))
    method = json.dumps(draw(st.sampled_from(A2A_METHODS)))
    return f'{{"jsonrpc":"2.0","id":{token},"method":{method},"params":{{"historyLength":{token},"id":{token}}}}}'.encode()


# Each mutation makes an otherwise valid SendMessage certainly invalid (pydantic's lax mode would accept
# e.g. "5" for an int, so those are left out): the Runtime must refuse it before writing anything.
@st.composite
def invalid_send_params(draw: st.DrawFn) -> dict[str, Any]:
    message: dict[str, Any] = user_message(f"fuzz {uuid.uuid4()}")
    # returnImmediately: should a mutation ever be accepted, the answer comes at once (no blocking wait)
    params: dict[str, Any] = {"message": message, "configuration": {"returnImmediately": True}}
    mutation = draw(
        st.sampled_from(
            [
                "no-message", "message-type", "drop-field", "message-id", "role", "parts-type", "parts-items",
                "part-content", "ids-type", "ids-huge", "task-id-unknown", "configuration", "history-length",
                "push-url", "metadata", "extensions",
            ]
        )
    )
    if mutation == "no-message":
        del params["message"]
        params.update(draw(json_objects.filter(lambda o: "message" not in o)))
    elif mutation == "message-type":
        params["message"] = draw(non_objects)
    elif mutation == "drop-field":
        del message[draw(st.sampled_from(["messageId", "role", "parts"]))]
    elif mutation == "message-id":
        message["messageId"] = draw(non_strings | st.just("") | huge_strings.filter(lambda s: len(s) > 256))
    elif mutation == "role":
        message["role"] = draw(st.just("ROLE_AGENT") | json_values.filter(lambda v: v != "ROLE_USER"))
    elif mutation == "parts-type":
        message["parts"] = draw(non_lists | st.just([]))
    elif mutation == "parts-items":
        message["parts"] = draw(st.lists(non_objects, min_size=1, max_size=3))
    elif mutation == "part-content":
        # A part carries exactly one of text, raw, url or data: none, or two of them.
        message["parts"] = [draw(st.sampled_from([{}, {"text": "a", "url": "https://x.example/a"}, {"text": None}]))]
        message["parts"][0] = {**message["parts"][0], **draw(st.dictionaries(st.sampled_from(["mediaType", "filename"]), st.text(max_size=5)))}
    elif mutation == "ids-type":
        message[draw(st.sampled_from(["contextId", "taskId"]))] = draw(non_strings.filter(lambda v: v is not None))
    elif mutation == "ids-huge":
        message[draw(st.sampled_from(["contextId", "taskId"]))] = draw(huge_strings.filter(lambda s: len(s) > 256))
    elif mutation == "task-id-unknown":
        message["taskId"] = draw(st.text(min_size=1, max_size=60))
    elif mutation == "configuration":
        params["configuration"] = draw(non_objects.filter(lambda v: v is not None))
    elif mutation == "history-length":
        bad = st.integers(max_value=-1) | st.lists(st.integers(), max_size=2) | json_objects | st.text(alphabet="xyz-", min_size=1)
        params["configuration"] = {"returnImmediately": True, "historyLength": draw(bad)}
    elif mutation == "push-url":
        url = draw(
            st.sampled_from(["https://10.0.0.5/hook", "https://169.254.169.254/latest", "http://example.com/h", "ftp://x/y"])
            | st.text(max_size=40).filter(lambda s: not s.startswith("http"))
        )
        params["configuration"] = {"returnImmediately": True, "taskPushNotificationConfig": {"url": url} if url else {}}
    elif mutation == "metadata":
        params["metadata"] = draw(non_objects.filter(lambda v: v is not None))
    else:
        message["extensions"] = draw(non_lists.filter(lambda v: v is not None))
    return params


# ---------------------------------------------------------------------------------------------- oracle
def _strict(text: str) -> Any:
    def refuse(token: str) -> Any:
        raise ValueError(f"non-standard JSON constant {token}")

    return json.loads(text, parse_constant=refuse)


def expected_id(body: bytes) -> tuple[bool, Any]:
    """(known, id): the id a JSON-RPC answer must carry, when the request's id can be read at all."""
    if len(body) > MAX_REQUEST_BYTES:
        return True, None  # refused from its length, never parsed (docs/limits.md): the id is never read
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError):
        return True, None
    if not isinstance(payload, dict):
        return True, None
    request_id = payload.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, (str, int)):
        return True, None
    if body.count(b"[") + body.count(b"{") > 30:
        return False, request_id  # nested past the depth limit: answered before the id is read (null) or not
    return True, request_id


def assert_jsonrpc_answer(response: httpx.Response, body: bytes) -> dict[str, Any]:
    """What every caller must get back: HTTP 200 and exactly one strict JSON-RPC 2.0 response object."""
    assert response.status_code == 200, (response.status_code, response.text[:300], body[:300])
    if b"Traceback" not in body:
        assert "Traceback" not in response.text, response.text[:500]
    answer = _strict(response.text)
    assert isinstance(answer, dict), answer
    assert answer.get("jsonrpc") == "2.0", answer
    assert ("result" in answer) != ("error" in answer), answer
    known, request_id = expected_id(body)
    assert "id" in answer, answer
    if known:
        assert answer["id"] == request_id, (answer["id"], request_id)
    else:
        assert answer["id"] in (None, request_id), answer["id"]
    if "error" in answer:
        error = answer["error"]
        assert type(error["code"]) is int, error
        assert error["code"] != -32603, f"an internal error (a crash) for {body[:300]!r}: {error}"
        assert isinstance(error["message"], str) and error["message"], error
        assert error["data"][0]["@type"] == ERROR_INFO, error
    return answer


# ---------------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def http(local_runtime: LocalRuntime) -> Iterator[httpx.Client]:
    with httpx.Client(headers={**auth(), "Content-Type": "application/json"}, timeout=60) as client:
        yield client


@pytest.fixture(scope="module")
def echo_url(local_runtime: LocalRuntime) -> str:
    return local_runtime.agent_url("echo")


# ---------------------------------------------------------------------------------------------- tests
def test_any_body_gets_one_jsonrpc_answer_and_writes_nothing(
    http: httpx.Client, echo_url: str, table_items: TableScan
) -> None:
    # Given the tasks table as it is
    before = settled(table_items, SCOPE)

    @fuzz_settings(examples=60)
    @given(body=raw_bodies())
    def check(body: bytes) -> None:
        # When a caller posts anything at all
        response = http.post(echo_url, content=body)
        # Then it gets one valid JSON-RPC answer: an error, as none of these is a well-formed request, except a
        # read that ignores unknown params (seen: ListTasks with {"x": 20 nested lists}, a "deep" body)
        answer = assert_jsonrpc_answer(response, body)
        assert "error" in answer or json.loads(body)["method"] in READS_WITH_DEFAULTS, answer

    check()
    # And nothing was written
    assert snapshot(table_items, SCOPE) == before


def test_a2a_methods_with_garbage_params_get_an_error_and_write_nothing(
    http: httpx.Client, echo_url: str, table_items: TableScan
) -> None:
    # Given the tasks table as it is
    before = settled(table_items, SCOPE)
    methods = st.sampled_from([m for m in A2A_METHODS if m != "SendMessage"])
    params = json_objects | st.fixed_dictionaries(
        {},
        optional={
            "id": json_values,
            "taskId": json_values,
            "url": json_values,
            "historyLength": json_values,
            "pageSize": json_values,
            "pageToken": json_values,
            "status": json_values,
            "contextId": json_values,
            "statusTimestampAfter": json_values,
        },
    )
    bodies = envelopes(methods, params) | envelopes(st.text(min_size=1, max_size=40) | huge_strings, json_values)

    @fuzz_settings(examples=60)
    @given(request=bodies)
    def check(request: dict[str, Any]) -> None:
        # When an A2A method (or a made-up one) is called with garbage params
        body = json.dumps(request).encode()
        answer = assert_jsonrpc_answer(http.post(echo_url, content=body), body)
        # Then an error, unless it is a read that may answer with its defaults
        if "result" in answer:
            assert request["method"] in READS_WITH_DEFAULTS, answer
        elif len(body) > MAX_REQUEST_BYTES:  # refused from its length before the method is looked at
            assert answer["error"]["code"] == -32600, answer
        elif request["method"] not in A2A_METHODS:
            id_valid = isinstance(request["id"], (str, int, type(None))) and not isinstance(request["id"], bool)
            assert answer["error"]["code"] == (-32601 if id_valid else -32600), answer

    check()
    # And nothing was written: not a task, not a push config
    assert snapshot(table_items, SCOPE) == before


def test_invalid_send_message_is_refused_and_writes_nothing(
    http: httpx.Client, echo_url: str, table_items: TableScan
) -> None:
    # Given the tasks table as it is
    before = settled(table_items, SCOPE)

    @fuzz_settings(examples=80)
    @given(params=invalid_send_params(), request_id=st.integers(min_value=0, max_value=2**31) | st.text(max_size=20))
    def check(params: dict[str, Any], request_id: int | str) -> None:
        # When a SendMessage is wrong in one field
        body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "SendMessage", "params": params}).encode()
        answer = assert_jsonrpc_answer(http.post(echo_url, content=body), body)
        # Then invalid params (or, for a taskId nobody has, task not found), with the request's id
        assert "error" in answer, f"accepted {params!r}"
        assert answer["error"]["code"] in (-32602, -32001), answer
        assert answer["id"] == request_id

    check()
    # And no task, message or context was written
    assert snapshot(table_items, SCOPE) == before
