"""The `TurnOrchestrator` port without Step Functions: each turn runs at once in the caller's thread."""

from __future__ import annotations

import threading
import uuid
from collections import deque

from nylorun.ports import TurnHandler


class InMemoryOrchestrator:
    """The `TurnOrchestrator` port without Step Functions: `start` runs the turn at once in the calling
    thread, as the turn state machine would (run; when interrupted, park a callback token; `resume` runs it
    again). Turns started while one runs in the same thread (the next queued turn, a resumed wait) run after
    it, in order, never nested. `attach` the runner (`engine/runner.py`, `TurnRunner`) before the first start."""

    def __init__(self) -> None:
        self._runner: TurnHandler | None = None
        self._lock = threading.Lock()
        self._started: set[tuple[str, int]] = set()  # (task, attempt): the execution names used
        self._waiting: dict[str, str] = {}  # callback token -> task id
        self._local = threading.local()

    def attach(self, runner: TurnHandler) -> None:
        self._runner = runner

    def start(self, task_id: str, attempt: int = 0) -> None:
        with self._lock:
            if (task_id, attempt) in self._started:
                return  # execution names are unique: a second start is a no-op
            self._started.add((task_id, attempt))
        self._drive(task_id)

    def resume(self, token: str) -> None:
        with self._lock:
            task_id = self._waiting.pop(token, None)
        if task_id is not None:  # else the wait was already finished (Step Functions: InvalidToken, ignored)
            self._drive(task_id)

    def abandon(self, token: str, reason: str) -> None:
        with self._lock:
            self._waiting.pop(token, None)

    def stop(self, task_id: str, attempt: int = 0) -> None:
        """Nothing runs in the background; a canceled task's journal refuses further effects."""

    def _drive(self, task_id: str) -> None:
        pending: deque[str] | None = getattr(self._local, "pending", None)
        if pending is not None:
            pending.append(task_id)
            return
        self._local.pending = pending = deque([task_id])
        try:
            while pending:
                self._run(pending.popleft())
        finally:
            self._local.pending = None

    def _run(self, task_id: str) -> None:
        runner = self._runner
        if runner is None:
            raise RuntimeError("InMemoryOrchestrator.attach(runner) was not called")
        try:
            outcome = runner.handle({"action": "run", "taskId": task_id})
        except Exception:  # noqa: BLE001 - the state machine's Catch States.ALL → FailTurn
            # The run failed (the runner handles the agent's own errors; this is the store's).
            runner.handle({"action": "fail", "taskId": task_id})
            return
        # Waiting for a person, or for a delegate (docs/writing/delegation.md).
        if outcome["outcome"] in ("interrupted", "waiting"):
            token = str(uuid.uuid4())
            with self._lock:
                self._waiting[token] = task_id
            runner.handle(
                {
                    "action": "park",
                    "taskId": task_id,
                    "interactionId": outcome["interactionId"],
                    "token": token,
                }
            )
