"""Which interactions/v1 answer a caller's reply carries, and the refusal of one to an interaction not open."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from nylorun.engine.replay import opaque_id
from nylorun.ports import JournalEntry, TaskRecord, TaskStore
from nylorun.profile.extensions import INTERACTIONS, InteractionAnswer, read_answer
from nylorun.protocol.errors import InvalidParamsError, UnsupportedOperationError
from nylorun.protocol.models import Message

_FIELD = f"message.metadata.{INTERACTIONS}"


def read_reply_answer(message: Message) -> InteractionAnswer | None:
    """The interactions/v1 answer a reply carries, strictly: Profile v2, a message that carries extension data
    lists the extension's URI in `extensions`, and `approved` is a JSON boolean (text never approves)."""
    try:
        answer = read_answer(message)
    except ValidationError as exc:
        if any(err["loc"][:1] == ("approved",) for err in exc.errors()):
            raise InvalidParamsError(
                "`approved` in an interactions/v1 answer must be a JSON boolean (true or false)",
                field_violations=[(f"{_FIELD}.approved", "Must be true or false.")],
            ) from None
        raise InvalidParamsError(
            "interactions/v1 answer must be {interactionId, approved} or {interactionId, value}",
            field_violations=[(_FIELD, "Not an interactions/v1 answer.")],
        ) from None
    if answer is not None and INTERACTIONS not in (message.extensions or []):
        raise InvalidParamsError(
            f"The message carries interactions/v1 data but does not list it: add \"{INTERACTIONS}\" to "
            "message.extensions",
            field_violations=[("message.extensions", f"Must list {INTERACTIONS}.")],
        )
    return answer


def answers_open(record: TaskRecord, answer: InteractionAnswer) -> bool:
    """Whether `answer` names the interaction the task is waiting for now."""
    return record.state.interrupted and record.interaction is not None and (
        answer.interaction_id == record.interaction.interaction_id
    )


def answer_value(record: TaskRecord, message: Message, answer: InteractionAnswer | None) -> dict[str, Any] | None:
    """What a reply to an interrupted task answers (None: text to an approval, which never approves), or the
    error refusing it. Pure, so it runs before the reply's files are stored. `answer` names the open one."""
    interaction = record.interaction
    if interaction is None:
        raise UnsupportedOperationError(f"Task {record.task_id} has no open interaction")
    if answer is not None:
        if interaction.kind in ("approval", "connection"):
            if answer.approved is None:
                raise InvalidParamsError(
                    f"An answer to a {interaction.kind} carries `approved` (true or false)",
                    field_violations=[("approved", "Field is required.")],
                )
            return {"approved": answer.approved}
        if answer.value is None:
            raise InvalidParamsError(
                "An answer to a question carries `value`", field_violations=[("value", "Field is required.")]
            )
        return {"value": answer.value}
    if interaction.kind == "question" and message.text():
        # Decision: a question may be answered by text in every tier (approvals never).
        return {"value": message.text()}
    return None


def refuse_closed(store: TaskStore, record: TaskRecord, interaction_id: str, retry_key: str) -> TaskRecord:
    """An answer to an interaction that is not open is refused, never taken as a new turn (Profile v2
    interactions/v1: exactly one answer wins) -- unless this very message (a retry racing its first send) is
    the answer that won: then the caller gets the task, as any retry does."""
    if store.task_for_message(record.owner, retry_key) == record.task_id:
        return store.get(record.task_id) or record
    latest = store.get(record.task_id) or record
    raise closed_error(latest, interaction_id, store.journal(record.task_id))


def closed_error(record: TaskRecord, interaction_id: str, journal: dict[int, JournalEntry]) -> InvalidParamsError:
    """-32602 naming the interaction and why it takes no answer: answered, not this task's, or the task not
    waiting for it (ended, working, or waiting for another)."""
    asked = {opaque_id(record.task_id, seq, "ia"): e for seq, e in journal.items() if e.kind == "interaction"}
    entry = asked.get(interaction_id)
    if entry is None:
        why = f"is not an interaction of task {record.task_id}"
    elif entry.answer is not None:
        why = "was already answered"
    else:
        why = "is no longer open"
    if record.state.terminal:
        now = f"the task has ended ({record.state.value})"
    elif record.state.interrupted and record.interaction is not None:
        now = f"the task waits for interactionId {record.interaction.interaction_id}"
    else:
        now = f"the task is not waiting for an answer ({record.state.value})"
    return InvalidParamsError(
        f"interactionId {interaction_id} {why}: {now}",
        field_violations=[(f"{_FIELD}.interactionId", f"{why[0].upper()}{why[1:]}.")],
    )
