"""Extension data only for the callers that activate it (Profile v2, "What a client gets" (docs/profile.md §4)), at every level:
message metadata and `extensions`, artifacts, parts, history, status messages, ListTasks and push bodies.

For each activation (none, then each extension alone) one subject drives three tasks with that activation
and keeps every answer and every push delivery: the `support` conversation to completion (a raw file in
its first message, a question answered by text, a connection and an approval answered through
interactions/v1, a text "yes" in between), a `support` task canceled while it waits, and a task whose
effect's outcome was lost (effects/v1). Then every key and every string of all of it is walked: no profile
URI may stand anywhere but the activated one, and that one must stand where the agent produced it. Components
(docs/components.md) are no extension: every activation gets the same ones, with their text fallbacks, in answers
and pushes alike, and they carry no profile data.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from a2a_caller import EFFECTS, FILES, INTERACTIONS, PROFILE, PROGRESS, TELEMETRY
from conftest import ALICE, auth, poll, rpc, user_message
from consent import connect, disconnect
from nylorun.engine import Agent, Skill, Turn
from nylorun.profile.components import COMPONENT_MEDIA_TYPE, FALLBACK
from nylorun_local.runtime import LocalRuntime
from webhook_receiver import Receiver, own_secrets

MINE = {"mine": {"kept": True}}  # a caller's own metadata: it must round-trip in every tier
BOX_FILE = b"order A-1001, photo of the box"


class LostOutcome(BaseException):
    """The process dies mid-effect (BaseException: not an agent error the engine may catch)."""


@pytest.fixture(scope="module")
def uncertain_url(local_runtime: LocalRuntime) -> str:
    agent = Agent(name="t-vis-uncertain", description="loses an effect's outcome",
                  skills=[Skill(id="u", name="u", description="u", tags=["u"])])

    @agent.turn
    def run(turn: Turn) -> None:
        turn.plan("Charge")

        def charge(key: str) -> None:
            raise LostOutcome()

        turn.effect("charge", charge)

    local_runtime.add_agent(agent)
    return local_runtime.agent_url("t-vis-uncertain")


def uris(value: Any) -> set[str]:
    """Every profile URI in `value`, as a key or as a string, at any depth."""
    if isinstance(value, dict):
        return {k for k in value if k in PROFILE}.union(*(uris(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(uris(v) for v in value))
    return {value} if isinstance(value, str) and value in PROFILE else set()


class Observer:
    """One subject calling with one activation; keeps every answer. `peek` reads with every extension
    (only to learn interaction ids and wait for states), and what it reads is not kept."""

    def __init__(self, url: str, activated: list[str], hook: str) -> None:
        self.url, self.hook = url, hook
        self.headers = auth(**{"A2A-Extensions": ", ".join(activated)}) if activated else auth()
        self.seen: dict[str, Any] = {}

    def call(self, label: str, method: str, params: dict[str, Any], url: str | None = None) -> dict[str, Any]:
        answer = rpc(url or self.url, method, params, headers=self.headers)
        assert "result" in answer, answer
        self.seen[label] = answer
        return dict(answer["result"])

    def send(self, label: str, message: dict[str, Any], url: str | None = None, **config: Any) -> dict[str, Any]:
        params = {"message": message, "configuration": {"taskPushNotificationConfig": {"url": self.hook}, **config}}
        result = self.call(label, "SendMessage", params, url)
        return dict(result["task"])

    def peek(self, task_id: str, url: str | None = None) -> dict[str, Any]:
        headers = auth(**{"A2A-Extensions": ",".join(PROFILE)})
        return dict(rpc(url or self.url, "GetTask", {"id": task_id}, headers=headers)["result"])

    def interaction(self, task_id: str) -> str:
        return str(self.peek(task_id)["status"]["message"]["metadata"][INTERACTIONS]["interactionId"])

    def reads(self, label: str, task: dict[str, Any], url: str | None = None) -> None:
        """GetTask (all history, and the default) and ListTasks of the task's context, with everything."""
        self.call(f"{label} GetTask historyLength", "GetTask", {"id": task["id"], "historyLength": 100}, url)
        self.call(f"{label} GetTask", "GetTask", {"id": task["id"]}, url)
        listing = {"contextId": task["contextId"], "historyLength": 100, "includeArtifacts": True}
        self.call(f"{label} ListTasks", "ListTasks", listing, url)


def answer(task_id: str, text: str, **typed: Any) -> dict[str, Any]:
    if not typed:
        return user_message(text, taskId=task_id)
    return user_message(text, taskId=task_id, extensions=[INTERACTIONS], metadata={INTERACTIONS: typed})


def drive_support(observer: Observer) -> list[str]:
    """The walk-through to COMPLETED, then a task canceled while it waits. Returns both task ids."""
    raw = {"raw": base64.b64encode(BOX_FILE).decode(), "mediaType": "text/plain", "filename": "box.txt",
           "metadata": {"note": "mine"}}
    disconnect(observer.url.split("/v1/")[0], ALICE)  # connections outlive tasks: this walk connects afresh
    first = user_message("I want a refund", metadata=MINE)
    first["parts"].append(raw)
    task = observer.send("question", first)
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    task = observer.send("answered by text", answer(task["id"], "A-1001"))
    assert task["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"
    # A text reply to the connection is recorded and connects nothing (Profile v2: text never approves)
    task = observer.send("connection", answer(task["id"], "connected"))
    assert task["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"
    # docs/writing/connections.md: connected in a browser; the turn resumes by itself to the approval
    asked = observer.interaction(task["id"])
    connect(observer.peek(task["id"])["status"]["message"]["metadata"][INTERACTIONS]["detail"]["authorizationUrl"])
    poll(lambda: observer.peek(task["id"]), lambda t: t["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"
         and t["status"]["message"]["metadata"][INTERACTIONS]["interactionId"] != asked)
    task = observer.send("text does not approve", answer(task["id"], "yes"))
    assert task["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"
    approved = answer(task["id"], "ok", interactionId=observer.interaction(task["id"]), approved=True)
    task = observer.send("approval", approved)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    observer.reads("completed", task)
    history = observer.seen["completed GetTask historyLength"]["result"]["history"]
    assert history[0]["metadata"] == MINE and history[0]["parts"][1]["metadata"]["note"] == "mine"

    waiting = observer.send("to cancel", user_message("Please refund A-1002"))
    assert waiting["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"
    canceled = observer.call("CancelTask", "CancelTask", {"id": waiting["id"]})
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    observer.reads("canceled", canceled)
    return [task["id"], waiting["id"]]


def drive_uncertain(observer: Observer, url: str) -> str:
    """A task whose effect's outcome was lost (WORKING with effects/v1), then canceled."""
    task = observer.send("uncertain", user_message("charge"), url, returnImmediately=True)
    deadline = time.monotonic() + 30
    while EFFECTS not in uris(observer.peek(task["id"], url)) and time.monotonic() < deadline:
        time.sleep(0.1)
    observer.reads("uncertain", task, url)
    observer.call("uncertain CancelTask", "CancelTask", {"id": task["id"]}, url)
    return str(task["id"])


def components(message: dict[str, Any]) -> list[tuple[str, str]]:
    """(kind, title) of each component part of a message, after the text fallback that must come before it."""
    parts = message["parts"]
    found = []
    for index, part in enumerate(parts):
        if part.get("mediaType") == COMPONENT_MEDIA_TYPE:
            assert parts[index - 1]["metadata"] == {FALLBACK: True}, parts
            found.append((part["data"]["component"], part["data"]["title"]))
    return found


def pushes(receiver: Receiver, task_ids: list[str], timeout: float = 30) -> dict[str, Any]:
    """Every body pushed for the tasks, once each has pushed its terminal status and the support task its
    receipt."""

    def mine() -> list[dict[str, Any]]:
        bodies = [r["body"] for r in list(receiver.requests)]
        return [b for b in bodies if next(iter(b.values())).get("taskId") in task_ids]

    def done(bodies: list[dict[str, Any]]) -> bool:
        ended = {b["statusUpdate"]["taskId"] for b in bodies
                 if b.get("statusUpdate", {}).get("status", {}).get("state") in ("TASK_STATE_COMPLETED",
                                                                                  "TASK_STATE_CANCELED")}
        return ended == set(task_ids) and any("artifactUpdate" in b for b in bodies)

    deadline = time.monotonic() + timeout
    while not done(mine()) and time.monotonic() < deadline:
        time.sleep(0.1)
    bodies = mine()
    assert done(bodies), bodies
    assert all(r["verified"] for r in receiver.requests)
    return {f"push {i} {next(iter(b))}": b for i, b in enumerate(bodies)}


@pytest.mark.parametrize("activated", [[], *[[uri] for uri in PROFILE]], ids=["none", *[u.split("/")[-2] for u in PROFILE]])
def test_only_activated_extension_data_reaches_a_caller(
    local_runtime: LocalRuntime, uncertain_url: str, activated: list[str]
) -> None:
    receiver = Receiver(own_secrets(local_runtime.base_url, ALICE))
    try:
        observer = Observer(local_runtime.agent_url("support"), activated, receiver.url)
        task_ids = [*drive_support(observer), drive_uncertain(observer, uncertain_url)]
        everything = {**observer.seen, **pushes(receiver, task_ids)}
    finally:
        receiver.close()

    # Then no answer and no push body names an extension the caller did not activate, at any depth
    leaks = {label: sorted(uris(body) - set(activated)) for label, body in everything.items()}
    assert not any(leaks.values()), "\n".join(f"{label}: {u}" for label, u in leaks.items() if u)
    # And the activated one is there wherever the agent produced it: in answers and in push bodies alike
    for where in ("answers", "pushes"):
        bodies = [b for label, b in everything.items() if label.startswith("push") == (where == "pushes")]
        assert uris(bodies) == set(activated), where
    if activated == [FILES]:
        # files/v1 on the file parts too: the receipt artifact's part and the caller's file in history
        completed = observer.seen["completed GetTask historyLength"]["result"]
        assert completed["artifacts"][0]["parts"][0]["metadata"][FILES]["kind"] == "receipt"
        assert completed["history"][0]["parts"][1]["metadata"][FILES]["kind"] == "input"
        artifact_pushes = [b["artifactUpdate"] for b in everything.values() if "artifactUpdate" in b]
        assert artifact_pushes[-1]["artifact"]["parts"][0]["metadata"][FILES]["kind"] == "receipt"
    # And every tier gets support's components: the order in view on the approval (also after the text "yes"),
    # the refund in the reply, in answers and in push bodies alike
    order, refund = ("keyvalue", "Order A-1001"), ("timeline", "Refund")
    answers = {label: observer.seen[label]["result"]["task"]["status"]["message"]
               for label in ("connection", "text does not approve", "approval")}
    assert [[(kind, title.split(" R-")[0]) for kind, title in components(m)] for m in answers.values()] == [
        [order], [order], [refund]
    ]
    pushed = [components(b["statusUpdate"]["status"]["message"]) for b in everything.values()
              if "message" in b.get("statusUpdate", {}).get("status", {})]
    assert [order] in pushed and any(c and c[0][0] == "timeline" for c in pushed)
    for uri, where in ((INTERACTIONS, "question"), (PROGRESS, "connection"), (TELEMETRY, "approval")):
        if activated == [uri]:
            assert uri in observer.seen[where]["result"]["task"]["status"]["message"]["extensions"]


# A model-backed Agent's tool loop (nylorun.models) stays in its journal. The `assistant` example on the
# scripted stand-in (NYLORUN_MODEL=scripted, read at each turn): what a caller may read is the model's words and the
# approval prompt its author wrote; never a tool's name, its arguments' JSON, its result, or a Converse block.
TOOL_LOOP = ("find_order", "refund_order", "toolUse", "toolResult", "toolUseId", "order_id", "idempotency",
             "refundId", "Espresso machine\", ", "inputSchema")


@pytest.fixture(scope="module")
def assistant_url(local_runtime: LocalRuntime) -> Iterator[str]:
    from nylorun_examples.assistant import agent

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NYLORUN_MODEL", "scripted")
        local_runtime.add_agent(agent)
        yield local_runtime.agent_url("assistant")


@pytest.mark.parametrize("activated", [[], list(PROFILE)], ids=["none", "all"])
def test_a_model_backed_agents_tool_loop_never_reaches_a_caller(
    local_runtime: LocalRuntime, assistant_url: str, activated: list[str]
) -> None:
    receiver = Receiver(own_secrets(local_runtime.base_url, ALICE))
    try:
        # Given a caller who asks the assistant for a refund, and approves it
        observer = Observer(assistant_url, activated, receiver.url)
        task = observer.send("refund", user_message("Please refund A-1001"))
        assert task["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"
        approved = answer(task["id"], "ok", interactionId=observer.interaction(task["id"]), approved=True)
        task = observer.send("approved", approved)
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        observer.reads("completed", task)
        deadline = time.monotonic() + 30
        bodies: list[dict[str, Any]] = []
        while time.monotonic() < deadline and not any(
            b.get("statusUpdate", {}).get("status", {}).get("state") == "TASK_STATE_COMPLETED" for b in bodies
        ):
            time.sleep(0.1)
            bodies = [r["body"] for r in list(receiver.requests)
                      if next(iter(r["body"].values())).get("taskId") == task["id"]]
    finally:
        receiver.close()
    # When everything the caller got is read: every answer, GetTask with history, ListTasks, every push body
    seen = json.dumps({**observer.seen, "pushes": bodies})
    # Then the model's answer and the author's prompt are there, and nothing of the tool loop is
    assert "is refunded: 249.00 EUR" in seen and "Refund order A-1001 in full?" in seen
    assert bodies, "no push arrived"
    assert [marker for marker in TOOL_LOOP if marker in seen] == []
