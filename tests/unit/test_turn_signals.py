"""The signals that stop a turn are not `Exception`s: an agent that wraps its code in `except Exception:`
still pauses for a person; and the store's three kinds of conflict keep their common base."""

from __future__ import annotations

import pytest
from nylorun.adapters.memory import InMemoryContextQueue, InMemoryOrchestrator, InMemoryTaskStore
from nylorun.engine import Agent, AgentRegistry, Skill, Turn
from nylorun.engine.runner import TurnRunner
from nylorun.engine.turn import Finished, Interrupted, OutcomeLost
from nylorun.ports import InteractionClosed, NewTurn, NotInState, Owner, StateConflict, VersionConflict
from nylorun.protocol.models import Message, Part, Role, TaskState
from nylorun.service.scheduler import TurnScheduler

OWNER = Owner(subject="alice", agent="careless")
careless = Agent(name="careless", description="Catches everything.", skills=[Skill("s", "S", "S.")])
swallowed: list[BaseException] = []


@careless.turn
def run(turn: Turn) -> None:
    try:
        approved = turn.approval("Send the report?")
    except Exception as exc:  # noqa: BLE001 - the point: an agent this careless must still pause
        swallowed.append(exc)
        approved = False
    turn.reply("sent" if approved else "not sent")


def start(text: str) -> tuple[InMemoryTaskStore, str]:
    store, orchestrator = InMemoryTaskStore(), InMemoryOrchestrator()
    scheduler = TurnScheduler(store, orchestrator, InMemoryContextQueue())
    runner = TurnRunner(store, AgentRegistry([careless]), orchestrator, on_ended=scheduler.ended)
    orchestrator.attach(runner)
    message = Message(message_id=f"m-{text}", role=Role.USER, parts=[Part(text=text)])
    record, took = store.create_turn(NewTurn(owner=OWNER, context_id="c", message=message))
    assert took
    orchestrator.start(record.task_id)
    return store, record.task_id


def test_an_agent_catching_exception_around_approval_still_pauses() -> None:
    swallowed.clear()
    store, task_id = start("go")
    record = store.get(task_id)
    assert record is not None
    assert record.state == TaskState.AUTH_REQUIRED
    assert record.interaction is not None and record.interaction.kind == "approval"
    assert swallowed == []


def test_stop_signals_are_not_exceptions() -> None:
    for signal in (Interrupted, OutcomeLost, Finished):
        assert issubclass(signal, BaseException) and not issubclass(signal, Exception)


def test_conflicts_share_one_base() -> None:
    for conflict in (NotInState, VersionConflict, InteractionClosed):
        assert issubclass(conflict, StateConflict)
    store = InMemoryTaskStore()
    message = Message(message_id="m", role=Role.USER, parts=[Part(text="x")])
    record, _ = store.create_turn(NewTurn(owner=OWNER, context_id="c", message=message))
    with pytest.raises(NotInState):
        store.set_status(record.task_id, record.status, expect={TaskState.WORKING})
    with pytest.raises(InteractionClosed):
        store.answer_interaction(record.task_id, "ia-x", {}, message, record.status, OWNER, "k")
