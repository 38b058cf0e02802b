"""JSON-RPC 2.0 envelope for the A2A 1.0 JSON-RPC binding (docs/protocol.md §1, §2, §5).

`decode` turns raw bytes into a request or raises the error to answer with; `parse_params` validates
`params` into a wire model, turning pydantic's errors into -32602 with field violations.

Params are kept exactly as sent or refused: `decode` answers -32602, naming the field, for text that is not
well-formed Unicode (a lone surrogate, `protocol/text.py`) and for a number no double holds (NaN, Infinity,
1e400), anywhere in `params`, in a value or an object key, for every method.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from nylorun.protocol.errors import (
    A2AError,
    InvalidParamsError,
    InvalidRequestError,
    MethodNotFoundError,
    ParseError,
    UnsupportedOperationError,
)
from nylorun.protocol.text import lone_surrogate

RequestId = str | int | None
M = TypeVar("M", bound=BaseModel)

# A2A 1.0 method names (the gRPC names). Everything else, 0.3's `message/send` included, is -32601.
METHODS = frozenset(
    {
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
    }
)
MAX_DEPTH = 32


@dataclass(frozen=True)
class Request:
    id: RequestId
    method: str
    params: dict[str, Any]


class RequestError(Exception):
    """An error answered before the request id was known (or with it, when it was)."""

    def __init__(self, error: A2AError, request_id: RequestId = None) -> None:
        super().__init__(error.message)
        self.error = error
        self.request_id = request_id


def decode(body: bytes, before_method: Callable[[], None] | None = None) -> Request:
    """`before_method` runs once the envelope (and so the request id) is read and before the method is looked up;
    the A2AError it raises is the answer. The version check goes there (A2A §3.6.2): a 0.3 client's `message/send`
    learns that its version is not served, not that its method is unknown."""
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise RequestError(ParseError()) from None
    except RecursionError:
        raise RequestError(InvalidRequestError(f"JSON nested deeper than {MAX_DEPTH} levels")) from None
    depth, suspect = (0, False) if _surely_fit(body) else _scan(payload)
    if depth > MAX_DEPTH:
        raise RequestError(InvalidRequestError(f"JSON nested deeper than {MAX_DEPTH} levels"))
    if isinstance(payload, list):
        # Batches are not part of A2A; the SDK answers -32600 too.
        raise RequestError(InvalidRequestError("Batch requests are not supported"))
    if not isinstance(payload, dict):
        raise RequestError(InvalidRequestError("A JSON-RPC request is a JSON object"))
    request_id = payload.get("id")
    if not (request_id is None or isinstance(request_id, (str, int))) or isinstance(request_id, bool):
        raise RequestError(InvalidRequestError("`id` must be a string, a number or null"))
    if payload.get("jsonrpc") != "2.0":
        raise RequestError(InvalidRequestError('`jsonrpc` must be "2.0"'), request_id)
    method = payload.get("method")
    if not isinstance(method, str) or not method:
        raise RequestError(InvalidRequestError("`method` must be a non-empty string"), request_id)
    if before_method is not None:
        try:
            before_method()
        except A2AError as refused:
            raise RequestError(refused, request_id) from None
    if method not in METHODS:
        raise RequestError(MethodNotFoundError(f"Method not found: {method[:80]}"), request_id)
    params = payload.get("params", {})
    if params is None:
        params = {}  # the SDK sends null params for DeleteTaskPushNotificationConfig and GetExtendedAgentCard
    if not isinstance(params, dict):
        raise RequestError(InvalidParamsError("`params` must be an object"), request_id)
    unfit = _unfit(params) if suspect else None
    if unfit is not None:
        field, description = unfit
        error = InvalidParamsError(f"Invalid params: {field}: {description}", field_violations=[unfit])
        raise RequestError(error, request_id)
    return Request(id=request_id, method=method, params=params)


# What in a body's bytes can make its decoded value unfit (`_scan`): a surrogate as a \u escape or as UTF-8 bytes
# (json.loads reads bytes with "surrogatepass"), NaN or Infinity, or a number a double cannot hold (an exponent of
# three digits, or 300 digits in a row).
_MAYBE_UNFIT = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]|NaN|Infinity|[0-9][eE][+-]?[0-9]{3}|[0-9]{300}")


def _surely_fit(body: bytes) -> bool:
    """True when `_scan` could find nothing in what `body` decodes to: it holds fewer brackets than MAX_DEPTH
    and nothing `_MAYBE_UNFIT` matches (a plain GetTask). Only then is the walk skipped."""
    return body.count(b"{") + body.count(b"[") <= MAX_DEPTH and _MAYBE_UNFIT.search(body) is None


def _scan(payload: Any) -> tuple[int, bool]:
    """One walk of the decoded payload: how deep it nests (the walk stops past MAX_DEPTH), and whether a
    string, key or number in it cannot be kept as sent (then `_unfit` finds where)."""
    depth, suspect = 0, False
    pending: list[tuple[Any, int]] = [(payload, 0)]
    while pending:
        value, level = pending.pop()
        if isinstance(value, str):
            suspect = suspect or lone_surrogate(value) is not None
        elif isinstance(value, float):
            suspect = suspect or not math.isfinite(value)
        elif isinstance(value, (dict, list)):
            depth = max(depth, level + 1)
            if depth > MAX_DEPTH:
                break
            items: Iterable[Any] = value
            if isinstance(value, dict):
                suspect = suspect or any(lone_surrogate(key) is not None for key in value)
                items = value.values()
            pending.extend((item, level + 1) for item in items)
    return depth, suspect


def _unfit(value: Any, path: str = "") -> tuple[str, str] | None:
    """(field, description) of the first string, key or number in `value` that cannot be kept as sent. The
    field is written as the caller wrote it (`message.parts[0].text`); a bad key shows escaped."""
    if isinstance(value, str):
        why = lone_surrogate(value)
        return None if why is None else (path, f"Text is not well-formed Unicode: {why}.")
    if isinstance(value, float) and not math.isfinite(value):
        return path, "Not a finite number: NaN, Infinity and numbers beyond a double's range are refused."
    items: list[tuple[str, Any]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            why = lone_surrogate(key)
            field = (path + "." if path else "") + key.encode("utf-8", "backslashreplace").decode()
            if why is not None:
                return field, f"The key is not well-formed Unicode: {why}."
            items.append((field, item))
    elif isinstance(value, list):
        items = [(f"{path}[{index}]", item) for index, item in enumerate(value)]
    return next((found for field, item in items if (found := _unfit(item, field)) is not None), None)


# The field violations one error names: the first ones. A message of 100,000 bad parts named every one, and the
# answer outgrew the 5 MiB limit and became an internal error (-32603) instead of -32602.
MAX_VIOLATIONS = 20


def parse_params(model: type[M], params: dict[str, Any]) -> M:
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        violations = [(_field_path(err["loc"]), _describe(err)) for err in errors[:MAX_VIOLATIONS]]
        summary = "; ".join(f"{field}: {description}" for field, description in violations[:5])
        if len(errors) > len(violations):
            summary += f" ({len(errors)} problems in all; the first {len(violations)} are listed)"
        raise InvalidParamsError(f"Invalid params: {summary}", field_violations=violations) from None


def _field_path(loc: tuple[Any, ...]) -> str:
    path = ""
    for item in loc:
        if isinstance(item, int):
            path += f"[{item}]"
        elif isinstance(item, str) and not item.startswith(("function-", "union[")):
            path += ("." if path else "") + _camel(item)
    return path or "params"


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.title() for word in rest)


def _describe(err: Any) -> str:
    if err["type"] == "missing":
        return "Field is required."
    message = str(err["msg"])
    return message.removeprefix("Value error, ")


def success(request_id: RequestId, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


class Encoded(dict[str, Any]):
    """A JSON object made together with its JSON text (`text`: compact, ASCII, as `encode` writes it), so an answer
    holding it as its result is written without encoding it again. Not changed once made (no answer is)."""

    def __init__(self, value: dict[str, Any], text: str) -> None:
        super().__init__(value)
        self.text = text


def encode(answer: dict[str, Any]) -> str:
    """An answer's JSON text: compact and ASCII; a result made `Encoded` is written as it was encoded."""
    result = answer.get("result")
    if isinstance(result, Encoded) and answer.keys() == {"jsonrpc", "id", "result"}:
        request_id = json.dumps(answer["id"], separators=(",", ":"))
        return f'{{"jsonrpc":"2.0","id":{request_id},"result":{result.text}}}'
    return json.dumps(answer, separators=(",", ":"))


def failure(request_id: RequestId, error: A2AError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": error.to_jsonrpc()}


def streaming_unsupported(method: str) -> UnsupportedOperationError:
    # Profile v2: `streaming: false`; updates reach callers by push.
    return UnsupportedOperationError(
        f"{method} is not supported: this Agent does not stream (capabilities.streaming is false); "
        "use SendMessage and push notifications"
    )
