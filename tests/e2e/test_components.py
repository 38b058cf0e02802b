"""Typed components end to end (docs/components.md): over real HTTP against the local Runtime, with the
a2a-sdk 1.3.0 client (no extension activated: the core tier) and with the `nylorun` command.

Each core kind goes out in a reply and comes back through SendMessage and GetTask as a DataPart of the component
MIME that validates, with its text fallback before it; an invalid one is an error in the agent's code here (the
local Runtime is a development one) and never reaches the caller; a kind of one's own travels the same way; the CLI
draws each kind and `--json` carries them.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from a2a.types import GetTaskRequest, Task
from google.protobuf import json_format
from nylorun.engine import Agent, Component, Skill, Turn, code_ref, register_component
from nylorun.profile.components import COMPONENT_MEDIA_TYPE, FALLBACK
from nylorun_client.views import task_view
from nylorun_local.runtime import LocalRuntime
from test_cli import json_lines, nylorun
from test_sdk_client import connect, send_task, state, user_msg

pytestmark = pytest.mark.e2e

TABLE = Component("table", {"columns": ["Order", "Item", "Amount"], "rows": [["A-1001", "Espresso machine", 249.5],
                                                                             ["A-1002", "Grinder", None]]}, "Orders")
KEYVALUE = Component("keyvalue", {"items": [{"label": "Order", "value": "A-1001"}, {"label": "Paid", "value": True}]},
                     "Order A-1001")
TIMELINE = Component("timeline", {"steps": [{"label": "Approved", "state": "done"},
                                            {"label": "Refund issued", "state": "active", "note": "R-00001"},
                                            {"label": "Money back", "state": "todo"}]}, "Refund")
CODE_REF = code_ref("src/refunds/api.py", 12, 20, label="The refund handler")
CORE = {"table": TABLE, "keyvalue": KEYVALUE, "timeline": TIMELINE, "code-ref": CODE_REF}
# What a core-tier client reads: the text fallback of each.
FALLBACKS = {
    "table": "Orders\n| Order | Item | Amount |\n| --- | --- | --- |\n| A-1001 | Espresso machine | 249.5 |\n"
             "| A-1002 | Grinder |  |",
    "keyvalue": "Order A-1001\nOrder: A-1001\nPaid: yes",
    "timeline": "Refund\n[x] Approved\n[>] Refund issued — R-00001\n[ ] Money back",
    "code-ref": "The refund handler: src/refunds/api.py:12-20",
}
RATING = "t-components.rating"


def rating(props: dict[str, Any]) -> dict[str, Any]:
    if props.get("stars") not in (1, 2, 3, 4, 5):
        raise ValueError("stars: 1 to 5")
    return {"stars": props["stars"]}


@pytest.fixture(scope="module")
def components_url(local_runtime: LocalRuntime) -> str:
    """An Agent that replies with the component its message names (all four with "all")."""
    register_component(RATING, rating, text=lambda props: f"{props['stars']} of 5 stars")
    agent = Agent(name="t-components", description="replies with components",
                  skills=[Skill(id="c", name="c", description="c", tags=["test"])])

    @agent.turn
    def run(turn: Turn) -> None:
        if turn.text == "all":
            turn.reply("Here they are.", *CORE.values())
        elif turn.text in CORE:
            turn.reply(f"A {turn.text}.", CORE[turn.text])
        elif turn.text == "custom":
            turn.reply("Rated.", Component(RATING, {"stars": 4}))
        elif turn.text == "custom invalid":
            turn.reply("Rated.", Component(RATING, {"stars": 9}))
        else:  # "invalid": a row shorter than the columns
            turn.reply("Never sent.", Component("table", {"columns": ["a", "b"], "rows": [["1"]]}))

    local_runtime.add_agent(agent)
    return local_runtime.agent_url("t-components")


def round_trip(url: str, text: str) -> tuple[Task, Task]:
    """SendMessage (blocking: the answer is the finished task) and GetTask of it, with the a2a-sdk client and no
    extension activated."""

    async def body() -> tuple[Task, Task]:
        async with connect(url) as client:
            sent = await send_task(client, user_msg(text))
            return sent, await client.get_task(GetTaskRequest(id=sent.id))

    return asyncio.run(body())


def wire_parts(task: Task) -> list[dict[str, Any]]:
    return [json_format.MessageToDict(part) for part in task.status.message.parts]


@pytest.mark.parametrize("kind", CORE)
def test_each_core_kind_round_trips_through_send_message_and_get_task(components_url: str, kind: str) -> None:
    # Given the a2a-sdk client of a core-tier caller (no extension activated)
    # When it asks for a reply with one component, and reads the task again with GetTask
    for task in round_trip(components_url, kind):
        # Then the reply is the agent's text, the component's text fallback, then the component as a DataPart
        assert state(task) == "TASK_STATE_COMPLETED"
        parts = wire_parts(task)
        assert [p.get("mediaType") for p in parts] == [None, "text/plain", COMPONENT_MEDIA_TYPE]
        assert parts[1] == {"text": FALLBACKS[kind], "mediaType": "text/plain", "metadata": {FALLBACK: True}}
        assert parts[2]["data"]["component"] == kind and parts[2]["data"].get("title") == CORE[kind].title
        # And it validates: a client that knows the MIME reads back exactly the component the agent showed
        view = task_view(task)
        assert [(c.component, dict(c.props), c.title) for c in view.components] == [
            (kind, dict(CORE[kind].props), CORE[kind].title)
        ]
        # And that client's text leaves the fallback out (it draws the component instead)
        assert view.text == f"A {kind}."


def test_a_kind_of_ones_own_travels_like_a_core_one_and_its_validator_decides(components_url: str) -> None:
    # Given an Agent that registered a kind of its own (a validator and a text fallback)
    # When it replies with a valid one
    _, got = round_trip(components_url, "custom")
    # Then the caller gets its fallback and the component
    assert [p.get("text") for p in wire_parts(got)[:2]] == ["Rated.", "4 of 5 stars"]
    assert wire_parts(got)[2]["data"] == {"component": RATING, "props": {"stars": 4}}
    # And when its validator refuses one, the turn fails here (development) and the payload never leaves
    refused, _ = round_trip(components_url, "custom invalid")
    assert state(refused) == "TASK_STATE_FAILED"
    assert all("data" not in p for p in wire_parts(refused))


def test_an_invalid_component_is_an_error_in_the_agents_code_while_developing(components_url: str) -> None:
    # Given the local Runtime (nylorun serve: a development Runtime)
    # When the agent replies with a table whose row is shorter than its columns
    sent, got = round_trip(components_url, "invalid")
    # Then the turn fails with the Runtime's words (the InvalidComponent is in the server's log), and neither the
    # component nor the rest of the reply reached the caller
    for task in (sent, got):
        assert state(task) == "TASK_STATE_FAILED"
        assert [p.get("text") for p in wire_parts(task)] == ["The agent could not complete this turn."]


def test_get_draws_each_kind_and_json_carries_them(components_url: str) -> None:
    # Given a task whose reply carries all four core kinds
    sent, _ = round_trip(components_url, "all")
    # When a person runs `nylorun get` on it
    result = nylorun("get", components_url, sent.id)
    out = result.stdout
    # Then each kind is drawn: the table with its header and cells, the key-value panel, the timeline with a mark
    # per state, the code reference as path:line
    assert result.returncode == 0, result.stderr
    assert "Reply: Here they are." in out and "| --- |" not in out  # the fallbacks are not printed beside them
    lines = out.splitlines()
    assert any(all(w in line for w in ("┃", "Order", "Item", "Amount")) for line in lines), out
    assert any(all(w in line for w in ("│", "A-1001", "Espresso machine", "249.5")) for line in lines), out
    assert any("╭─ Order A-1001" in line for line in lines) and any("Paid" in l and "yes" in l for l in lines), out
    assert "✓ Approved" in out and "▶ Refund issued  (R-00001)" in out and "○ Money back" in out
    assert "→ src/refunds/api.py:12-20  The refund handler" in out
    # And --json carries them as {"component", "props", "title"} objects
    shown = json_lines(nylorun("get", components_url, sent.id, "--json"))[-1]["components"]
    assert shown == [{"component": c.component, "props": json.loads(json.dumps(dict(c.props))), "title": c.title}
                     for c in CORE.values()]
