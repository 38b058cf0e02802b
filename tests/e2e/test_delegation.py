"""Durable delegation (docs/writing/delegation.md), end to end on the local Runtime: the a2a-sdk client calls the
example `refunds`, which hands the refund to `support` on the same Runtime with `turn.delegate(...)`.

* the caller sees one task, which asks for support's payments connection and its approval as its own
  interactions; approved, it completes, and support refunded once;
* canceling the outer task while support waits cancels support's task (real CancelTask);
* a crash of the turn function right after the delegate call (the send made, its result never journaled) does
  not send the message twice: the rerun finds the task the send made;
* a callback to the delegation endpoint that is not the delegate's signed delivery is refused, and wakes
  nothing; the delegate's own wakes the turn;
* nothing of support (its task, its context, its URL, its messages, its receipt) is in any answer or push body.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from a2a_caller import PROFILE, Caller, run, state, status_ext
from conftest import ALICE, BOB, auth, poll, rpc, user_message
from consent import connect, disconnect
from nylorun.engine import Agent, Skill, Turn
from nylorun.engine.delegation import open_record
from nylorun.ports import JournalEntry
from nylorun_examples.support import REFUNDS
from nylorun_local.runtime import LocalRuntime
from standardwebhooks.webhooks import Webhook
from webhook_receiver import Receiver, own_secrets

pytestmark = pytest.mark.e2e

INTERACTIONS = "https://docs.nylorun.com/a2a/interactions/v1"
TELEMETRY = "https://docs.nylorun.com/a2a/telemetry/v1"
ASKING = ("TASK_STATE_AUTH_REQUIRED", "TASK_STATE_INPUT_REQUIRED")
ENDED = ("TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED")


def journal(local_runtime: LocalRuntime, task_id: str) -> dict[int, JournalEntry]:
    assert local_runtime.runtime is not None
    return local_runtime.runtime.store.journal(task_id)


def delegation(local_runtime: LocalRuntime, task_id: str) -> dict[str, Any]:
    """What the outer turn journaled of its delegate call (the test looks behind the caller's back)."""
    sent = poll(
        lambda: [e for e in journal(local_runtime, task_id).values() if e.kind == "effect" and e.name == "delegate" and e.finished],
        bool,
        timeout=30,
    )
    assert sent, "the turn never journaled its delegate call"
    return dict(sent[0].result)


def delegate_task(local_runtime: LocalRuntime, sent: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
    answer = rpc(local_runtime.agent_url("support") + "/", "GetTask", {"id": sent["taskId"]}, headers=headers)
    assert "result" in answer, answer
    return dict(answer["result"])


def refunds_token() -> str:
    return os.environ["NYLORUN_REFUNDS_TOKEN"]  # the local Runtime's dev token for agent:refunds


def as_refunds(local_runtime: LocalRuntime, task_id: str, sent: dict[str, Any]) -> dict[str, str]:
    """The headers refunds calls support with for this task: agent:refunds, on behalf of the task's caller."""
    assert local_runtime.runtime is not None
    headers, _ = open_record(sent, local_runtime.runtime.sealer, task_id)
    assert headers["Authorization"] == f"Bearer {refunds_token()}"
    return {"A2A-Version": "1.0", **headers}


# ---------------------------------------------------------------------------------------------- the sample
@pytest.fixture(autouse=True)
def refunds_not_connected(local_runtime: LocalRuntime) -> None:
    """refunds calls support on behalf of each caller, whose payments connection there outlives each task: each
    test starts without it (docs/writing/connections.md)."""
    disconnect(local_runtime.base_url, next(iter(local_runtime.agent_tokens)), on_behalf_of="alice")


def test_the_caller_sees_one_task_that_asks_for_the_delegates_connection_and_approval_and_completes_once(
    local_runtime: LocalRuntime,
) -> None:
    refunds_before = len(REFUNDS)
    url = local_runtime.agent_url("refunds") + "/"
    receiver = Receiver(own_secrets(local_runtime.base_url, ALICE))
    try:

        async def flow() -> dict[str, Any]:
            async with Caller(url, ALICE, PROFILE) as caller:
                task = await caller.send("Refund order A-1001", return_immediately=True)
                # The caller's own push config on the outer task: every push body is checked below too.
                config = {"taskId": task["id"], "url": receiver.url, "id": "mine"}
                created = rpc(url, "CreateTaskPushNotificationConfig", config, token=ALICE)
                assert "result" in created, created
                return task

        task = run(flow)
        caller = Caller(url, ALICE, PROFILE)
        caller.context_id = task["contextId"]  # the same conversation

        async def rest() -> tuple[list[dict[str, Any]], dict[str, Any]]:
            async with caller:
                seen = []
                view = await caller.wait_for(task["id"], lambda t: state(t) in ASKING or state(t) in ENDED, timeout=60)
                seen.append(view)
                # Given support asks for its payments connection: the caller is asked, as this task's interaction
                asked = status_ext(view, INTERACTIONS)
                assert state(view) == "TASK_STATE_AUTH_REQUIRED", view["status"]
                assert asked["kind"] == "connection" and asked["detail"]["connection"] == "payments", asked
                assert "payments account" in asked["prompt"]
                # Profile v2: text never approves — a plain "yes" leaves it waiting
                await caller.send("yes, go ahead", task_id=task["id"], return_immediately=True)
                still = await caller.get(task["id"])
                assert state(still) == "TASK_STATE_AUTH_REQUIRED" and status_ext(still, INTERACTIONS) == asked
                # docs/writing/connections.md: the person connects in a browser; the page names support's caller
                await asyncio.to_thread(connect, asked["detail"]["authorizationUrl"])
                view = await caller.wait_for(
                    task["id"],
                    lambda t: state(t) in ENDED
                    or (state(t) in ASKING and status_ext(t, INTERACTIONS)["interactionId"] != asked["interactionId"]),
                    timeout=60,
                )
                seen.append(view)
                # Then support's approval, as the same kind, with its prompt and detail
                approval = status_ext(view, INTERACTIONS)
                assert approval["kind"] == "approval", view["status"]
                assert "Refund 249.00 EUR for order A-1001" in approval["prompt"]
                assert approval["detail"] == {"orderId": "A-1001", "amount": 249.0, "currency": "EUR"}
                await caller.send(
                    "ok", task_id=task["id"], answer={"interactionId": approval["interactionId"], "approved": True},
                    return_immediately=True,
                )
                final = await caller.wait_for(task["id"], lambda t: state(t) in ENDED, timeout=60)
                seen.append(await caller.get(task["id"], history_length=100))
                return seen, final

        seen, final = run(rest)
        # Then it completes with the Agent's own words, and support refunded exactly once
        assert state(final) == "TASK_STATE_COMPLETED", final["status"]
        assert "Order A-1001 is refunded" in final["status"]["message"]["parts"][0]["text"]
        assert len(REFUNDS) == refunds_before + 1
        # support's usage (350 + 120 tokens) is in the outer turn's totals (telemetry/v1)
        assert status_ext(final, TELEMETRY)["tokens"] >= 470
        sent = delegation(local_runtime, task["id"])
        in_context = rpc(
            local_runtime.agent_url("support") + "/", "ListTasks", {"contextId": sent["contextId"]}, headers=as_refunds(local_runtime, task["id"], sent)
        )["result"]["tasks"]
        assert [t["status"]["state"] for t in in_context] == ["TASK_STATE_COMPLETED"]  # one task: sent once

        # The redaction check: nothing of support in any answer or push body the caller got
        pushed = receiver.wait(1)
        poll(lambda: [r for r in receiver.requests if "COMPLETED" in json.dumps(r["body"])], bool, timeout=20)
        listed = rpc(url, "ListTasks", {"contextId": final["contextId"], "historyLength": 100}, headers=auth(ALICE, **{"A2A-Extensions": ",".join(PROFILE)}))
        everything = json.dumps([seen, final, listed, [r["body"] for r in pushed]])
        # docs/writing/connections.md: the one thing of support the caller is given is where to consent,
        # support's own page
        consent_page = status_ext(seen[0], INTERACTIONS)["detail"]["authorizationUrl"]
        assert consent_page.startswith(f"{local_runtime.base_url}/v1/a2a/connections/start?"), consent_page
        everything = everything.replace(json.dumps(consent_page)[1:-1], "<the consent page>")
        delegate_view = delegate_task(local_runtime, sent, as_refunds(local_runtime, task["id"], sent))
        secret_bits = [
            sent["taskId"],
            sent["contextId"],
            "agents/support",
            "support",
            *[m["messageId"] for m in delegate_view.get("history") or []],
            *[a["artifactId"] for a in delegate_view.get("artifacts") or []],
            "A-1001.txt",  # its receipt
            "R-0",  # its refund id
            "Refunded 249.00",  # its reply
            "Connect payments",  # its plan
        ]
        for entry in journal(local_runtime, task["id"]).values():  # the delegate's own interaction ids
            asked_there = (((entry.result or {}).get("task") or {}).get("status") or {}).get("message") or {}
            if isinstance(entry.result, dict) and INTERACTIONS in (asked_there.get("metadata") or {}):
                secret_bits.append(asked_there["metadata"][INTERACTIONS]["interactionId"])
        leaked = [bit for bit in secret_bits if bit in everything]
        assert leaked == [], leaked
        assert all(r["verified"] for r in receiver.requests)
    finally:
        receiver.close()


# ---------------------------------------------------------------------------------------------- cancel
def test_canceling_the_outer_task_while_the_delegate_waits_cancels_the_delegates_task(local_runtime: LocalRuntime) -> None:
    url = local_runtime.agent_url("refunds") + "/"
    caller = Caller(url, ALICE, PROFILE)

    async def flow() -> tuple[dict[str, Any], dict[str, Any]]:
        async with caller:
            task = await caller.send("Refund order A-1002", return_immediately=True)
            view = await caller.wait_for(task["id"], lambda t: state(t) in ASKING, timeout=60)
            return task, view

    task, view = run(flow)
    # Given support waits for its payments connection (and so does the outer task, for the caller)
    assert state(view) == "TASK_STATE_AUTH_REQUIRED"
    sent = delegation(local_runtime, task["id"])
    refunds = as_refunds(local_runtime, task["id"], sent)
    assert state(delegate_task(local_runtime, sent, refunds)) == "TASK_STATE_AUTH_REQUIRED"

    async def cancel() -> dict[str, Any]:
        async with Caller(url, ALICE, PROFILE) as again:
            return await again.cancel(task["id"])

    # When the caller cancels the outer task
    canceled = run(cancel)
    assert state(canceled) == "TASK_STATE_CANCELED"
    # Then support's task is canceled too
    delegate = poll(lambda: delegate_task(local_runtime, sent, refunds), lambda t: state(t) in ENDED, timeout=20)
    assert state(delegate) == "TASK_STATE_CANCELED", delegate["status"]


# ---------------------------------------------------------------------------------------------- a crash
class Crash(BaseException):
    """The turn function dying (no agent code catches a BaseException)."""


@pytest.fixture(scope="module")
def crashing(local_runtime: LocalRuntime) -> Iterator[dict[str, Any]]:
    """An Agent that delegates to support as bob; the turn function's store dies once, right after the delegate
    call was made and before its result is journaled (the journal keeps it started, never finished)."""
    turn_runtime = local_runtime._functions["TurnFunction"].runtime
    store, client = turn_runtime.store, turn_runtime.delegates
    finish, send = store.journal_finish, client.send
    fired: dict[str, Any] = {"count": 0, "sends": []}
    agent = Agent(name="t-delegate-crash", description="delegates", skills=[Skill(id="t", name="t", description="t", tags=["t"])])

    @agent.turn
    def go(turn: Turn) -> None:
        result = turn.delegate(local_runtime.agent_url("support") + "/", turn.text, credentials=BOB)
        turn.reply("done" if result.ok else result.state)

    def dying_finish(task_id: str, seq: int, result: Any) -> None:
        record = store.get(task_id)
        mine = record is not None and record.owner.agent == agent.name
        if mine and fired["count"] == 0 and isinstance(result, dict) and "contextId" in result and "startedAt" in result:
            fired["count"] += 1
            raise Crash()
        finish(task_id, seq, result)

    def counted_send(url: str, headers: dict[str, str], params: dict[str, Any]) -> dict[str, Any]:
        fired["sends"].append(params["message"].get("contextId"))  # every SendMessage the Runtime makes
        return send(url, headers, params)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(store, "journal_finish", dying_finish)
        patch.setattr(client, "send", counted_send)
        local_runtime.add_agent(agent)
        yield fired


def test_a_crash_after_the_delegate_call_does_not_send_the_message_twice(
    local_runtime: LocalRuntime, crashing: dict[str, Any]
) -> None:
    url = local_runtime.agent_url("t-delegate-crash") + "/"
    sent_at = rpc(url, "SendMessage", {"message": user_message("Please refund order A-1001"), "configuration": {"returnImmediately": True}})
    task_id = sent_at["result"]["task"]["id"]
    # When the turn function dies after the send (Step Functions runs the turn again)
    view = poll(
        lambda: rpc(url, "GetTask", {"id": task_id}, headers=auth(ALICE, **{"A2A-Extensions": INTERACTIONS}))["result"],
        lambda t: t["status"]["state"] in (*ASKING, *ENDED),
        timeout=60,
    )
    assert crashing["count"] == 1  # it did die there
    # Then the turn goes on (support's connection is asked for), not reported uncertain
    assert view["status"]["state"] == "TASK_STATE_AUTH_REQUIRED", view["status"]
    assert status_ext(view, INTERACTIONS)["kind"] == "connection"
    # and support got the message once: one task in the context the delegation named
    sent = delegation(local_runtime, task_id)
    tasks = rpc(local_runtime.agent_url("support") + "/", "ListTasks", {"contextId": sent["contextId"]}, token=BOB)
    assert len(tasks["result"]["tasks"]) == 1, tasks
    assert crashing["sends"].count(sent["contextId"]) == 1  # the rerun found the task: no second SendMessage
    rpc(url, "CancelTask", {"id": task_id})


# ---------------------------------------------------------------------------------------------- callbacks
def serve_held_delegation(local_runtime: LocalRuntime, held_name: str, outer_name: str) -> threading.Event:
    """`held_name` works until the event is set; `outer_name` delegates to it as alice (alice's keys sign its
    pushes) and replies "delegate <state>"."""
    release = threading.Event()
    skills = [Skill(id="t", name="t", description="t", tags=["t"])]
    held_agent = Agent(name=held_name, description="works until released", skills=skills)
    outer = Agent(name=outer_name, description="delegates", skills=skills)

    @held_agent.turn
    def hold(turn: Turn) -> None:
        release.wait(120)
        turn.reply("released")

    @outer.turn
    def go(turn: Turn) -> None:
        result = turn.delegate(local_runtime.agent_url(held_name) + "/", "work", credentials=ALICE)
        turn.reply(f"delegate {result.state}")

    local_runtime.add_agent(held_agent)
    local_runtime.add_agent(outer)
    return release


@pytest.fixture(scope="module")
def held(local_runtime: LocalRuntime) -> Iterator[threading.Event]:
    release = serve_held_delegation(local_runtime, "t-held", "t-delegate-held")
    yield release
    release.set()


def open_wait(local_runtime: LocalRuntime, task_id: str) -> JournalEntry | None:
    entries = journal(local_runtime, task_id)
    last = entries[max(entries)] if entries else None
    return last if last is not None and last.kind == "wait" and not last.finished else None


def woken_by(local_runtime: LocalRuntime, task_id: str) -> set[str]:
    """The deliveries (webhook-ids) that woke the turn's waits."""
    entries = journal(local_runtime, task_id).values()
    return {e.result["delivery"] for e in entries if e.kind == "wait" and (e.result or {}).get("woken") == "callback"}


def callback(
    base: str, task_id: str, key: str, token: str, secret: str, body: dict[str, Any], msg_id: str | None = None
) -> httpx.Response:
    raw = json.dumps(body)
    msg_id, at = msg_id or f"msg_{uuid.uuid4().hex}", int(time.time())
    signature = Webhook(secret).sign(msg_id, datetime.fromtimestamp(at, tz=UTC), raw)
    headers = {
        "content-type": "application/json",
        "webhook-id": msg_id,
        "webhook-timestamp": str(at),
        "webhook-signature": signature,
        "x-a2a-notification-token": token,
    }
    return httpx.post(f"{base}/v1/a2a/delegations/{task_id}/{key}", content=raw, headers=headers, timeout=10)


def waiting_delegation(local_runtime: LocalRuntime, url: str) -> tuple[str, str, str]:
    """Send the delegating Agent at `url` a message and wait until its turn waits for its delegate: the task's id,
    the delegation's key and the delegate's task id."""
    from nylorun.engine.replay import opaque_id

    task_id = rpc(url, "SendMessage", {"message": user_message("go"), "configuration": {"returnImmediately": True}})["result"]["task"]["id"]
    poll(lambda: open_wait(local_runtime, task_id), lambda w: w is not None, timeout=60)
    entries = journal(local_runtime, task_id)
    seq = next(s for s, e in entries.items() if e.kind == "effect" and e.name == "delegate")
    return task_id, opaque_id(task_id, seq, "eff"), str(entries[seq].result["taskId"])


def test_a_callback_that_is_not_the_delegates_signed_delivery_is_refused_and_wakes_nothing(
    local_runtime: LocalRuntime, held: threading.Event
) -> None:
    from nylorun.engine.delegation import callback_token

    url = local_runtime.agent_url("t-delegate-held") + "/"
    # Given the turn waits for its delegate (parked, the task WORKING)
    task_id, key, delegate_id = waiting_delegation(local_runtime, url)
    token = callback_token(task_id, key)
    alice_key, bob_key = own_secrets(local_runtime.base_url, ALICE)[0], own_secrets(local_runtime.base_url, BOB)[0]
    about_it = {"statusUpdate": {"taskId": delegate_id, "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"}}}
    other = {"statusUpdate": {"taskId": str(uuid.uuid4()), "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"}}}
    base = local_runtime.base_url

    # When callbacks arrive that the delegate did not sign for this delegation (each with a delivery id of its own)
    forged = {
        "a stranger's key": (401, task_id, token, "whsec_" + "c3RyYW5nZXItc2VjcmV0LWtleS0zMmJ5dGVzLWxvbmch", about_it),
        "another subject's key": (401, task_id, token, bob_key, about_it),
        "no token": (401, task_id, "", alice_key, about_it),
        "another delegation's token": (401, task_id, callback_token(task_id, "eff-0"), alice_key, about_it),
        "another task's path": (401, str(uuid.uuid4()), token, alice_key, about_it),
        "signed, about another task": (400, task_id, token, alice_key, other),
    }
    answers = {}
    for name, (_, path_task, its_token, secret, body) in forged.items():
        poll(lambda: open_wait(local_runtime, task_id), lambda w: w is not None, timeout=30)  # sent while it waits
        answers[name] = callback(base, path_task, key, its_token, secret, body, msg_id=f"msg_forged_{uuid.uuid4().hex}")
    # Then each is refused (401; 400 for a delivery about another task), without a trace of the Runtime's insides,
    # and none of them woke the turn
    assert {name: r.status_code for name, r in answers.items()} == {name: f[0] for name, f in forged.items()}
    assert all("Traceback" not in r.text for r in answers.values())
    assert not [d for d in woken_by(local_runtime, task_id) if d.startswith("msg_forged_")]

    # When the delegate's own signed delivery arrives while the turn waits: the wait ends, woken by it
    mine = f"msg_signed_{uuid.uuid4().hex}"
    for _ in range(3):  # a poll may end the wait just before the delivery lands: then the next wait takes it
        poll(lambda: open_wait(local_runtime, task_id), lambda w: w is not None, timeout=30)
        assert callback(base, task_id, key, token, alice_key, about_it, msg_id=mine).status_code == 204
        if mine in woken_by(local_runtime, task_id):
            break
    assert mine in woken_by(local_runtime, task_id)
    held.set()
    done = poll(lambda: rpc(url, "GetTask", {"id": task_id})["result"], lambda t: t["status"]["state"] in ENDED, timeout=60)
    assert done["status"]["message"]["parts"][0]["text"] == "delegate completed"
