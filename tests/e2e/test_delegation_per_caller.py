"""Delegation on behalf of each caller, end to end on the local Runtime: `refunds` calls `support` as the subject
`agent:refunds` (Profile v2: who the caller acts for), and support keeps each of refunds' callers apart within it.

* one caller filling her place at support (its open-turn quota) does not stop another caller's refund;
* ListTasks at support, as agent:refunds on behalf of one caller, lists that caller's delegated tasks only;
* a delegate whose artifacts are larger than one journal item still gives the delegating Agent a `Delegated`
  it can handle (the turn does not fail);
* a captured callback replayed 20 times wakes the waiting turn at most once.

The outer callers come through an api of their own over the session's stack (fresh subjects, quotas unlimited),
so the small quota the first test gives support's api never refuses them.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from conftest import poll, rpc, user_message
from fastapi.testclient import TestClient
from nylorun.domain.quotas import Quotas
from nylorun.engine import Agent, Skill, Turn
from nylorun.engine.delegation import callback_token, open_record
from nylorun.ports import JournalEntry
from nylorun.profile.extensions import INTERACTIONS
from nylorun.wiring import Runtime
from nylorun_local.runtime import LocalRuntime
from test_delegation import callback, open_wait, serve_held_delegation, waiting_delegation
from webhook_receiver import own_secrets

pytestmark = pytest.mark.e2e

ASKING = ("TASK_STATE_AUTH_REQUIRED", "TASK_STATE_INPUT_REQUIRED")
ENDED = ("TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED")
SKILLS = [Skill(id="t", name="t", description="t", tags=["t"])]


@dataclass
class Outer:
    """A caller of the session's Agents through an api of its own (a fresh subject)."""

    client: TestClient
    token: str
    subject: str

    def call(self, agent: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method, "params": params}
        headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {self.token}", "A2A-Extensions": INTERACTIONS}
        response = self.client.post(f"/v1/a2a/agents/{agent}", json=body, headers=headers)
        assert response.status_code == 200, response.text
        return dict(response.json())

    def send(self, agent: str, text: str) -> str:
        params = {"message": user_message(text), "configuration": {"returnImmediately": True}}
        answer = self.call(agent, "SendMessage", params)
        assert "result" in answer, answer
        return str(answer["result"]["task"]["id"])

    def settled(self, agent: str, task_id: str) -> dict[str, Any]:
        """The task once it asks the caller something or ends."""
        read = lambda: self.call(agent, "GetTask", {"id": task_id})["result"]
        return poll(read, lambda t: t["status"]["state"] in (*ASKING, *ENDED), timeout=60)


@pytest.fixture(scope="module")
def outer(local_runtime: LocalRuntime) -> Iterator[Callable[[str], Outer]]:
    running = local_runtime.runtime
    assert running is not None
    made: list[TestClient] = []

    def make(name: str) -> Outer:
        token, subject = f"tok-{uuid.uuid4()}", f"{name}-{uuid.uuid4()}"
        settings = running.settings.model_copy(update={"dev_tokens": {token: subject}})
        client = TestClient(Runtime(settings=settings, registry=running.registry).app())
        made.append(client)
        return Outer(client, token, subject)

    yield make
    for client in made:
        client.close()


def reply(task: dict[str, Any]) -> str:
    return str(task["status"]["message"]["parts"][0]["text"])


def journal(local_runtime: LocalRuntime, task_id: str) -> dict[int, JournalEntry]:
    assert local_runtime.runtime is not None
    return local_runtime.runtime.store.journal(task_id)


def delegated(local_runtime: LocalRuntime, task_id: str) -> tuple[dict[str, Any], dict[str, str]]:
    """What the outer turn journaled of its delegate call, and the headers it sends the delegate (opened)."""
    sent = poll(
        lambda: [e for e in journal(local_runtime, task_id).values() if e.kind == "effect" and e.name == "delegate" and e.finished],
        bool,
        timeout=30,
    )
    assert sent, "the turn never journaled its delegate call"
    assert local_runtime.runtime is not None
    headers, _ = open_record(sent[0].result, local_runtime.runtime.sealer, task_id)
    return dict(sent[0].result), headers


# ---------------------------------------------------------------------------------------------- quotas
def test_alice_filling_her_place_at_the_delegate_does_not_stop_bobs_refund(
    local_runtime: LocalRuntime, outer: Callable[[str], Outer], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given support's api allows 2 open turns per subject
    assert local_runtime.runtime is not None
    monkeypatch.setattr(local_runtime.runtime.store, "_quotas", Quotas(1000, 2, 1000, 100_000))
    alice, bob = outer("alice"), outer("bob")
    opened: list[tuple[Outer, str]] = []
    try:
        # and alice has 2 refunds open there (support waits for her payments connection)
        for _ in range(2):
            task_id = alice.send("refunds", "Refund order A-1002")
            opened.append((alice, task_id))
            assert alice.settled("refunds", task_id)["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"
        # When alice asks for a third, her place at support is full: that one does not go through
        third = alice.send("refunds", "Refund order A-1002")
        opened.append((alice, third))
        assert reply(alice.settled("refunds", third)).endswith("the refund did not go through; nothing was charged back.")
        # Then bob's refund still reaches support, which asks him for his payments connection
        bobs = bob.send("refunds", "Refund order A-1002")
        opened.append((bob, bobs))
        view = bob.settled("refunds", bobs)
        assert view["status"]["state"] == "TASK_STATE_AUTH_REQUIRED", reply(view)
        assert view["status"]["message"]["metadata"][INTERACTIONS]["kind"] == "connection"
    finally:
        for caller, task_id in opened:
            caller.call("refunds", "CancelTask", {"id": task_id})


# ---------------------------------------------------------------------------------------------- ListTasks
def test_list_tasks_at_the_delegate_shows_each_original_callers_tasks_apart(
    local_runtime: LocalRuntime, outer: Callable[[str], Outer]
) -> None:
    # Given alice and bob each have a refund that support works on (waiting for their payments connection)
    alice, bob = outer("alice"), outer("bob")
    tasks = {name: caller.send("refunds", "Refund order A-1002") for name, caller in (("alice", alice), ("bob", bob))}
    try:
        for name, caller in (("alice", alice), ("bob", bob)):
            assert caller.settled("refunds", tasks[name])["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"
        records = {name: delegated(local_runtime, task_id) for name, task_id in tasks.items()}
        support = local_runtime.agent_url("support") + "/"

        # When refunds lists support's tasks as it calls support for each of them (same subject, agent:refunds)
        def listed(headers: dict[str, str]) -> set[str]:
            answer = rpc(support, "ListTasks", {"pageSize": 100}, headers={"A2A-Version": "1.0", **headers})
            assert "result" in answer, answer
            return {t["id"] for t in answer["result"]["tasks"]}

        for_alice, for_bob = listed(records["alice"][1]), listed(records["bob"][1])
        # Then each list holds that caller's delegated task and not the other's
        assert records["alice"][0]["taskId"] in for_alice and records["bob"][0]["taskId"] not in for_alice
        assert records["bob"][0]["taskId"] in for_bob and records["alice"][0]["taskId"] not in for_bob
        # And a subject that is not a delegating identity cannot claim another's place: alice's own token with the
        # header refunds sent for bob lists none of bob's delegated tasks
        claimed = {k: v for k, v in records["bob"][1].items() if k.lower() != "authorization"}
        assert records["bob"][0]["taskId"] not in listed({**claimed, "Authorization": "Bearer tok-alice"})
    finally:
        for name, caller in (("alice", alice), ("bob", bob)):
            caller.call("refunds", "CancelTask", {"id": tasks[name]})


# ---------------------------------------------------------------------------------------------- big results
@pytest.fixture(scope="module")
def big_delegate(local_runtime: LocalRuntime) -> str:
    """`t-big` answers with 3 artifacts of 250 KB (its budget is 4 MiB); `t-big-outer` delegates to it and says
    what it got."""
    big = Agent(name="t-big", description="big artifacts", skills=SKILLS)
    outer_agent = Agent(name="t-big-outer", description="delegates", skills=SKILLS)

    @big.turn
    def make(turn: Turn) -> None:
        for n in range(3):
            turn.artifact(str(n) * 250_000, name=f"part-{n}")
        turn.reply("made them")

    @outer_agent.turn
    def go(turn: Turn) -> None:
        result = turn.delegate(local_runtime.agent_url("t-big") + "/", "make them", credentials="tok-alice")
        whole = sum(1 for a in result.artifacts for p in a.get("parts") or [] if len(p.get("text", "")) == 250_000)
        turn.reply(f"delegate {result.state}: {result.text}; {whole} whole artifacts")

    local_runtime.add_agent(big)
    local_runtime.add_agent(outer_agent)
    return "t-big-outer"


def test_a_delegates_artifacts_larger_than_a_journal_item_give_the_agent_a_result_it_can_handle(
    local_runtime: LocalRuntime, big_delegate: str
) -> None:
    url = local_runtime.agent_url(big_delegate) + "/"
    # When the Agent delegates to one that ends with 3 x 250 KB of artifacts
    task_id = rpc(url, "SendMessage", {"message": user_message("go"), "configuration": {"returnImmediately": True}})["result"]["task"]["id"]
    done = poll(lambda: rpc(url, "GetTask", {"id": task_id})["result"], lambda t: t["status"]["state"] in ENDED, timeout=90)
    # Then the turn completes with what the Agent made of the Delegated it got: completed, with the delegate's
    # words and as many whole artifacts as one journal item holds
    assert done["status"]["state"] == "TASK_STATE_COMPLETED", done["status"]
    words = reply(done)
    assert words.startswith("delegate completed: made them; "), words
    assert 1 <= int(words.split("; ")[1].split()[0]) < 3, words


# ---------------------------------------------------------------------------------------------- replays
@pytest.fixture(scope="module")
def waiting(local_runtime: LocalRuntime) -> Iterator[threading.Event]:
    release = serve_held_delegation(local_runtime, "t-held-replay", "t-replay-outer")
    yield release
    release.set()


def test_one_captured_callback_replayed_twenty_times_wakes_the_turn_at_most_once(
    local_runtime: LocalRuntime, waiting: threading.Event
) -> None:
    url = local_runtime.agent_url("t-replay-outer") + "/"
    # Given the turn waits for its delegate, and one signed delivery of the delegate's was captured
    task_id, key, delegate_id = waiting_delegation(local_runtime, url)
    secret = own_secrets(local_runtime.base_url, "tok-alice")[0]
    body = {"statusUpdate": {"taskId": delegate_id, "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}}
    captured = f"msg_captured_{uuid.uuid4().hex}"

    def woken() -> int:
        entries = journal(local_runtime, task_id).values()
        return sum(1 for e in entries if e.kind == "wait" and (e.result or {}).get("delivery") == captured)

    # When it is delivered, then replayed 20 times, each time while the turn waits again
    answers = []
    for _ in range(21):
        poll(lambda: open_wait(local_runtime, task_id), lambda w: w is not None, timeout=30)
        answers.append(callback(local_runtime.base_url, task_id, key, callback_token(task_id, key), secret, body, captured))
    # Then every delivery is answered 204 (a sender's retry stops) and it woke the turn at most once
    assert {r.status_code for r in answers} == {204}
    assert woken() <= 1, f"woken {woken()} times by one delivery"
    waiting.set()
    done = poll(lambda: rpc(url, "GetTask", {"id": task_id})["result"], lambda t: t["status"]["state"] in ENDED, timeout=60)
    assert reply(done) == "delegate completed", json.dumps(done["status"])[:300]
