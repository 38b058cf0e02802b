"""What an Agent hands its Turn is checked where it is handed over (engine/handover.py): a bad value is a clear
error in the Agent's code, naming the Turn method and the argument, and nothing invalid reaches the store (where
it would fail every later read of the task)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from nylorun.engine.turn import Turn
from nylorun.ports import TaskRecord
from nylorun.profile.extensions import PlanStep
from nylorun.protocol.models import Artifact, Message, Part, TaskState, TaskStatus
from unit_support import agent_of, runtime, state

NOW = datetime(2026, 1, 1, tzinfo=UTC)
STEP_STATES = "pending, active, done, failed, skipped"

# (the bad call, what its error must say): every Turn method that takes what an Agent hands it.
BAD: dict[str, tuple[Callable[[Turn], Any], str]] = {
    "plan label": (lambda t: t.plan("fetch", 5), "turn.plan: label 1 must be a str, not int"),
    "mark state": (lambda t: t.mark(0, "completed"), f"turn.mark: state 'completed' is not one of {STEP_STATES}"),
    "mark index": (lambda t: t.mark(7, "done"), "turn.mark: step 7 is not a step of the plan: the plan has steps 0 to 1"),
    "mark label": (lambda t: t.mark("ship", "done"), "turn.mark: step 'ship' is not a step of the plan"),
    "mark step type": (lambda t: t.mark(1.5, "done"), "turn.mark: step must be an int of 0 or more or a step's label"),
    "mark note": (lambda t: t.mark(0, "done", note=404), "turn.mark: note must be a str or None, not int"),
    "say": (lambda t: t.say(None), "turn.say: text must be a str, not NoneType"),
    "show component": (lambda t: t.show(5, {}), "turn.show: component must be a str, not int"),
    "show title": (
        lambda t: t.show("keyvalue", {"items": [{"label": "a", "value": 1}]}, title=["x"]),
        "turn.show: title must be a str or None, not list",
    ),
    "reply part": (lambda t: t.reply("ok", 5), "turn.reply: part 1 must be a str, Part or Component, not int"),
    "reply Part": (
        lambda t: t.reply(Part(text="a").model_copy(update={"raw": "Yg=="})),
        "turn.reply: part 0: a part carries exactly one of text, raw, url or data",
    ),
    "reply Part data": (lambda t: t.reply(Part(data={"at": NOW})), "turn.reply: part 0 (its data and metadata) must be JSON"),
    "artifact no part": (lambda t: t.artifact(name="report"), "turn.artifact: give at least one part"),
    "artifact name": (lambda t: t.artifact("x", name=7), "turn.artifact: name must be a str or None, not int"),
    "artifact metadata": (lambda t: t.artifact("x", metadata={"at": NOW}), "turn.artifact: metadata must be JSON"),
    "artifact NaN": (lambda t: t.artifact("x", metadata={"n": float("nan")}), "turn.artifact: metadata must be JSON"),
    "artifact extensions": (lambda t: t.artifact("x", extensions="uri"), "turn.artifact: extensions: input should be"),
    "usage tokens": (lambda t: t.usage(tokens="many"), "turn.usage: tokens must be an int of 0 or more, not str"),
    "usage negative": (lambda t: t.usage(tokens=-3), "turn.usage: tokens must be an int of 0 or more, not -3"),
    "usage cost": (lambda t: t.usage(cost_usd=float("nan")), "turn.usage: cost_usd must be a finite number"),
    "effect result": (
        lambda t: t.effect("pay", lambda key: {"paid": NOW}),
        "turn.effect: the result of effect 'pay' must be JSON-serialisable",
    ),
    "question prompt": (lambda t: t.question(5), "turn.question: prompt must be a str, not int"),
    "approval detail": (lambda t: t.approval("Ship?", detail=["x"]), "turn.approval: detail must be a dict or None"),
    "approval detail JSON": (lambda t: t.approval("Ship?", detail={"at": NOW}), "turn.approval: detail must be JSON"),
    "connection name": (lambda t: t.connection(5, prompt="Connect"), "turn.connection: name must be a str, not int"),
    "reject": (lambda t: t.reject(5), "turn.reject: text must be a str, not int"),
    "write_file path": (lambda t: t.write_file("../etc/passwd", "x"), "turn.write_file: not a valid output path"),
    "write_file data": (lambda t: t.write_file("out.txt", 5), "turn.write_file: data must be bytes or a str, not int"),
}


def nothing_invalid(record: TaskRecord, journal_results: list[Any]) -> None:
    """Everything stored reads back through its model, and every journaled result is JSON (no NaN)."""
    for model, value in [
        (TaskStatus, record.status),
        *((PlanStep, step) for step in record.plan),
        *((Message, m) for m in record.history),
        *((Artifact, a) for a in record.artifacts),
    ]:
        data = value.model_dump(mode="json", by_alias=True, exclude_none=True, warnings=False)
        model.model_validate_json(json.dumps(data, allow_nan=False))
    json.dumps(journal_results, allow_nan=False)


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_value_handed_to_the_turn_is_a_clear_error_and_nothing_invalid_is_stored(case: str) -> None:
    # Given an agent that hands its Turn one bad value (after a valid plan), and catches what it raises
    call, says = BAD[case]
    raised: list[Exception] = []

    def turn_fn(turn: Turn) -> None:
        turn.plan("fetch", "pay")
        try:
            call(turn)
        except (ValueError, TypeError) as error:
            raised.append(error)
        turn.reply("carried on")

    rt = runtime(agent_of(turn_fn))
    # When a caller sends it a message
    task = rt.send("go")
    # Then the Agent's code got a ValueError/TypeError naming the method, the argument and what is allowed
    assert len(raised) == 1 and str(raised[0]).startswith(says), raised
    # And the task reads back whole: nothing invalid was stored
    assert state(task) == TaskState.COMPLETED
    record = rt.record(task["id"])
    nothing_invalid(record, [entry.result for entry in rt.store.journal(task["id"]).values()])
