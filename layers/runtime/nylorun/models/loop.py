"""The tool loop: call the model, run the tools it asks for, give it their results, until it answers.

Durable by replay (docs/writing/index.md#how-a-turn-survives): each model call is a journaled effect, so a
rerun of the turn reads the journaled answer and never calls the model again (a model call that was lost is
simply made again, `idempotent=True`: it changes nothing outside); each tool call is its own effect with its
own idempotency key; a tool that needs approval asks `turn.approval` first (the turn stops until a person
answers, then replays to here). Profile v2: the caller sees only the model's final words; tool names,
arguments, results and the model's tool-use blocks stay in the journal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pydantic import ValidationError
from pydantic_core import to_jsonable_python

from nylorun.engine.turn import Turn, TurnFailed
from nylorun.models.bedrock import Model
from nylorun.models.tools import Tool
from nylorun.observability import logger
from nylorun.protocol.models import Message, Role

MODEL_EFFECT = "nylorun.models.converse"
TOOL_EFFECT = "nylorun.models.tool:"
DENIED = "The person did not approve this action, so it was not done. Do not try it again in this turn."
DEFAULT_MAX_MODEL_CALLS = 8


def converse(
    turn: Turn,
    model: Model,
    *,
    system: str = "",
    tools: Sequence[Tool] = (),
    max_model_calls: int = DEFAULT_MAX_MODEL_CALLS,
    earlier_turns: int = 10,
) -> str:
    """Run the loop for this turn and return the model's answer (the agent replies with it).

    The conversation is this context's `earlier_turns` latest turns, then the caller's message. After
    `max_model_calls` calls without an answer the turn fails (TurnFailed) saying so; what tools did stays done.
    """
    by_name = {t.name: t for t in tools}
    base: dict[str, Any] = {"system": [{"text": system}]} if system else {}
    if tools:
        base["toolConfig"] = {"tools": [{"toolSpec": t.spec} for t in tools]}
    messages = conversation([*turn.earlier_turns(earlier_turns), turn.message])
    for _ in range(max_model_calls):
        answer = turn.effect(MODEL_EFFECT, _model_call(model, {**base, "messages": messages}), idempotent=True)
        usage = answer.get("usage") or {}
        turn.usage(tokens=int(usage.get("totalTokens", 0)), cost_usd=model.cost(usage))
        said: dict[str, Any] = answer["output"]["message"]
        messages = [*messages, said]
        if answer["stopReason"] != "tool_use":
            return "".join(block["text"] for block in said["content"] if "text" in block).strip()
        results = [_run_tool(turn, by_name, block["toolUse"]) for block in said["content"] if "toolUse" in block]
        messages = [*messages, {"role": "user", "content": results}]
    raise TurnFailed(f"The model gave no answer within {max_model_calls} steps, so this turn stopped there.")


def conversation(history: Iterable[Message]) -> list[dict[str, Any]]:
    """Messages as Converse takes them: text only, roles alternating, starting with the person's."""
    messages: list[dict[str, Any]] = []
    for message in history:
        text = message.text().strip()
        if not text:
            continue  # an interactions/v1 answer carries data, not words
        role = "user" if message.role == Role.USER else "assistant"
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].append({"text": text})
        else:
            messages.append({"role": role, "content": [{"text": text}]})
    while messages and messages[0]["role"] != "user":
        messages.pop(0)
    return messages


def _model_call(model: Model, request: dict[str, Any]) -> Callable[[str], dict[str, Any]]:
    def call(key: str) -> dict[str, Any]:
        response = model.converse(request)
        # What the journal keeps of a Converse answer: the message, why it stopped, the usage.
        return {field: response[field] for field in ("output", "stopReason", "usage") if field in response}

    return call


def _run_tool(turn: Turn, tools: dict[str, Tool], use: dict[str, Any]) -> dict[str, Any]:
    tool = tools.get(use["name"])
    if tool is None:
        return _result(use, f"There is no tool named {use['name']!r}.")
    try:
        parsed = tool.arguments.model_validate(use.get("input") or {})
    except ValidationError as invalid:
        return _result(use, f"Invalid arguments: {invalid.errors(include_url=False, include_context=False)}")
    arguments = {name: getattr(parsed, name) for name in type(parsed).model_fields}
    if tool.on_turn:
        return _result(use, tool.fn(turn, **arguments))
    if tool.needs_approval:
        prompt, detail = tool.approval(arguments)
        if not turn.approval(prompt, detail):
            return _result(use, DENIED)

    def call(key: str) -> Any:
        try:
            value = tool.fn(**arguments, **({"idempotency_key": key} if tool.takes_key() else {}))
        except Exception as error:  # noqa: BLE001 - the model reads that the tool failed, and may recover
            logger.warning("tool raised", extra={"error_type": type(error).__name__})
            return {"error": f"{type(error).__name__}: {error}"}
        return to_jsonable_python(value)

    value = turn.effect(f"{TOOL_EFFECT}{tool.name}", call, idempotent=tool.idempotent, reconcile=tool.reconcile)
    return _result(use, value)


def _result(use: dict[str, Any], value: Any) -> dict[str, Any]:
    content = {"text": value} if isinstance(value, str) else {"json": value if isinstance(value, dict) else {"result": value}}
    return {"toolResult": {"toolUseId": use["toolUseId"], "content": [content]}}
