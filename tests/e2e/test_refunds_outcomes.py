"""The example `refunds` tells the caller what `support` actually did with the refund it delegated: refunded,
not found, not connected, declined, or failed; never "refunded" when no refund was made."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from conftest import ALICE, BOB, auth, poll, rpc, user_message
from consent import connect, disconnect
from nylorun.profile.extensions import INTERACTIONS
from nylorun_local.runtime import LocalRuntime

pytestmark = pytest.mark.e2e

ASKING = ("TASK_STATE_AUTH_REQUIRED", "TASK_STATE_INPUT_REQUIRED")
SUBJECTS = {ALICE: "alice", BOB: "bob"}  # the local Runtime's dev tokens (tests/conftest.py)
ENDED = ("TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED")


def refund(
    local_runtime: LocalRuntime, text: str, answers: list[bool], token: str = ALICE, *, fresh: bool = True
) -> dict[str, Any]:
    """Ask `refunds` for `text` as `token`, answer each interaction it asks with the next of `answers` (connecting
    in a browser when it asks for a connection); the ended task."""
    url = local_runtime.agent_url("refunds") + "/"
    typed = auth(token, **{"A2A-Extensions": INTERACTIONS})
    if fresh:  # refunds calls support on behalf of each caller: each test starts with the caller's not connected
        disconnect(local_runtime.base_url, next(iter(local_runtime.agent_tokens)), on_behalf_of=SUBJECTS[token])
    task = rpc(url, "SendMessage", {"message": user_message(text), "configuration": {"returnImmediately": True}}, headers=typed)
    task = task["result"]["task"]
    asked: set[str] = set()

    def next_view() -> dict[str, Any]:
        done: Callable[[dict[str, Any]], bool] = lambda t: t["status"]["state"] in ENDED or (
            t["status"]["state"] in ASKING and open_id(t) not in asked
        )
        return poll(lambda: rpc(url, "GetTask", {"id": task["id"]}, headers=typed)["result"], done, timeout=60)

    view = next_view()
    while view["status"]["state"] in ASKING:
        interaction = open_id(view)
        asked.add(interaction)
        approved = answers.pop(0)
        asking = view["status"]["message"]["metadata"][INTERACTIONS]
        if asking["kind"] == "connection" and approved:  # docs/writing/connections.md: connected in a browser
            connect(asking["detail"]["authorizationUrl"])
            view = next_view()
            continue
        reply = user_message("ok", taskId=task["id"], metadata={INTERACTIONS: {"interactionId": interaction, "approved": approved}},
                             extensions=[INTERACTIONS])  # fmt: skip
        assert "result" in rpc(url, "SendMessage", {"message": reply, "configuration": {"returnImmediately": True}}, headers=typed)
        view = next_view()
    assert view["status"]["state"] == "TASK_STATE_COMPLETED", view["status"]
    return view


def open_id(task: dict[str, Any]) -> str:
    return str(task["status"]["message"]["metadata"][INTERACTIONS]["interactionId"])


def reply(task: dict[str, Any]) -> str:
    return str(task["status"]["message"]["parts"][0]["text"])


def test_an_unknown_order_is_not_reported_refunded(local_runtime: LocalRuntime) -> None:
    # When the caller asks to refund an order support cannot find
    task = refund(local_runtime, "Refund order Z-9999", answers=[])
    # Then the reply says it was not refunded, and why
    assert reply(task) == "Order Z-9999 was not refunded: no such order was found."


def test_a_refund_without_the_payments_connection_is_not_reported_refunded(local_runtime: LocalRuntime) -> None:
    # When the caller does not connect payments
    task = refund(local_runtime, "Refund order A-1002", answers=[False])
    # Then the reply says it was not refunded, and why
    assert reply(task) == "Order A-1002 was not refunded: the payments account was not connected; nothing was changed."


def test_a_declined_refund_is_not_reported_refunded(local_runtime: LocalRuntime) -> None:
    # When the caller connects payments, then declines the refund
    task = refund(local_runtime, "Refund order A-1002", answers=[True, False])
    # Then the reply says it was not refunded, and why
    assert reply(task) == "Order A-1002 was not refunded: you declined it; nothing was changed."


def test_an_approved_refund_is_reported_refunded(local_runtime: LocalRuntime) -> None:
    # When the caller connects payments and approves
    task = refund(local_runtime, "Refund order A-1002", answers=[True, True])
    # Then the reply says it is refunded
    assert reply(task) == "Order A-1002 is refunded. The money is back on your account in 3 to 5 business days."


def test_a_refund_support_never_took_is_reported_failed(local_runtime: LocalRuntime, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given support is not where refunds looks for it (an Agent this Runtime does not serve)
    monkeypatch.setenv("NYLORUN_REFUNDS_SUPPORT_URL", local_runtime.agent_url("nobody") + "/")
    # When the caller asks for a refund
    task = refund(local_runtime, "Refund order A-1002", answers=[])
    # Then the reply says it did not go through
    assert reply(task) == "Order A-1002 was not refunded: the refund did not go through; nothing was charged back."


def test_a_connection_made_through_refunds_serves_only_the_caller_who_made_it(local_runtime: LocalRuntime) -> None:
    # Given alice connected payments through refunds (support keeps it under refunds, within alice's scope)
    disconnect(local_runtime.base_url, next(iter(local_runtime.agent_tokens)), on_behalf_of="bob")
    refund(local_runtime, "Refund order A-1002", answers=[True, False])
    again = refund(local_runtime, "Refund order A-1002", answers=[False], fresh=False)  # no connection asked
    assert reply(again) == "Order A-1002 was not refunded: you declined it; nothing was changed."
    # When bob asks refunds for a refund and does not connect
    task = refund(local_runtime, "Refund order A-1002", answers=[False], token=BOB, fresh=False)
    # Then bob is asked to connect his own account, not served with alice's
    assert reply(task) == "Order A-1002 was not refunded: the payments account was not connected; nothing was changed."
