"""The scripted stand-in model: the local Runtime's way to run a model-backed Agent without AWS.

It is chosen only explicitly (`nylorun serve --model scripted`, NYLORUN_MODEL=scripted; refused on Lambda by
nylorun.settings) and says so in every answer. It speaks Converse's shapes, so the tool loop, the journal,
approvals and usage run exactly as they do against Bedrock; what it "decides" is the Agent's own script: a
function of the person's latest words and the tool results since, returning the tool calls to make or the answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

NOTICE = "[scripted stand-in model: no model was called] "
ToolCall = tuple[str, dict[str, Any]]
Script = Callable[[str, list[tuple[str, Any]]], "list[ToolCall] | str"]


@dataclass
class Scripted:
    script: Script
    model_id: str = "scripted"

    def converse(self, request: dict[str, Any]) -> dict[str, Any]:
        messages: list[dict[str, Any]] = request["messages"]
        spoken = [i for i, m in enumerate(messages) if m["role"] == "user" and any("text" in b for b in m["content"])]
        start = spoken[-1] if spoken else 0
        text = " ".join(b["text"] for b in messages[start]["content"] if "text" in b)
        names: dict[str, str] = {}
        results: list[tuple[str, Any]] = []
        for message in messages[start + 1 :]:
            for block in message["content"]:
                if "toolUse" in block:
                    names[block["toolUse"]["toolUseId"]] = block["toolUse"]["name"]
                if "toolResult" in block:
                    result = block["toolResult"]["content"][0]
                    results.append((names[block["toolResult"]["toolUseId"]], result.get("json", result.get("text"))))
        decided = self.script(text, results)
        content: list[dict[str, Any]]
        if isinstance(decided, str):
            content = [{"text": NOTICE + decided}]
            stop = "end_turn"
        else:
            content = [
                {"toolUse": {"toolUseId": f"scripted-{len(results) + n}", "name": name, "input": arguments}}
                for n, (name, arguments) in enumerate(decided)
            ]
            stop = "tool_use"
        # Tokens as a rough count (4 characters each), so usage flows as it does from Bedrock; priced at 0.
        used_in, used_out = len(json.dumps(request)) // 4, len(json.dumps(content)) // 4
        return {
            "output": {"message": {"role": "assistant", "content": content}},
            "stopReason": stop,
            "usage": {"inputTokens": used_in, "outputTokens": used_out, "totalTokens": used_in + used_out},
            "metrics": {"latencyMs": 0},
        }

    def cost(self, usage: Mapping[str, Any]) -> float:
        return 0.0
