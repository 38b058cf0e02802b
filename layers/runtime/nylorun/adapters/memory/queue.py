"""The `ContextQueue` port as a list."""

from __future__ import annotations

import threading


class InMemoryContextQueue:
    """The `ContextQueue` port as a list: in one process the ending turn starts the next one directly, so
    nothing drains it; it records what was queued (once per task, as SQS FIFO deduplicates)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.queued: list[tuple[str, str]] = []  # (task id, group)

    def enqueue(self, task_id: str, group: str) -> None:
        with self._lock:
            if all(queued != task_id for queued, _ in self.queued):
                self.queued.append((task_id, group))
