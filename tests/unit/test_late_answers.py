"""Late and duplicate answers (Profile v2 interactions/v1; service/answers.py): an answer that names an
interaction that is not open -- already answered, not the task's, or the task not waiting or ended -- is
refused with -32602 naming the interaction and why, and never becomes a new turn. A plain message to a
working task still does. The A2A service runs on the in-memory store; a turn runs in the caller's thread."""

from __future__ import annotations

from typing import Any

import pytest
from nylorun.adapters.memory import InMemoryTaskStore
from nylorun.engine.turn import Turn
from nylorun.protocol.models import ListTasksRequest, TaskState
from unit_support import (
    TYPED,
    AnotherAnswerFirst,
    Runtime,
    agent_of,
    answer,
    open_interaction,
    refused,
    runtime,
    state,
    status_text,
)


def asker(store: InMemoryTaskStore | None = None) -> Runtime:
    """An Agent that asks which size, then which colour, then replies with both."""

    def turn_fn(turn: Turn) -> None:
        size = turn.question("Which size?")
        colour = turn.question("Which colour?")
        turn.reply(f"{size} {colour}")

    return runtime(agent_of(turn_fn), store=store)


def tasks_in(rt: Runtime, context_id: str) -> list[str]:
    listed = rt.service.list_tasks(TYPED, ListTasksRequest.model_validate({"contextId": context_id}))
    return [task["id"] for task in listed["tasks"]]


def held_after_answer(rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, Any], dict[str, Any]]:
    """A task whose question was answered and whose turn has not resumed yet (Step Functions has not run it
    again): WORKING. Returns the task as asked and as answered."""
    task = rt.send("order a shirt")
    monkeypatch.setattr(rt.orchestrator, "resume", lambda token: None)
    answered = rt.send(**answer(task, value="M"))
    assert state(answered) == TaskState.WORKING
    return task, answered


def test_an_answer_to_an_already_answered_question_is_refused_naming_it() -> None:
    # Given a task whose first question was answered and which now asks a second one
    rt = asker()
    first = rt.send("order a shirt")
    second = rt.send(**answer(first, value="M"))
    first_id = open_interaction(first)["interactionId"]
    # When another answer to the first question arrives late
    error = refused(rt, **answer(second, first_id, value="L"))
    # Then it is -32602 naming the interaction, saying it was answered and which one is open
    assert error.code == -32602
    assert f"interactionId {first_id} was already answered" in error.message
    assert open_interaction(second)["interactionId"] in error.message
    # And nothing changed: the second question is still open, and no other task was made
    assert rt.record(second["id"]).state == TaskState.INPUT_REQUIRED
    assert tasks_in(rt, second["contextId"]) == [second["id"]]


def test_an_answer_to_a_working_task_is_refused_and_not_queued_as_a_new_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a task whose question was answered, its turn not yet resumed (WORKING)
    rt = asker()
    task, _ = held_after_answer(rt, monkeypatch)
    asked = open_interaction(task)["interactionId"]
    # When a second caller's answer to that question arrives (another messageId)
    error = refused(rt, **answer(task, value="XL"))
    # Then it is refused as already answered, the task not waiting, and no new turn was queued
    assert error.code == -32602
    assert f"interactionId {asked} was already answered" in error.message
    assert "not waiting for an answer (TASK_STATE_WORKING)" in error.message
    assert tasks_in(rt, task["contextId"]) == [task["id"]] and rt.queue.queued == []


def test_a_plain_message_to_a_working_task_still_queues_a_new_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a working task (its answer taken, its turn not resumed yet)
    rt = asker()
    task, _ = held_after_answer(rt, monkeypatch)
    # When the caller sends it an answer, then a message without answer metadata
    refused(rt, **answer(task, value="XL"))
    follow_up = rt.send("and socks too", taskId=task["id"])
    # Then only the plain message became a new turn: a task of its own, queued behind the working one
    assert follow_up["id"] != task["id"] and state(follow_up) == TaskState.SUBMITTED
    assert sorted(tasks_in(rt, task["contextId"])) == sorted([task["id"], follow_up["id"]])
    assert [queued for queued, _ in rt.queue.queued] == [follow_up["id"]]


def test_an_answer_to_an_ended_task_is_refused_naming_the_interaction() -> None:
    # Given a task that asked two questions, both answered: COMPLETED
    rt = asker()
    task = rt.send("order a shirt")
    asked = open_interaction(task)["interactionId"]
    second = rt.send(**answer(task, value="M"))
    done = rt.send(**answer(second, value="red"))
    assert state(done) == TaskState.COMPLETED and status_text(done) == "M red"
    version = rt.record(task["id"]).version
    # When an answer to its first question arrives after it ended
    error = refused(rt, **answer(task, asked, value="L"))
    # Then it is -32602 naming the interaction and saying the task ended, and the task is as it was
    assert error.code == -32602
    assert f"interactionId {asked} was already answered: the task has ended (TASK_STATE_COMPLETED)" in error.message
    assert rt.record(task["id"]).version == version
    # And a message without answer metadata to the ended task keeps A2A's error: -32004 UnsupportedOperation
    assert refused(rt, text="one more", taskId=task["id"]).code == -32004


def test_an_answer_naming_an_unknown_interaction_is_refused_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a task waiting for an answer, and one working (its answer taken)
    rt = asker()
    waiting = rt.send("order a shirt")
    working, _ = held_after_answer(rt, monkeypatch)
    # When each gets an answer naming an interaction that never was the task's
    errors = [refused(rt, **answer(task, "ia-made-up", value="M")) for task in (waiting, working)]
    # Then both are -32602 naming it as not the task's, and neither task became a new turn
    assert [e.code for e in errors] == [-32602, -32602]
    assert f"interactionId ia-made-up is not an interaction of task {waiting['id']}" in errors[0].message
    assert f"interactionId ia-made-up is not an interaction of task {working['id']}" in errors[1].message
    assert rt.queue.queued == [] and rt.record(waiting["id"]).state == TaskState.INPUT_REQUIRED


def test_a_retry_of_the_honoured_answer_gets_the_task_even_when_it_races_the_first_send() -> None:
    # Given a task asking a question, and an answer whose first send lands while its retry is on its way
    store = AnotherAnswerFirst()
    rt = asker(store)
    task = rt.send("order a shirt")
    reply = answer(task, value="M")
    store.racer = lambda: rt.send(messageId="m-answer", **reply)
    # When the retry (same messageId, same content) is written after the first send
    retried = rt.send(messageId="m-answer", **reply)
    # Then the retry gets the task, which took the answer once and asks its next question
    assert retried["id"] == task["id"] and state(retried) == TaskState.INPUT_REQUIRED
    assert status_text(retried).startswith("Which colour?")
    assert [m.message_id for m in rt.record(task["id"]).history].count("m-answer") == 1
    # And a retry sent later still gets the task, not an error
    assert rt.send(messageId="m-answer", **reply)["id"] == task["id"]
