"""Tools: plain Python functions with type hints, offered to the model with a JSON schema pydantic makes from them.

    @tool
    def find_order(order_id: str) -> dict[str, Any]:
        "Look up an order by its id (for example A-1001)."

    @tool(needs_approval=True, prompt="Refund order {order_id}?")
    def refund_order(order_id: str, idempotency_key: str) -> dict[str, Any]:
        "Refund an order in full."

The docstring is the description the model reads. A parameter named `idempotency_key` is not offered to the model:
it gets the effect's key (pass it on to the system you call). Profile v2: none of this (names, arguments, results)
ever reaches a caller; the approval's `prompt` and `detail` are what the author writes, filled from the arguments
only where the author names them.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack, overload

from pydantic import BaseModel, ConfigDict, create_model

KEY_PARAMETER = "idempotency_key"
# Converse's ToolSpecification name: [a-zA-Z0-9_-]+, 1 to 64 characters
# (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ToolSpecification.html).
_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


@dataclass(frozen=True)
class Tool:
    fn: Callable[..., Any]
    name: str
    description: str
    arguments: type[BaseModel]
    needs_approval: bool = False
    prompt: str | Callable[..., str] | None = None
    detail: Callable[..., dict[str, Any]] | None = None
    idempotent: bool = False
    reconcile: Callable[[str], Any] | None = None
    # A built-in (nylorun.models.builtins): `fn(turn, **arguments)` makes one turn operation (question,
    # connection, plan), which journals itself, so it runs as it is, not as an effect.
    on_turn: bool = False

    @property
    def spec(self) -> dict[str, Any]:
        """Converse's `toolSpec`."""
        return {"name": self.name, "description": self.description, "inputSchema": {"json": self.arguments.model_json_schema()}}

    def takes_key(self) -> bool:
        return KEY_PARAMETER in inspect.signature(self.fn).parameters

    def approval(self, arguments: Mapping[str, Any]) -> tuple[str, dict[str, Any] | None]:
        """The approval's prompt and detail, as the tool's author wrote them."""
        assert self.prompt is not None
        prompt = self.prompt(**arguments) if callable(self.prompt) else self.prompt.format(**arguments)
        return prompt, (self.detail(**arguments) if self.detail else None)


def _make(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    needs_approval: bool = False,
    prompt: str | Callable[..., str] | None = None,
    detail: Callable[..., dict[str, Any]] | None = None,
    idempotent: bool = False,
    reconcile: Callable[[str], Any] | None = None,
    on_turn: bool = False,
) -> Tool:
    name = name or fn.__name__
    if not _NAME.match(name):
        raise ValueError(f"tool name {name!r}: Converse allows 1-64 of [a-zA-Z0-9_-]")
    if needs_approval and prompt is None:
        raise ValueError(f"tool {name!r} needs approval: give the prompt a person reads (prompt=...)")
    fields: dict[str, Any] = {}
    parameters = list(inspect.signature(fn, eval_str=True).parameters.values())
    for parameter in parameters[1:] if on_turn else parameters:  # a built-in's first parameter is the turn
        if parameter.name == KEY_PARAMETER:
            continue
        if parameter.annotation is inspect.Parameter.empty:
            raise TypeError(f"tool {name!r}: parameter {parameter.name!r} has no type hint")
        default = ... if parameter.default is inspect.Parameter.empty else parameter.default
        fields[parameter.name] = (parameter.annotation, default)
    arguments = create_model(f"{name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
    description = inspect.cleandoc(fn.__doc__ or "").split("\n\n", 1)[0] or name
    return Tool(fn, name, description, arguments, needs_approval, prompt, detail, idempotent, reconcile, on_turn)


class ToolOptions(TypedDict, total=False):
    name: str | None
    needs_approval: bool
    prompt: str | Callable[..., str] | None
    detail: Callable[..., dict[str, Any]] | None
    idempotent: bool
    reconcile: Callable[[str], Any] | None


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(**options: Unpack[ToolOptions]) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None, /, **options: Unpack[ToolOptions]
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a function a tool. Each call runs as `turn.effect` (once, ever): `idempotent`/`reconcile` say what a
    rerun may do when a run died mid-call (engine/replay.py); `needs_approval` asks a person first (`prompt`: a
    format string over the arguments, or a function of them; `detail`: a function of them)."""
    if fn is not None:
        return _make(fn, **options)
    return lambda f: _make(f, **options)
