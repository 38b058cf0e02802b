"""What goes when a task expires (docs/operate.md#data-retention): its remains, then their removal."""

from __future__ import annotations

from collections.abc import Sequence

from nylorun.adapters.memory.journal import journal_entries
from nylorun.adapters.memory.state import State
from nylorun.ports import TaskRemains


class Retention(State):
    """A task's remains, and their removal once it expired."""

    def remains(self, task_id: str) -> TaskRemains:
        with self._lock:
            task = self._tasks.get(task_id)
            if task is None:
                return TaskRemains(history=[], artifacts=[], journal={})
            return TaskRemains(history=list(task.record.history), artifacts=list(task.record.artifacts),
                               journal=journal_entries(task))

    def remove_remains(self, task_id: str, file_writes: Sequence[tuple[str, str]]) -> int:
        with self._lock:
            task = self._tasks.get(task_id)
            if task is not None and self._live(task_id) is not None:
                return 0  # not expired: everything stays
            removed: list[object] = [self._tasks.pop(task_id, None), self._push.pop(task_id, None)]
            removed += [self._messages.pop(k) for k, v in list(self._messages.items()) if v == task_id]
            removed += [self._fan_out.pop(k) for k in list(self._fan_out) if k[0] == task_id]
            removed += [self._file_writes.pop(w, None) for w in file_writes]
            return sum(r is not None for r in removed)
