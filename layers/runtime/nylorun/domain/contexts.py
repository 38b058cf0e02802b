"""One turn at a time per context: when a new turn takes its context or queues behind it, and which queued
turn takes a freed context next. Both stores apply these decisions to their own counters (a context counts
the turns created, `turns`, and the turns that took it, `started`, and names the turn holding it)."""

from __future__ import annotations

from dataclasses import dataclass

from nylorun.domain.errors import ContextBusy
from nylorun.domain.ids import Owner, derive_task_id
from nylorun.profile.status import submitted_status
from nylorun.protocol.models import TaskState, TaskStatus


@dataclass(frozen=True)
class Opening:
    """A new turn of a context: its number, its task id, whether it takes the context at once, and its
    SUBMITTED status (saying what it waits for when it is queued)."""

    turn: int
    task_id: str
    takes_context: bool
    status: TaskStatus


def open_turn(
    owner: Owner,
    context_id: str,
    *,
    turns: int,
    started: int,
    active_task: str | None,
    last_task: str | None,
    queue: bool,
    timestamp: str,
) -> Opening:
    """The context's next turn. The context is busy when a turn holds it or created turns wait to start; a
    busy context queues the new turn, or with `queue=False` raises ContextBusy."""
    busy = bool(active_task) or started < turns
    if busy and not queue:
        raise ContextBusy(active_task or last_task or "")
    turn = turns + 1
    task_id = derive_task_id(owner, context_id, turn)
    ahead = derive_task_id(owner, context_id, turns) if busy else None
    return Opening(turn, task_id, not busy, submitted_status(task_id, context_id, ahead, timestamp))


def next_in_line(owner: Owner, context_id: str, *, turns: int, started: int, active_task: str | None) -> str | None:
    """The task of the next turn to start (turn `started + 1`), when the context is free and a created turn
    has not started yet; else None."""
    if active_task or started >= turns:
        return None
    return derive_task_id(owner, context_id, started + 1)


def takes_context(state: TaskState | None) -> bool:
    """Whether the next queued turn, found in `state` (None: gone), takes the context. A turn canceled while
    queued is passed over: its number is counted as started and the next one is considered."""
    return state == TaskState.SUBMITTED
