"""Typed components (docs/components.md): the core kinds and their schemas, the text fallback beside each
component part, kinds of your own, and what becomes of an invalid one (an error in the agent's code while
developing, a dropped part with a warning and a metric when deployed). Runs on the in-memory Runtime."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from nylorun.engine import Component, InvalidComponent, Turn, code_ref
from nylorun.observability import metrics
from nylorun.profile.components import (
    COMPONENT_MEDIA_TYPE,
    CORE_KINDS,
    FALLBACK,
    ComponentRegistry,
)
from nylorun.protocol.models import TaskState
from nylorun.settings import Settings
from pydantic import BaseModel, Field
from test_metrics import emf_lines
from unit_support import CORE, agent_of, answer, runtime, state

ORDER = {"items": [{"label": "Order", "value": "A-1001"}, {"label": "Amount", "value": 249.0}]}
VALID: dict[str, tuple[Component, str]] = {
    "table": (
        Component("table", {"columns": ["Order", "Paid"], "rows": [["A-1001", True], ["A|2", None]]}, "Orders"),
        "Orders\n| Order | Paid |\n| --- | --- |\n| A-1001 | yes |\n| A\\|2 |  |",
    ),
    "keyvalue": (Component("keyvalue", ORDER), "Order: A-1001\nAmount: 249.0"),
    "timeline": (
        Component("timeline", {"steps": [{"label": "Approved", "state": "done"}, {"label": "Paid", "state": "active",
                                                                                  "note": "today"}, {"label": "Sent"}]}),
        "[x] Approved\n[>] Paid — today\n[ ] Sent",
    ),
    "code-ref": (code_ref("src/app.py", 12, 20, label="The handler"), "The handler: src/app.py:12-20"),
}
# Broken copies: each is a valid payload with one thing wrong, and each must be refused.
INVALID: dict[str, Component] = {
    "table row shorter than the columns": Component("table", {"columns": ["a", "b"], "rows": [["1"]]}),
    "table without columns": Component("table", {"columns": [], "rows": []}),
    "table cell that is an object": Component("table", {"columns": ["a"], "rows": [[{"x": 1}]]}),
    "table cell NaN": Component("table", {"columns": ["a"], "rows": [[float("nan")]]}),
    "keyvalue without items": Component("keyvalue", {"items": []}),
    "keyvalue item without a label": Component("keyvalue", {"items": [{"value": 1}]}),
    "timeline state outside done/active/todo": Component("timeline", {"steps": [{"label": "a", "state": "failed"}]}),
    "props that are not an object": Component("keyvalue", ["a"]),  # type: ignore[arg-type]
    "a title too long": Component("keyvalue", ORDER, "t" * 201),
    "an unknown kind": Component("chart", {"points": [1, 2]}),
    "code-ref built from props, not by code_ref()": Component("code-ref", {"path": "src/app.py"}),
    "code-ref leaving the project": code_ref("../secrets.txt"),
    "code-ref absolute path": code_ref("/etc/passwd"),
    "code-ref ending before it starts": code_ref("a.py", 10, 3),
    "code-ref with an unknown key": Component.__new__(type(code_ref("a.py"))),
    "code-ref line as text (strict)": code_ref("a.py", "3"),  # type: ignore[arg-type]
}
object.__setattr__(INVALID["code-ref with an unknown key"], "component", "code-ref")
object.__setattr__(INVALID["code-ref with an unknown key"], "props", {"path": "a.py", "url": "https://x"})
object.__setattr__(INVALID["code-ref with an unknown key"], "title", None)


@pytest.mark.parametrize("kind", CORE_KINDS)
def test_each_core_kind_becomes_its_text_fallback_then_the_component_part(kind: str) -> None:
    # Given a valid component of the kind
    component, text = VALID[kind]
    # When the registry renders it
    fallback, part = ComponentRegistry().parts(component)
    # Then the message carries its plain-text rendering, marked as the fallback, then the DataPart
    assert (fallback.text, fallback.metadata) == (text, {FALLBACK: True})
    assert part.media_type == COMPONENT_MEDIA_TYPE
    assert part.data["component"] == kind and part.data.get("title") == component.title
    # And what a client reads back from the wire is the same component
    assert ComponentRegistry().read(part.media_type, part.wire()["data"]) == ComponentRegistry().validate(component)


@pytest.mark.parametrize("case", INVALID)
def test_an_invalid_component_is_refused(case: str) -> None:
    # Given a payload with one thing wrong (a broken copy of a valid one)
    # When the registry validates it, Then it is refused, and a client reading it from the wire draws nothing
    with pytest.raises(InvalidComponent):
        ComponentRegistry().parts(INVALID[case])
    component = INVALID[case]
    data = {"component": component.component, "props": component.props, "title": component.title}
    if case != "code-ref built from props, not by code_ref()":  # on the wire, a code-ref is checked by schema alone
        assert ComponentRegistry().read(COMPONENT_MEDIA_TYPE, data) is None


@pytest.mark.parametrize("kind", CORE_KINDS)
def test_a_core_kind_cannot_be_shadowed(kind: str) -> None:
    # Given a registry, When a kind of one's own takes a core kind's name, Then it is refused
    registry = ComponentRegistry()
    with pytest.raises(ValueError, match="core component kind"):
        registry.register(kind, lambda props: props)
    # And the core kind still validates as before
    assert registry.parts(VALID[kind][0])[1].data["component"] == kind


class Rating(BaseModel):
    stars: int = Field(ge=1, le=5)


def test_a_kind_of_ones_own_registers_and_validates() -> None:
    # Given two kinds of one's own: a pydantic model, and a function that raises to refuse
    registry = ComponentRegistry()

    def gauge(props: dict[str, Any]) -> None:
        if not 0 <= props["value"] <= 100:
            raise ValueError("value is a percentage")

    registry.register("acme.rating", Rating, text=lambda props: "★" * props["stars"])
    registry.register("gauge", gauge)
    # When each renders a valid payload, Then it travels with its fallback (the default one: its props as JSON)
    assert registry.parts(Component("acme.rating", {"stars": 3}))[0].text == "★★★"
    assert registry.parts(Component("gauge", {"value": 40}))[0].text == '{"value": 40}'
    # And an invalid one is refused, whatever its validator raised (a KeyError too: a raising validator drops,
    # decision 0020)
    for bad in (Component("acme.rating", {"stars": 9}), Component("gauge", {"value": 101}), Component("gauge", {})):
        with pytest.raises(InvalidComponent):
            registry.parts(bad)
    # And a name that is no kind name is refused
    with pytest.raises(ValueError, match="not a component kind name"):
        registry.register("Acme Rating", Rating)


# ---------------------------------------------------------------- the Turn
def showing(turn: Turn) -> None:
    turn.plan("Look up", "Approve")
    turn.show("keyvalue", ORDER, title="Order A-1001")
    if turn.approval("Refund?"):
        turn.reply("Refunded.", Component("timeline", {"steps": [{"label": "Refunded", "state": "done"}]}))


def parts_of(message: dict[str, Any]) -> list[tuple[str | None, str | None]]:
    return [(p.get("mediaType"), p.get("text")) for p in message["parts"]]


def test_shown_components_stay_in_view_on_the_status_until_the_reply_carries_its_own() -> None:
    # Given an agent that shows the order, then asks for an approval
    rt = runtime(agent_of(showing))
    # When a core-tier caller (no extension activated) asks
    task = rt.send("refund", caller=CORE)
    # Then the approval's status shows the order: the approval text, the fallback text, the component
    assert state(task) == TaskState.AUTH_REQUIRED
    message = task["status"]["message"]
    assert parts_of(message)[1:] == [("text/plain", "Order A-1001\nOrder: A-1001\nAmount: 249.0"),
                                     (COMPONENT_MEDIA_TYPE, None)]
    assert message["parts"][2]["data"] == {"component": "keyvalue", "props": ORDER, "title": "Order A-1001"}
    # And a text "yes" (which does not approve) leaves the order in view beside the reminder
    reminder = rt.send("yes", taskId=task["id"])["status"]["message"]
    assert parts_of(reminder)[1:] == parts_of(message)[1:]
    # And once approved, the reply carries its own component (the timeline), not the view
    interaction = rt.record(task["id"]).interaction
    assert interaction is not None
    done = rt.send(**answer(task, interaction.interaction_id, approved=True))
    assert state(done) == TaskState.COMPLETED
    assert parts_of(done["status"]["message"]) == [(None, "Refunded."), ("text/plain", "[x] Refunded"),
                                                    (COMPONENT_MEDIA_TYPE, None)]


def test_a_later_show_of_the_same_kind_and_title_replaces_the_earlier_one() -> None:
    # Given an agent that moves a timeline on, beside a table shown once
    def run(turn: Turn) -> None:
        turn.show("table", {"columns": ["a"], "rows": [["1"]]})
        turn.show("timeline", {"steps": [{"label": "One", "state": "active"}]}, title="Steps")
        turn.show("timeline", {"steps": [{"label": "One", "state": "done"}]}, title="Steps")
        turn.question("Next?")

    # When it asks its question
    message = runtime(agent_of(run)).send("go")["status"]["message"]
    # Then the status shows the table and the newest timeline only
    assert [p["data"]["component"] for p in message["parts"] if "data" in p] == ["table", "timeline"]
    assert message["parts"][-2]["text"] == "Steps\n[x] One"


def test_an_artifact_carries_a_component() -> None:
    # Given an agent that writes its result as an artifact with a table
    rt = runtime(agent_of(lambda turn: turn.artifact(VALID["table"][0], name="report")))
    # When it runs, Then the artifact holds the fallback and the component
    task = rt.store.get(rt.send("go")["id"])
    assert task is not None and task.artifacts is not None
    assert [p.media_type for p in task.artifacts[0].parts] == ["text/plain", COMPONENT_MEDIA_TYPE]


def bad_table(turn: Turn) -> None:
    turn.show("table", {"columns": ["a", "b"], "rows": [["1"]]})
    turn.question("Go on?")  # the turn runs again from the top once answered: the table is dropped again
    turn.artifact(Component("keyvalue", {"items": []}), name="empty")
    turn.reply("Done anyway.", Component("timeline", {"steps": [{"label": "x", "state": "maybe"}]}))


def test_while_developing_an_invalid_component_is_an_error_in_the_agents_code(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given a Runtime running for development (strict components: `nylorun serve`)
    rt = runtime(agent_of(bad_table), strict_components=True)
    # When the agent shows an invalid table
    with caplog.at_level(logging.ERROR):
        task = rt.send("go")
    # Then the turn fails, the log names the InvalidComponent and why, and nothing of it reached the caller
    assert state(task) == TaskState.FAILED
    assert "row 0 has 1 cells; the table has 2 columns" in caplog.text and "InvalidComponent" in caplog.text
    assert all(p.get("mediaType") != COMPONENT_MEDIA_TYPE for p in task["status"]["message"]["parts"])


def test_deployed_an_invalid_component_is_dropped_with_a_warning_and_a_metric(
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a deployed Runtime (components not strict) with metrics on, as on Lambda
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    metrics.clear_metrics()
    rt = runtime(agent_of(bad_table), strict_components=False)
    # When the agent shows an invalid table, writes an artifact of an invalid keyvalue and replies with a bad timeline
    with caplog.at_level(logging.WARNING):
        asked = rt.send("go")
        task = rt.send("yes", taskId=asked["id"])
    # Then the turn completes with the reply's text alone: every invalid part dropped, no empty artifact written
    assert state(task) == TaskState.COMPLETED
    assert [p.get("text") for p in task["status"]["message"]["parts"]] == ["Done anyway."]
    assert not rt.store.get(task["id"]).artifacts  # type: ignore[union-attr]
    # And each drop is a warning and one ComponentDropped (the table once, though two runs dropped it)
    assert caplog.text.count("component dropped") == 3
    capsys.readouterr()
    metrics.flush_metrics()
    assert sum(v for name, _, v in emf_lines(capsys.readouterr().out) if name == "ComponentDropped") == 3
    metrics.clear_metrics()


@pytest.mark.parametrize(
    ("env", "development"),
    [({}, True), ({"lambda_function_name": "api", "runtime_key": "k", "auth": "jwt"}, False),
     ({"lambda_function_name": "api", "sam_local": True, "runtime_key": "k"}, True)],
    ids=["nylorun serve", "deployed", "sam local"],
)
def test_components_are_strict_only_where_a_developer_runs_the_runtime(env: dict[str, Any], development: bool) -> None:
    # Given the settings of each place the Runtime runs, Then only a deployed function drops invalid components
    assert Settings(**env).development is development
