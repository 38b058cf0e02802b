"""Status messages the Runtime itself writes (not an Agent's words)."""

from __future__ import annotations

import uuid

from nylorun.protocol.models import Message, Part, Role, TaskState, TaskStatus


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
