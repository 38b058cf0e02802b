"""`refunds`: an Agent that delegates (docs/writing/delegation.md). It hands a refund to the `support` Agent on
the same Runtime with `turn.delegate(...)`, and the caller sees one task: support's payments connection and its
approval arrive as this task's own interactions, and the caller's typed answers go back to support. The turn
function is not held while support waits for the person: the turn parks on Step Functions and wakes on support's
signed callback.

Profile v2 (never delegations): the reply is this Agent's own words. Nothing of support (its name, its task,
its messages, its receipt) reaches the caller.

Where support is: `NYLORUN_REFUNDS_SUPPORT_URL`, else `support` on this Runtime's own URL. As whom: the bearer
token in `NYLORUN_REFUNDS_TOKEN` (deployed, a token your identity provider issues this Agent, e.g. by client
credentials; `nylorun serve --auth dev` makes one for the subject `agent:refunds`).
"""

from __future__ import annotations

import os
import re

from nylorun.engine import Agent, Delegated, Skill, Turn

from nylorun_examples import support

agent = Agent(
    name="refunds",
    description="Refunds an order: checks it with you and gets it done.",
    skills=[
        Skill(
            id="refund",
            name="Refund an order",
            description="Refunds an order once you have connected payments and approved it.",
            tags=["refunds"],
            examples=["Refund order A-1001"],
        )
    ],
)

ORDER_ID = re.compile(r"\b([A-Z]-\d{3,6})\b", re.IGNORECASE)


def support_url() -> str:
    configured = os.environ.get("NYLORUN_REFUNDS_SUPPORT_URL")
    if configured:
        return configured
    base = os.environ.get("NYLORUN_PUBLIC_BASE_URL") or os.environ.get("NYLORUN_DELEGATION_CALLBACK_URL") or ""
    return base.rstrip("/") + "/v1/a2a/agents/support/"


@agent.turn
def run(turn: Turn) -> None:
    turn.plan("Check the order", "Refund it", "Confirm")
    found = ORDER_ID.search(turn.text)
    if found is None:
        turn.reject("Tell me which order to refund, for example: Refund order A-1001.")
        return
    order_id = found.group(1).upper()
    turn.mark(0, "done", f"Order {order_id}")

    turn.mark(1, "active")
    turn.say("Arranging the refund")
    result = turn.delegate(
        support_url(), f"Please refund order {order_id}", credentials=os.environ.get("NYLORUN_REFUNDS_TOKEN") or None
    )
    refunded, why = outcome(result)
    turn.mark(1, "done" if refunded else "failed", None if refunded else why)
    turn.mark(2, "done" if refunded else "skipped")
    if refunded:
        turn.reply(f"Order {order_id} is refunded. The money is back on your account in 3 to 5 business days.")
    else:
        turn.reply(f"Order {order_id} was not refunded: {why}")


def outcome(result: Delegated) -> tuple[bool, str]:
    """Whether support refunded, and if not, why (in this Agent's own words). Refunded only when its task
    completed with its receipt: support writes the receipt right after the refund and in no other case."""
    if result.ok and result.artifacts:
        return True, ""
    if not result.ok:
        return False, "the refund did not go through; nothing was charged back."
    if result.text.startswith(support.NOT_FOUND):
        return False, "no such order was found."
    if result.text == support.NOT_CONNECTED:
        return False, "the payments account was not connected; nothing was changed."
    if result.text == support.DECLINED:
        return False, "you declined it; nothing was changed."
    return False, "the refund was not confirmed; nothing was changed."
