"""Well-formed text: every string the Runtime stores is Unicode scalar values only.

A JSON escape such as `\\ud800` with no partner (a JavaScript client that cut a string inside an emoji
sends one) decodes to a Python str holding a lone surrogate. Such a str has no UTF-8 form, and a stored one
made every later read of its task fail. `json.loads` joins a properly paired escape (`\\ud83d\\ude00`) into
one character (😀), so any surrogate left in decoded JSON is a lone one.

Requests: the JSON-RPC layer refuses one (-32602, `jsonrpc.decode`). Agent output: the turn engine records
`repaired` text, U+FFFD in place of each lone surrogate.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar, cast

from pydantic import BaseModel

T = TypeVar("T")
_SURROGATE = re.compile("[\ud800-\udfff]")


def lone_surrogate(text: str) -> str | None:
    """Why `text` is not well-formed Unicode (its first lone surrogate), or None when it is."""
    found = None if text.isascii() else _SURROGATE.search(text)
    return None if found is None else f"a lone surrogate (U+{ord(found.group()):04X})"


def repaired(value: T) -> T:
    """`value` (a str, JSON list or object, or a pydantic model of them) with U+FFFD for each lone surrogate;
    a surrogate pair held as two code points becomes its one character, as JSON would read it."""
    if isinstance(value, BaseModel):
        data = value.model_dump(by_alias=True, exclude_none=True)
        fixed = _repair(data)
        return value if fixed == data else type(value).model_validate(fixed)
    return cast(T, _repair(value))


def _repair(value: Any) -> Any:
    if isinstance(value, str):
        if lone_surrogate(value) is None:
            return value
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    if isinstance(value, dict):
        return {_repair(k): _repair(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_repair(v) for v in value)
    return value
