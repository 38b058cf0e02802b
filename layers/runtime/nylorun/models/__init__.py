"""Model-backed Agents: a tool loop on Amazon Bedrock Converse, durable by replay
(docs/writing/model-agents.md).

    from nylorun.models import converse, model_from_settings, tool

    @agent.turn
    def run(turn: Turn) -> None:
        turn.reply(converse(turn, model_from_settings(), system="You help with orders.", tools=[find_order]))
"""

from __future__ import annotations

from nylorun.models.bedrock import Bedrock, Model
from nylorun.models.builtins import ask_connection, ask_person, keep_plan
from nylorun.models.loop import DEFAULT_MAX_MODEL_CALLS, conversation, converse
from nylorun.models.prices import DEFAULT_PRICES, Price, price_table
from nylorun.models.scripted import Script, Scripted
from nylorun.models.tools import Tool, tool
from nylorun.settings import Settings


def model_from_settings(script: Script | None = None, settings: Settings | None = None) -> Model:
    """The configured model (NYLORUN_MODEL): Bedrock, or with "scripted" the stand-in running `script`."""
    settings = settings or Settings.from_env()  # read at each turn: the cached one may predate a local Runtime
    if not settings.model:
        raise RuntimeError("no model configured: set NYLORUN_MODEL (the template's ModelId) or serve --model scripted")
    if settings.model == "scripted":
        if script is None:
            raise RuntimeError("NYLORUN_MODEL=scripted: this Agent has no script for the stand-in model")
        return Scripted(script)
    return Bedrock(settings.model, guardrail=settings.model_guardrail, prices=price_table(settings.model_prices))


__all__ = [
    "DEFAULT_MAX_MODEL_CALLS",
    "DEFAULT_PRICES",
    "Bedrock",
    "Model",
    "Price",
    "Script",
    "Scripted",
    "Tool",
    "ask_connection",
    "ask_person",
    "conversation",
    "converse",
    "keep_plan",
    "model_from_settings",
    "price_table",
    "tool",
]
