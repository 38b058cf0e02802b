"""What the scripted stand-in model does for `assistant` (nylorun.models.scripted): a fixed script, not a model.

From the person's latest words and the tool results since: ask which order when they name none (`ask_person`), look
the order up, refund it when asked (the refund needs approval; a denial comes back as text), then answer from the
results.
"""

from __future__ import annotations

import re
from typing import Any

from nylorun.models.scripted import ToolCall

ORDER_ID = re.compile(r"\b([A-Z]-\d{3,6})\b", re.IGNORECASE)


def assistant_script(text: str, results: list[tuple[str, Any]]) -> list[ToolCall] | str:
    done = dict(results)  # the latest result of each tool
    found = ORDER_ID.search(text) or ORDER_ID.search(str(done.get("ask_person", {}).get("answer", "")))
    if found is None:
        return [("ask_person", {"question": "Which order do you mean? Give me its id, for example A-1001."})]
    order_id = found.group(1).upper()
    if "find_order" not in done:
        return [("find_order", {"order_id": order_id})]
    order = done["find_order"]
    if "error" in order:
        return f"I could not find order {order_id}."
    if "refund" in text.lower() and "refund_order" not in done:
        return [("refund_order", {"order_id": order_id})]
    refund = done.get("refund_order")
    if isinstance(refund, str):
        return f"I did not refund order {order_id}: the refund was not approved."
    if refund is not None:
        return f"Order {order_id} ({order['item']}) is refunded: {refund['amount']:.2f} {order['currency']}."
    return f"Order {order_id} is one {order['item']}, {order['amount']:.2f} {order['currency']}."
