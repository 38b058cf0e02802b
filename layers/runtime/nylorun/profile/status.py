"""Status texts the Runtime itself writes (not an Agent's words): queued turns, interactions as a core-tier
client reads them, lost outcomes."""

from __future__ import annotations

import uuid

from nylorun.profile.extensions import Interaction
from nylorun.protocol.models import Message, Part, Role, TaskState, TaskStatus

# effects/v1: the status text of a task whose step lost its outcome (the task stays WORKING).
UNCERTAIN_TEXT = (
    "A step's outcome was lost; it will not be repeated. An operator must reconcile it or cancel the task."
)


def queued_message(task_id: str, context_id: str, ahead_task_id: str) -> Message:
    """A task queued behind a busy context says what it waits for: the context's turn before it.
    The id is derived, so a retried write says the same thing with the same id."""
    return Message(
        message_id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"{task_id}/queued")),
        role=Role.AGENT,
        parts=[
            Part(
                text=f"Queued: this context runs one task at a time; this task starts when task "
                f"{ahead_task_id} has ended."
            )
        ],
        task_id=task_id,
        context_id=context_id,
    )


def submitted_status(task_id: str, context_id: str, ahead_task_id: str | None, timestamp: str) -> TaskStatus:
    """A new task's status: SUBMITTED, and when it is queued (`ahead_task_id`), what it waits for."""
    message = queued_message(task_id, context_id, ahead_task_id) if ahead_task_id else None
    return TaskStatus(state=TaskState.SUBMITTED, message=message, timestamp=timestamp)


def core_text(interaction: Interaction) -> str:
    """How an interaction reads to a core-tier client (no extension activated)."""
    if interaction.kind == "approval":
        return (
            f"Approval needed: {interaction.prompt} "
            "Only an interactions/v1 answer approves; a text reply does not."
        )
    if interaction.kind == "connection":
        name = (interaction.detail or {}).get("connection", "an account")
        return f"Connection needed ({name}): {interaction.prompt}"
    return interaction.prompt


def text_does_not_approve(interaction: Interaction) -> str:
    """The status text after a caller answered an approval with text: it stays open, and this says why."""
    return (
        f"{core_text(interaction)} Your text reply was recorded; it does not answer this {interaction.kind}. "
        f"Answer with interactions/v1 metadata {{interactionId: {interaction.interaction_id}, approved}}."
    )
