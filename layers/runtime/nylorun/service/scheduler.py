"""Turns of one context run one at a time, in the order they arrived (Profile v2: a new message in a busy
context is queued, and answered with the task that will take it).

The table decides who goes next (`claim_next`); the SQS FIFO queue (one group per context) is the durable
backstop that the `dispatch` function drains. The fast path is direct: the turn that ends starts the next.
"""

from __future__ import annotations

import hashlib

from nylorun.observability import logger
from nylorun.ports import ContextQueue, Owner, TaskRecord, TaskStore, TurnOrchestrator
from nylorun.protocol.models import TaskState


class ContextStillBusy(Exception):
    """A queued turn cannot start yet: its context is held by an earlier turn."""


def queue_group(owner: Owner, context_id: str) -> str:
    # One FIFO group per context (agent, subject, context); a digest keeps ids short and free of PII.
    return hashlib.sha256(f"{owner.agent}\n{owner.subject}\n{context_id}".encode()).hexdigest()


class TurnScheduler:
    def __init__(self, store: TaskStore, orchestrator: TurnOrchestrator, queue: ContextQueue) -> None:
        self._store = store
        self._orchestrator = orchestrator
        self._queue = queue

    def submitted(self, record: TaskRecord, took_context: bool) -> None:
        """A new turn was created: start it if it holds the context, else queue it."""
        if took_context:
            self._orchestrator.start(record.task_id)
        else:
            self._queue.enqueue(record.task_id, queue_group(record.owner, record.context_id))
            logger.info("turn queued behind a busy context", extra={"task_id": record.task_id})

    def resubmitted(self, record: TaskRecord) -> None:
        """The same message came again (a retry): finish whatever the first attempt may not have done.
        Never start a turn that does not hold its context (an execution name can be used only once)."""
        if record.state != TaskState.SUBMITTED:
            return
        state = self._store.context_state(record.owner, record.context_id)
        if state["activeTask"] == record.task_id:
            self._orchestrator.start(record.task_id)
        else:
            self._queue.enqueue(record.task_id, queue_group(record.owner, record.context_id))

    def ended(self, owner: Owner, context_id: str) -> str | None:
        """A turn ended (or a queued one was canceled): the next queued turn takes the context and starts."""
        task_id = self._store.claim_next(owner, context_id)
        if task_id is not None:
            self._orchestrator.start(task_id)
            logger.info("next queued turn started", extra={"task_id": task_id})
        return task_id

    def dispatch(self, task_id: str) -> None:
        """The backstop for one queued turn. Done (the message can go) once the turn has started or ended;
        ContextStillBusy while an earlier turn holds the context."""
        head = self._store.head(task_id)
        if head is None or TaskState(head["state"]) != TaskState.SUBMITTED:
            return
        owner = Owner(subject=head["subject"], agent=head["agent"])
        context_id = head["contextId"]
        if self._store.context_state(owner, context_id)["activeTask"] == task_id:
            self._orchestrator.start(task_id)  # claimed, but the start may have been lost: idempotent
            return
        if self.ended(owner, context_id) == task_id:
            return
        head = self._store.head(task_id)
        if head is not None and TaskState(head["state"]) == TaskState.SUBMITTED:
            raise ContextStillBusy(task_id)
