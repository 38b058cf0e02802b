"""The errors of the Runtime's rules. Stores raise them (translating AWS errors); the service maps them to
JSON-RPC errors; no adapter ever raises a JSON-RPC error."""

from __future__ import annotations


class StoreError(Exception):
    """Base of the store's domain errors."""


class ContextBusy(StoreError):
    def __init__(self, active_task_id: str) -> None:
        super().__init__(f"context busy with {active_task_id}")
        self.active_task_id = active_task_id


class DuplicateMessage(StoreError):
    """The subject already sent this messageId to this agent: the answer is the task it made."""

    def __init__(self, task_id: str) -> None:
        super().__init__(f"message already made {task_id}")
        self.task_id = task_id


class StateConflict(StoreError):
    """A conditional write did not apply; one of the three kinds below. Catch this when any of them means
    the same to you ("the task changed under me")."""


class NotInState(StateConflict):
    """The task (or the journal entry written to) is not where the write expected it: gone, or in a state
    other than the expected ones."""


class VersionConflict(StateConflict):
    """Other writers kept changing the item (its version, the context's counters) and the write gave up; or
    the journal entry it would create already exists (another run of the same turn wrote it)."""


class InteractionClosed(StateConflict):
    """An answer for an interaction that is not the open one: unknown, already answered, or raced by another
    answer."""


class TurnCanceled(StoreError):
    """The task was canceled: no effect may start (Profile v2: cancel really stops)."""


class TooLarge(StoreError):
    """A write would pass a size limit (`nylorun.limits`): one message, one interaction, or the task's budget.
    Nothing was written; the message says which limit, in words a caller may read."""


class StoreUnavailable(StoreError):
    """The store could not be read or written (throttled, unreachable, misconfigured): no rule was broken,
    nothing is known to have been written. Adapters raise it for every AWS error that is not one of the above."""
