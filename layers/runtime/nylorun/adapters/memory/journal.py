"""The turn journal (replay) and the callback tokens of open interactions."""

from __future__ import annotations

from typing import Any

from nylorun.adapters.dynamodb import codec
from nylorun.adapters.memory.state import State, TaskEntry
from nylorun.ports import JournalEntry, NotInState, TurnCanceled, VersionConflict
from nylorun.protocol.models import TaskState, now_timestamp


def journal_entries(task: TaskEntry) -> dict[int, JournalEntry]:
    """The task's journal, as entries."""
    return {seq: codec.journal_entry(item) for seq, item in task.journal.items()}


class Journal(State):
    """The journal a turn replays, and the callback tokens its waits park on."""

    def journal(self, task_id: str) -> dict[int, JournalEntry]:
        with self._lock:
            task = self._tasks.get(task_id)
            return journal_entries(task) if task else {}

    def journal_start(self, task_id: str, entry: JournalEntry) -> None:
        item = codec.journal_item(task_id, entry) | {"answer": None}
        with self._lock:
            task = self._task(task_id)
            if task.record.state == TaskState.CANCELED:
                raise TurnCanceled(task_id)  # cancel really stops: no effect starts after CANCELED
            if entry.seq in task.journal:
                raise VersionConflict(f"journal entry {entry.seq} exists")
            task.journal[entry.seq] = item

    def journal_finish(self, task_id: str, seq: int, result: Any) -> None:
        body = codec.dumps(result)
        with self._lock:
            task = self._tasks.get(task_id)
            if task is None or seq not in task.journal:
                raise NotInState(f"journal entry {seq} does not exist")
            task.journal[seq].update(finished=True, result=body, finishedAt=now_timestamp())

    def put_wait_token(self, task_id: str, interaction_id: str, token: str) -> None:
        with self._lock:
            self._task(task_id).wait_tokens[interaction_id] = token

    def get_wait_token(self, task_id: str, interaction_id: str) -> str | None:
        with self._lock:
            task = self._tasks.get(task_id)
            return task.wait_tokens.get(interaction_id) if task else None

    def wait_tokens(self, task_id: str) -> list[str]:
        with self._lock:
            task = self._tasks.get(task_id)
            return list(task.wait_tokens.values()) if task else []
