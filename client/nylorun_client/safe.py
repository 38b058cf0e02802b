"""Text from an Agent or a caller made safe for a terminal: no control sequence reaches it, whole or in part.

An Agent's reply, plan, prompt, components and artifacts, and a caller's ids, are data: written raw to a terminal
their escape sequences clear the screen, retitle the window, hide a link's target (OSC 8) or write the clipboard
(OSC 52). ECMA-48 names the sequences; each is removed whole, its payload with it, and every other C0/C1 control
and DEL too. Newlines and tabs stay. `--json` keeps the data exact, with those characters escaped as \\uXXXX.
Stdlib only: the `serve` banner (the `local` extra) uses it too.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from typing import Any

# ECMA-48 §5.4: CSI (ESC [ or C1 9B) parameter bytes, intermediate bytes, a final byte.
_CSI = r"(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"
# ECMA-48 §5.6: the control strings (OSC, DCS, SOS, PM, APC; ESC ] P X ^ _ or C1 9D 90 98 9E 9F) run to ST
# (ESC \ or C1 9C); xterm also ends OSC at BEL. Unterminated, a terminal swallows the rest: so do we.
_STRING = r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
# ECMA-48 §5.3: any other escape sequence (ESC c resets the terminal, ESC ( 0 switches the character set).
_ESCAPE = r"\x1b[\x20-\x2f]*[\x30-\x7e]?"
_SEQUENCE = re.compile(f"{_CSI}|{_STRING}|{_ESCAPE}")
# What is left: C0 but newline and tab (CR included: it lets a line overwrite what came before it), DEL, C1.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_JSON_RAW = re.compile(r"[\x7f-\x9f]")  # json.dumps escapes C0 itself


def clean(text: str) -> str:
    """`text` with every control sequence (payload included) and control character removed but \\n and \\t."""
    return _CONTROL.sub("", _SEQUENCE.sub("", text.replace("\r\n", "\n")))


def scrub(value: Any) -> Any:
    """`value` with `clean` applied to every string in it: in lists, mappings (keys too), dataclasses and pydantic
    models. Anything else (a protobuf kept as `raw`, a number) is returned as it is."""
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, list | tuple):
        return type(value)(scrub(item) for item in value)
    if isinstance(value, Mapping):
        return {scrub(key): scrub(item) for key, item in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: scrub(getattr(value, f.name)) for f in dataclasses.fields(value) if f.init}
        return dataclasses.replace(value, **changes)
    fields = getattr(type(value), "model_fields", None)  # a pydantic model (Interaction, PlanStep, …)
    if isinstance(fields, dict) and hasattr(value, "model_copy"):
        return value.model_copy(update={name: scrub(getattr(value, name)) for name in fields})
    return value


def dumps(value: Any, **options: Any) -> str:
    """JSON of `value`, exact, with no raw control character in it: C0 (json's own escapes), DEL and C1 as \\uXXXX."""
    text = json.dumps(value, ensure_ascii=False, **options)
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m[0]):04x}", text)


class Scrubbing:
    """Wraps a printer: every argument of every method call passes `scrub` first (the human output's one gate)."""

    def __init__(self, printer: Any) -> None:
        self._printer = printer

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._printer, name)
        if not callable(method):
            return method
        return lambda *args, **kwargs: method(*map(scrub, args), **{k: scrub(v) for k, v in kwargs.items()})
