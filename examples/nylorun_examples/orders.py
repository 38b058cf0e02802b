"""`orders`: lists the orders `support` can refund, as a `table` component (docs/components.md).

A client that knows the component MIME draws the table; a core-tier client reads the text table next to it.
"""

from __future__ import annotations

from nylorun.engine import Agent, Component, Skill, Turn

from nylorun_examples.support import ORDERS

agent = Agent(
    name="orders",
    description="Lists your orders as a table.",
    skills=[
        Skill(
            id="list-orders",
            name="List orders",
            description="Lists the orders, or those whose item or id contains your text.",
            tags=["support", "components"],
            examples=["list my orders", "grinder"],
        )
    ],
)


@agent.turn
def run(turn: Turn) -> None:
    words = [w for w in turn.text.lower().split() if w not in {"list", "my", "orders", "all", "show"}]
    found = [o for o in ORDERS.values() if all(w in f"{o['orderId']} {o['item']}".lower() for w in words)]
    if not found:
        turn.reply(f"No order matches {turn.text!r}.")
        return
    rows = [[o["orderId"], o["item"], f"{o['amount']:.2f} {o['currency']}"] for o in found]
    turn.reply(
        f"{len(found)} order{'s' if len(found) != 1 else ''}:",
        Component("table", {"columns": ["Order", "Item", "Amount"], "rows": rows}, title="Orders"),
    )
