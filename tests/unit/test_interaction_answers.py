"""How a caller answers an open interaction (service/a2a/, Profile v2 interactions/v1): only a typed answer
approves, a question may be answered by text, and exactly one answer wins. The A2A service runs on the
in-memory store; a turn runs in the caller's thread, so each answer returns where the turn stopped next."""

from __future__ import annotations

from typing import Any

import pytest
from nylorun.adapters.memory import InMemoryTaskStore
from nylorun.engine.turn import Turn
from nylorun.profile.extensions import INTERACTIONS
from nylorun.protocol.errors import InvalidParamsError
from nylorun.protocol.models import Message, Role, TaskState
from unit_support import (
    AnotherAnswerFirst,
    Calls,
    Runtime,
    agent_of,
    answer,
    open_interaction,
    refused,
    runtime,
    state,
    status_text,
)


def approver(pay: Calls, store: InMemoryTaskStore | None = None) -> Runtime:
    def turn_fn(turn: Turn) -> None:
        approved = turn.approval("Pay 5 EUR?")
        if approved:
            turn.effect("pay", pay)
        turn.reply("paid" if approved else "not paid")

    return runtime(agent_of(turn_fn), store=store)


def user_texts(rt: Runtime, task_id: str) -> list[str]:
    return [m.text() for m in rt.record(task_id).history if m.role == Role.USER]


def test_a_text_reply_never_approves_the_status_says_so_and_the_approval_stays_open() -> None:
    # Given a task waiting for an approval
    pay = Calls()
    rt = approver(pay)
    task = rt.send("pay the invoice")
    asked = open_interaction(task)
    # When the caller replies with text only
    after_text = rt.send("yes, approve it", taskId=task["id"])
    # Then nothing was approved: same state, same open interaction, and the status tells how to approve
    assert state(after_text) == TaskState.AUTH_REQUIRED and pay.keys == []
    assert open_interaction(after_text) == asked
    assert "does not answer this approval" in status_text(after_text)
    assert asked["interactionId"] in status_text(after_text)
    assert user_texts(rt, task["id"]) == ["pay the invoice", "yes, approve it"]  # the reply is kept
    # And a typed answer still approves it
    done = rt.send(**answer(task, approved=True))
    assert state(done) == TaskState.COMPLETED and status_text(done) == "paid" and len(pay.keys) == 1


def test_a_question_may_be_answered_by_text() -> None:
    # Given a task asking a question
    rt = runtime(agent_of(lambda turn: turn.reply(f"size {turn.question('Which size?')}")))
    task = rt.send("order a shirt")
    assert state(task) == TaskState.INPUT_REQUIRED
    # When a core-tier caller answers with text
    done = rt.send("M", taskId=task["id"])
    # Then the text is the answer
    assert state(done) == TaskState.COMPLETED and status_text(done) == "size M"


@pytest.mark.parametrize("approved", ["true", 1, "yes", None])
def test_approved_must_be_a_json_boolean(approved: Any) -> None:
    # Given a task waiting for an approval
    pay = Calls()
    rt = approver(pay)
    task = rt.send("pay")
    # When the caller answers with `approved` that is not true or false
    error = refused(rt, **answer(task, approved=approved))
    # Then the answer is refused as invalid params, and the approval is still open
    assert error.code == -32602 and any(f.endswith("approved") for f, _ in error.field_violations)
    again = rt.send("status?", taskId=task["id"])
    assert state(again) == TaskState.AUTH_REQUIRED and open_interaction(again) == open_interaction(task)
    assert pay.keys == []


def test_an_answer_must_list_the_interactions_extension_in_the_message() -> None:
    # Given a task waiting for an approval
    pay = Calls()
    rt = approver(pay)
    task = rt.send("pay")
    unlisted = answer(task, approved=True)
    del unlisted["extensions"]
    # When the caller sends the answer's metadata without listing interactions/v1 in `extensions`
    error = refused(rt, **unlisted)
    # Then it is refused, saying which field, and nothing was approved
    assert isinstance(error, InvalidParamsError) and error.code == -32602
    assert [f for f, _ in error.field_violations] == ["message.extensions"]
    assert INTERACTIONS in error.message and pay.keys == []
    assert rt.record(task["id"]).state == TaskState.AUTH_REQUIRED


def test_an_unknown_or_already_answered_interaction_id_is_invalid_params() -> None:
    # Given a turn that asks two approvals in a row; the first was answered
    def turn_fn(turn: Turn) -> None:
        turn.approval("Step one?")
        turn.approval("Step two?")
        turn.reply("both")

    rt = runtime(agent_of(turn_fn))
    first = rt.send("go")
    second = rt.send(**answer(first, approved=True))
    assert open_interaction(second)["interactionId"] != open_interaction(first)["interactionId"]
    # When the caller answers the first interaction again, or one that never existed
    errors = [refused(rt, **answer(second, open_interaction(first)["interactionId"], approved=True)),
              refused(rt, **answer(second, "ia-made-up", approved=True))]
    # Then both are -32602 and the second approval stays open
    assert [e.code for e in errors] == [-32602, -32602]
    assert all("interactionId" in e.message for e in errors)
    assert rt.record(second["id"]).state == TaskState.AUTH_REQUIRED


def test_the_same_answer_sent_twice_is_one_answer() -> None:
    # Given a task waiting for an approval
    pay = Calls()
    rt = approver(pay)
    task = rt.send("pay")
    reply = answer(task, approved=True)
    # When the caller sends its answer, and (no reply seen) sends the very same message again
    first = rt.send(messageId="m-answer", **reply)
    retry = rt.send(messageId="m-answer", **reply)
    # Then the retry gets the same task; the payment ran once and the answer is in history once
    assert retry["id"] == first["id"] and state(retry) == TaskState.COMPLETED
    assert len(pay.keys) == 1
    assert len([m for m in rt.record(task["id"]).history if m.message_id == "m-answer"]) == 1


def test_of_two_different_answers_to_one_interaction_exactly_one_wins() -> None:
    # Given a task waiting for an approval, and two answers to it that meet: "no" lands while "yes" is on its way
    pay = Calls()
    store = AnotherAnswerFirst()
    rt = approver(pay, store)
    task = rt.send("pay")
    store.racer = lambda: rt.send(messageId="m-no", **answer(task, approved=False))
    # When the "yes" answer is written after the "no"
    error = refused(rt, messageId="m-yes", **answer(task, approved=True))
    # Then "yes" is refused as an answered interaction; the turn went on with "no" alone
    assert error.code == -32602
    record = rt.record(task["id"])
    assert record.state == TaskState.COMPLETED and isinstance(record.status.message, Message)
    assert record.status.message.text() == "not paid" and pay.keys == []
    assert [m.message_id for m in record.history if m.role == Role.USER][1:] == ["m-no"]


def test_a_retried_text_reply_to_an_approval_is_recorded_once() -> None:
    # Given a task waiting for an approval, and a caller whose text reply timed out on its way back
    rt = approver(Calls())
    task = rt.send("pay")
    rt.send("yes please", messageId="m-text", taskId=task["id"])
    # When the caller retries that very message (same messageId, same content)
    rt.send("yes please", messageId="m-text", taskId=task["id"])
    # Then the retry is the same message: in history once (as a retried answer or a retried new message is)
    assert [m.message_id for m in rt.record(task["id"]).history].count("m-text") == 1
