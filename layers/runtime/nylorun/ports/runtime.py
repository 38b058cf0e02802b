"""The ports that move work along: events out, queued turns, and the orchestrator that runs turns."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from nylorun.events import RuntimeEvent


class EventBus(Protocol):
    def publish(self, events: Sequence[RuntimeEvent]) -> None:
        """Publish every event or raise (the caller retries; consumers dedupe on `eventId`)."""
        ...


class ContextQueue(Protocol):
    """The durable queue of turns waiting for a busy context (SQS FIFO, one group per context)."""

    def enqueue(self, task_id: str, group: str) -> None: ...


class TurnOrchestrator(Protocol):
    """Runs turns durably (Step Functions deployed and locally on moto)."""

    def start(self, task_id: str, attempt: int = 0) -> None:
        """Start the task's turn. Idempotent: the execution is named by the task id, and from attempt 1 (a turn an
        operator resumed) by the task id and the attempt."""
        ...

    def resume(self, token: str) -> None:
        """The open interaction was answered: continue the waiting execution."""
        ...

    def abandon(self, token: str, reason: str) -> None:
        """The task was canceled while waiting: end the wait."""
        ...

    def stop(self, task_id: str, attempt: int = 0) -> None:
        """Stop the execution of the turn's attempt (cancel). Idempotent."""
        ...


class TurnHandler(Protocol):
    """What runs a turn's actions (`engine/runner.py`, `TurnRunner`): an orchestrator without Step Functions
    calls it directly."""

    def handle(self, event: dict[str, Any]) -> Any: ...
