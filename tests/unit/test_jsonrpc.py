"""The JSON-RPC envelope: every malformed request gets its own error, never an exception."""

import json

import pytest
from nylorun.protocol import jsonrpc
from nylorun.protocol.errors import InvalidParamsError
from nylorun.protocol.models import Part, SendMessageRequest
from nylorun.protocol.text import repaired


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


def _send(params: str) -> bytes:
    return ('{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":' + params + "}").encode()


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ('{"message":{"parts":[{"text":"a\\ud800b"}]}}', "message.parts[0].text"),
        ('{"message":{"metadata":{"k\\udc00":1}}}', "message.metadata.k\\udc00"),
        ('{"metadata":{"a":[1,{"b":"\\ude00\\ud83d"}]}}', "metadata.a[1].b"),
        ('{"message":{"messageId":"\\ud83d"}}', "message.messageId"),
        ('{"metadata":{"n":NaN}}', "metadata.n"),
        ('{"metadata":{"n":[1e400]}}', "metadata.n[0]"),
        # Each kind the decoder's quick look at the raw body must not miss (it skips the walk of a body without)
        ('{"message":{"messageId":"\\uDBFF"}}', "message.messageId"),
        ('{"metadata":{"n":-Infinity}}', "metadata.n"),
        ('{"metadata":{"n":1E+400}}', "metadata.n"),
        ('{"metadata":{"n":' + "9" * 310 + '.0}}', "metadata.n"),
    ],
)
def test_params_that_cannot_be_kept_as_sent_are_invalid_params_naming_the_field(
    params: str, field: str
) -> None:
    # When
    with pytest.raises(jsonrpc.RequestError) as caught:
        jsonrpc.decode(_send(params))
    # Then: -32602 with the request's id, and a field violation where the caller wrote it
    error = caught.value.error.to_jsonrpc()
    assert (error["code"], caught.value.request_id) == (-32602, 7)
    assert error["data"][1]["fieldViolations"][0]["field"] == field


def test_a_lone_surrogate_sent_as_raw_bytes_is_invalid_params_too() -> None:
    # Given a body whose text holds a surrogate as UTF-8 bytes, not as an escape (json.loads reads them)
    body = _send('{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"a#b"}]}}')
    body = body.replace(b"#", b"\xed\xa0\x80")
    # When decoded, Then it is refused naming the field
    with pytest.raises(jsonrpc.RequestError) as caught:
        jsonrpc.decode(body)
    assert caught.value.error.to_jsonrpc()["data"][1]["fieldViolations"][0]["field"] == "message.parts[0].text"


def test_a_paired_surrogate_escape_is_one_character_and_ids_are_not_params() -> None:
    # A lone surrogate in the id is echoed back as sent; it is not stored, so only params are checked.
    request = jsonrpc.decode(
        b'{"jsonrpc":"2.0","id":"\\ud800","method":"GetTask","params":{"id":"\\ud83d\\ude00"}}'
    )
    assert request.params == {"id": "\U0001f600"}


def test_agent_text_is_repaired_to_well_formed_unicode() -> None:
    # A lone surrogate becomes U+FFFD; two code points that make a pair become their one character
    assert repaired("a\ud800b \ud83d\ude00 \udc00") == "a\ufffdb \U0001f600 \ufffd"
    assert repaired({"k\ud800": ["v\udfff", 1, None]}) == {"k\ufffd": ["v\ufffd", 1, None]}
    part = Part(text="ok", metadata={"k\ud800": "v"})
    assert repaired(part) == Part(text="ok", metadata={"k\ufffd": "v"})
    well_formed = Part(text="fine 😀")
    assert repaired(well_formed) is well_formed


def test_an_encoded_result_is_written_as_it_was_encoded() -> None:
    # Given a result made with its JSON text (GetTask's task, encoded once), holding a non-ASCII character
    result = jsonrpc.Encoded({"text": "caf\u00e9"}, '{"text":"caf\\u00e9"}')
    # When the answer holding it is written
    text = jsonrpc.encode(jsonrpc.success("r-1", result))
    # Then its text is used as it is, in the compact ASCII JSON every answer is written in
    assert text == '{"jsonrpc":"2.0","id":"r-1","result":{"text":"caf\\u00e9"}}'
    assert text == json.dumps(jsonrpc.success("r-1", dict(result)), separators=(",", ":"))
