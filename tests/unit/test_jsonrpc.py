"""The JSON-RPC envelope: every malformed request gets its own error, never an exception."""

import json

import pytest

from nylorun.protocol import jsonrpc
from nylorun.protocol.errors import InvalidParamsError
from nylorun.protocol.models import SendMessageRequest


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"{not json", -32700),
        (b"\xff\xfe", -32700),
        (b"[]", -32600),
        (b'[{"jsonrpc":"2.0","id":1,"method":"GetTask"}]', -32600),
        (b'"text"', -32600),
        (b'{"jsonrpc":"1.0","id":1,"method":"GetTask"}', -32600),
        (b'{"jsonrpc":"2.0","id":{"a":1},"method":"GetTask"}', -32600),
        (b'{"jsonrpc":"2.0","id":1,"method":42}', -32600),
        (b'{"jsonrpc":"2.0","id":1,"method":"message/send"}', -32601),
        (b'{"jsonrpc":"2.0","id":1,"method":"tasks/get"}', -32601),
        (b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":[1]}', -32602),
    ],
)
def test_malformed_requests_get_their_error(body: bytes, code: int) -> None:
    # When
    with pytest.raises(jsonrpc.RequestError) as caught:
        jsonrpc.decode(body)
    # Then
    assert caught.value.error.code == code


def test_deep_nesting_is_refused_without_recursion_error() -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"a": [[[[[[[[[[[[]]]]]]]]]]]] * 1}})
    nested = "[" * 5000 + "]" * 5000
    with pytest.raises(jsonrpc.RequestError) as caught:
        jsonrpc.decode(('{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"x":' + nested + "}}").encode())
    assert caught.value.error.code in (-32600, -32700)
    assert jsonrpc.decode(body.encode()).method == "GetTask"


def test_null_params_are_an_empty_object() -> None:
    request = jsonrpc.decode(b'{"jsonrpc":"2.0","id":"x","method":"DeleteTaskPushNotificationConfig","params":null}')
    assert request.params == {}


def test_param_errors_name_the_field_in_camel_case() -> None:
    # Given a 0.3-style role, which 1.0 does not know
    params = {"message": {"messageId": "m", "role": "user", "parts": [{"text": "hi"}]}}
    # When
    with pytest.raises(InvalidParamsError) as caught:
        jsonrpc.parse_params(SendMessageRequest, params)
    # Then the error points at message.role, with a BadRequest violation after the ErrorInfo
    error = caught.value.to_jsonrpc()
    assert error["code"] == -32602
    assert error["data"][0]["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"
    assert error["data"][0]["reason"] == "INVALID_PARAMS"
    assert error["data"][1]["fieldViolations"][0]["field"] == "message.role"


def test_a_part_must_carry_exactly_one_kind_of_content() -> None:
    params = {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "a", "url": "https://x"}]}}
    with pytest.raises(InvalidParamsError):
        jsonrpc.parse_params(SendMessageRequest, params)
