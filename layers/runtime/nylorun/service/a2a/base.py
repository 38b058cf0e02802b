"""What every A2A operation stands on: the ports it speaks to, and the caller's own tasks as it sees them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nylorun.engine.agent import AgentRegistry
from nylorun.engine.files import FileService
from nylorun.limits import ANSWER_BUDGET, fit_task, payload_bytes
from nylorun.ports import Owner, TaskRecord, TaskStore, TurnOrchestrator
from nylorun.profile.extensions import left_out, visible
from nylorun.protocol.errors import TaskNotFoundError
from nylorun.protocol.jsonrpc import Encoded
from nylorun.protocol.models import JsonObject, Task
from nylorun.service.a2a.caller import Caller
from nylorun.service.scheduler import TurnScheduler
from nylorun.settings import Settings

if TYPE_CHECKING:  # made by wiring when first used: standardwebhooks and the A2A client stay out of cold start
    from nylorun.service.connections import ConnectionFlow
    from nylorun.service.delegation import DelegationCallbacks


class ServiceBase:
    """The ports and settings `A2AService` is made with (its constructor sets them), shared by each group of
    operations."""

    _delegations: DelegationCallbacks | None
    _connections: ConnectionFlow | None = None  # set by wiring when the stack declares providers
    _files: FileService | None
    _store: TaskStore
    _orchestrator: TurnOrchestrator
    _scheduler: TurnScheduler
    _registry: AgentRegistry
    _settings: Settings

    def _owned(self, owner: Owner, task_id: str) -> TaskRecord:
        record = self._store.get(task_id)
        if record is None or record.owner != owner:
            # Another subject's task is "not found", never "forbidden" (nothing leaks).
            raise TaskNotFoundError(f"Task {task_id[:128]} not found")
        return record

    def _render(self, caller: Caller, record: TaskRecord, history_length: int | None) -> JsonObject:
        """The task as the caller sees it (`visible`), in one answer's size (`fit_task`), as JSON values."""
        task = self._task(record, history_length)
        gone = left_out(task, caller.extensions)
        # Dumped without what the caller may not see, and encoded once: the answer writes this text (the JSON values
        # beside it are what the service hands in-process callers).
        text = task.model_dump_json(by_alias=True, exclude_none=True, exclude=gone, ensure_ascii=True)
        # Lambda: 6 MB response payload; we keep answers under 5 MiB (nylorun.limits.fit_task).
        if payload_bytes(text) <= ANSWER_BUDGET:
            return Encoded(task.model_dump(mode="json", by_alias=True, exclude_none=True, exclude=gone), text)
        return fit_task(visible(task, caller.extensions)).wire()

    def _rendered_task(self, caller: Caller, record: TaskRecord, history_length: int | None) -> Task:
        """`_render` as a Task (ListTasks fits its page to the answer's size itself)."""
        return fit_task(visible(self._task(record, history_length), caller.extensions))

    def _task(self, record: TaskRecord, history_length: int | None) -> Task:
        history = record.history
        if history_length is not None:
            history = history[-history_length:] if history_length > 0 else []
        artifacts = record.artifacts
        if self._files is not None:
            # Stored files are handed out as fresh presigned URLs on every read (an old one may have expired).
            files = self._files
            artifacts = [a.model_copy(update={"parts": files.render_parts(a.parts)}) for a in artifacts]
            history = [m.model_copy(update={"parts": files.render_parts(m.parts)}) for m in history]
        return Task(
            id=record.task_id,
            context_id=record.context_id,
            status=record.status,
            artifacts=artifacts or None,
            history=history or None,
            metadata=record.metadata,
        )
