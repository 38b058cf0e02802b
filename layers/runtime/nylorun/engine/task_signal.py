"""A process-local wake-up for blocking SendMessages: a turn's action has just written its task."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class TaskSignal:
    """A blocking wait watches its task; the turn runner says when it has written one. Only a wait in the same
    process hears it (the local Runtime, where turns run in-process): on Lambda the turn runs in another
    function, so the api function's wait reads on its schedule (`service/a2a/wait_schedule.py`). A wake-up
    only brings the next read forward; the store stays the truth."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watches: dict[str, list[threading.Event]] = {}

    @contextmanager
    def watching(self, task_id: str) -> Iterator[threading.Event]:
        """An event set when the task is written while the block runs; the waiter clears it before reading."""
        event = threading.Event()
        with self._lock:
            self._watches.setdefault(task_id, []).append(event)
        try:
            yield event
        finally:
            with self._lock:
                events = self._watches[task_id]
                events.remove(event)
                if not events:
                    del self._watches[task_id]

    def written(self, task_id: str) -> None:
        with self._lock:
            events = list(self._watches.get(task_id, ()))
        for event in events:
            event.set()


# One per process: the api's waits and the turn function's runner share it wherever they share a process.
TASK_SIGNAL = TaskSignal()
