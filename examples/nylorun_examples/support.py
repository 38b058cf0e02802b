"""`support`: a customer-support Agent that uses every Profile v2 feature.

A plan (progress/v1), step text, a question (INPUT_REQUIRED) when it does not know the order, a lookup
effect, a connection (AUTH_REQUIRED, kind `connection`) to the payments account, an approval
(AUTH_REQUIRED) before the refund effect, usage (telemetry/v1), a receipt artifact and a reply; components
(docs/components.md): the order as a `keyvalue` in view from the lookup on (so the approval shows what it is
about), and the refund as a `timeline` in the reply.

The "outside world" here is a tiny in-process fake (`ORDERS`, `REFUNDS`) behind the example payments API that
`nylorun serve` runs (payments_provider.py): the refund is a call to it with the person's payments connection, made
inside `turn.effect(...)` with the idempotency key passed on, as a real Agent calls its own systems.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Any

from nylorun.engine import Agent, Component, Connection, Skill, Turn

agent = Agent(
    name="support",
    description="Customer support: finds your order and refunds it once you approve.",
    skills=[
        Skill(
            id="refund",
            name="Refund an order",
            description="Looks up an order and refunds it after a person approves.",
            tags=["support", "refunds"],
            examples=["Please refund order A-1001", "I want my money back"],
        )
    ],
)

ORDER_ID = re.compile(r"\b([A-Z]-\d{3,6})\b", re.IGNORECASE)
ORDERS: dict[str, dict[str, Any]] = {
    "A-1001": {"orderId": "A-1001", "item": "Espresso machine", "amount": 249.0, "currency": "EUR"},
    "A-1002": {"orderId": "A-1002", "item": "Grinder", "amount": 89.5, "currency": "EUR"},
}
# Refunds issued, by idempotency key: a payments API that dedupes on the key, as real ones do.
REFUNDS: dict[str, dict[str, Any]] = {}
_lock = threading.Lock()
# The replies that end a turn without a refund (a delegating Agent, `refunds`, tells them apart by these).
NOT_FOUND = "I could not find order"
NOT_CONNECTED = "Without a payments connection I cannot refund; nothing was changed."
DECLINED = "Understood: no refund was made."
# Where the example payments API answers (`nylorun serve` runs it: nylorun_examples/payments_provider.py).
PAYMENTS_API = "NYLORUN_EXAMPLE_PAYMENTS_URL"


def lookup_order(order_id: str) -> dict[str, Any] | None:
    return ORDERS.get(order_id.upper())


def issue_refund(order: dict[str, Any], key: str) -> dict[str, Any]:
    with _lock:
        if key not in REFUNDS:
            REFUNDS[key] = {"refundId": f"R-{len(REFUNDS) + 1:05d}", "amount": order["amount"]}
        return REFUNDS[key]


def refund_with(payments: Connection, order: dict[str, Any], key: str) -> dict[str, Any]:
    """The refund, through the payments API with the person's connection (its token in the Authorization header;
    the idempotency key passed on, so a retried call refunds once). Without the example provider's API (a
    Runtime that does not run it) the in-process fake takes it."""
    api = os.environ.get(PAYMENTS_API)
    if not api:
        payments.headers()  # still needs a live connection
        return issue_refund(order, key)
    with payments.client(timeout=10) as client:
        answer = client.post(f"{api}/refunds", json={"orderId": order["orderId"]}, headers={"Idempotency-Key": key})
    answer.raise_for_status()
    return {k: v for k, v in answer.json().items() if k in ("refundId", "amount")}


@agent.turn
def run(turn: Turn) -> None:
    turn.plan("Find the order", "Connect payments", "Approve the refund", "Refund", "Send the receipt")

    turn.mark(0, "active")
    turn.say("Finding your order")
    found = ORDER_ID.search(turn.text)
    order_id = found.group(1).upper() if found else None
    if order_id is None:
        answer = str(turn.question("Which order should I refund? (for example A-1001)"))
        match = ORDER_ID.search(answer)
        order_id = match.group(1).upper() if match else answer.strip().upper()
    order = turn.effect("lookup_order", lambda key: lookup_order(order_id))
    turn.usage(tokens=350, cost_usd=0.0012)
    if order is None:
        turn.mark(0, "failed", f"No order {order_id}")
        turn.reply(f"{NOT_FOUND} {order_id}.")
        return
    turn.mark(0, "done", f"{order['item']}, {order['amount']:.2f} {order['currency']}")
    # A view of what the next steps are about: on the connection's and the approval's status messages too.
    turn.show("keyvalue", {"items": order_items(order)}, title=f"Order {order['orderId']}")

    turn.mark(1, "active")
    turn.say("Checking the payments connection")
    payments = turn.connection(
        "payments", scopes=["refunds"], prompt="Connect your payments account so I can issue the refund."
    )
    if not payments:
        turn.mark(1, "failed", "Not connected")
        turn.reply(NOT_CONNECTED)
        return
    turn.mark(1, "done")

    turn.mark(2, "active")
    approved = turn.approval(
        f"Refund {order['amount']:.2f} {order['currency']} for order {order['orderId']} ({order['item']})?",
        {"orderId": order["orderId"], "amount": order["amount"], "currency": order["currency"]},
    )
    if not approved:
        turn.mark(2, "failed", "Declined")
        turn.mark(3, "skipped")
        turn.mark(4, "skipped")
        turn.reply(DECLINED)
        return
    turn.mark(2, "done")

    turn.mark(3, "active")
    turn.say("Issuing the refund")
    refund = turn.effect("refund", lambda key: refund_with(payments, order, key))
    turn.usage(tokens=120, cost_usd=0.0004)
    turn.mark(3, "done", refund["refundId"])

    turn.mark(4, "active")
    receipt = (
        f"Refund {refund['refundId']}\nOrder {order['orderId']} ({order['item']})\n"
        f"Amount {order['amount']:.2f} {order['currency']}\n"
    )
    # files/v1: a versioned file in the agent's outputs, downloadable by a presigned URL.
    turn.write_file(f"receipts/{order['orderId']}.txt", receipt, kind="receipt", media_type="text/plain")
    turn.mark(4, "done")
    turn.reply(
        f"Refunded {order['amount']:.2f} {order['currency']} for order {order['orderId']} ({refund['refundId']}).",
        Component("timeline", {"steps": refund_steps(refund)}, title=f"Refund {refund['refundId']}"),
    )


def order_items(order: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"label": "Order", "value": order["orderId"]},
        {"label": "Item", "value": order["item"]},
        {"label": "Amount", "value": f"{order['amount']:.2f} {order['currency']}"},
    ]


def refund_steps(refund: dict[str, Any]) -> list[dict[str, Any]]:
    """Where the refund stands: the person approved, the payments API took it, the bank has yet to pay out."""
    return [
        {"label": "Approved", "state": "done"},
        {"label": "Refund issued", "state": "done", "note": refund["refundId"]},
        {"label": "Money back on your account", "state": "todo", "note": "3 to 5 business days"},
    ]
