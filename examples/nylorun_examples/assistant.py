"""`assistant`: a model-backed Agent (nylorun.models; docs/writing/model-agents.md shows this file's code).

It answers questions about orders with a lookup tool and refunds one with an approval-gated tool; it may ask the
person which order they mean (the built-in `ask_person`). The model is
the one configured (NYLORUN_MODEL): a Bedrock model id when deployed; locally only the scripted stand-in chosen
explicitly with `nylorun serve --model scripted`, which plays `assistant_script` and says so in its replies.
Served when configured: `nylorun serve --model scripted` names it; deployed, name `nylorun_examples.assistant:agent`
in the Agents parameter beside a ModelId.
"""

from typing import Any

from nylorun.engine import Agent, Skill, Turn
from nylorun.models import ask_person, converse, model_from_settings, tool

from nylorun_examples.assistant_script import assistant_script
from nylorun_examples.support import ORDERS, issue_refund

agent = Agent(name="assistant", description="Answers questions about your orders; refunds one once you approve.",
              skills=[Skill(id="orders", name="Orders", description="Looks orders up and refunds them.")])


@tool
def find_order(order_id: str) -> dict[str, Any]:
    """Look up an order by its id (for example A-1001): its item, amount and currency."""
    return ORDERS.get(order_id.upper()) or {"error": f"there is no order {order_id}"}


@tool(needs_approval=True, prompt="Refund order {order_id} in full?")
def refund_order(order_id: str, idempotency_key: str) -> dict[str, Any]:
    """Refund an order in full. Use it only when the person asks for a refund."""
    order = ORDERS.get(order_id.upper())
    return issue_refund(order, idempotency_key) if order else {"error": f"there is no order {order_id}"}


@agent.turn
def run(turn: Turn) -> None:
    model = model_from_settings(script=assistant_script)  # NYLORUN_MODEL: a Bedrock model id, or "scripted"
    turn.reply(converse(turn, model, system="You help with orders.", tools=[find_order, refund_order, ask_person]))
