"""GetTask, ListTasks and CancelTask: a caller's own tasks, read, listed and canceled."""

from __future__ import annotations

import dataclasses

from nylorun.domain.messages import agent_text, current_trace_id, totals, with_telemetry
from nylorun.engine.runner import NOT_TERMINAL
from nylorun.limits import ANSWER_BUDGET, answer_bytes
from nylorun.observability import logger
from nylorun.ports import InvalidPageToken, StateConflict, TaskQuery
from nylorun.protocol.errors import InvalidParamsError, TaskNotCancelableError
from nylorun.protocol.models import (
    CancelTaskRequest,
    GetTaskRequest,
    JsonObject,
    ListTasksRequest,
    ListTasksResponse,
    Task,
    TaskState,
    TaskStatus,
)
from nylorun.service.a2a.base import ServiceBase
from nylorun.service.a2a.caller import Caller


class Tasks(ServiceBase):
    # ================================================================== GetTask / ListTasks
    def get_task(self, caller: Caller, request: GetTaskRequest) -> JsonObject:
        record = self._owned(caller.owner, request.id)
        return self._render(caller, record, request.history_length)

    def list_tasks(self, caller: Caller, request: ListTasksRequest) -> JsonObject:
        page_size = request.page_size or 50
        query = TaskQuery(
            context_id=request.context_id,
            state=request.status,
            status_after=request.status_timestamp_after,
            page_size=page_size,
            page_token=request.page_token or None,
        )
        try:
            page = self._store.list_tasks(caller.owner, query)
        except InvalidPageToken as exc:
            raise InvalidParamsError(str(exc), field_violations=[("pageToken", str(exc))]) from None
        # Decision: ListTasks sends no history unless historyLength asks for it (cheap lists by default).
        history_length = request.history_length or 0
        tasks: list[Task] = []
        next_page_token, size = page.next_page_token, 0
        for index, head in enumerate(page.tasks):
            record = head
            if history_length or request.include_artifacts:
                record = self._store.get(head.task_id) or head
            if not request.include_artifacts:
                record = dataclasses.replace(record, artifacts=[])  # docs/protocol.md §7.4: omitted, not []
            task = self._rendered_task(caller, record, history_length)
            size += answer_bytes(task.wire()) + 1
            if tasks and size > ANSWER_BUDGET:
                # Lambda: 6 MB response payload; we keep answers under 5 MiB. The page ends before the task
                # that would pass it, and its token resumes there (pageSize is a most, not a promise).
                next_page_token = page.tokens[index - 1]
                break
            tasks.append(task)
        return ListTasksResponse(
            tasks=tasks, next_page_token=next_page_token, page_size=page_size, total_size=page.total_size
        ).wire()

    # ================================================================== CancelTask
    def cancel_task(self, caller: Caller, request: CancelTaskRequest) -> JsonObject:
        record = self._owned(caller.owner, request.id)
        if record.state.terminal:
            raise TaskNotCancelableError(f"Task {record.task_id} is in terminal state: {record.state.value}")
        # A canceled turn still records its telemetry (steps, tokens and cost spent before the cancel).
        message = with_telemetry(
            agent_text(record, "Canceled at the caller's request."),
            totals(self._store.journal(record.task_id), current_trace_id(record.task_id)),
        )
        try:
            record = self._store.set_status(
                record.task_id,
                TaskStatus(state=TaskState.CANCELED, message=message),
                expect=NOT_TERMINAL,
                history=[message],
                enforce_budget=False,  # a task at its budget can still be canceled
            )
        except StateConflict:
            raise TaskNotCancelableError(f"Task {record.task_id} ended before it could be canceled") from None
        # Cancel really stops: the journal refuses new effects from now on; stop the execution too, and end
        # any wait for an answer (Step Functions keeps a parked execution until its token is finished).
        # The execution of its current attempt: each attempt is an execution of its own
        # (docs/operate.md#lost-outcomes).
        self._orchestrator.stop(record.task_id, record.attempt)
        for token in self._store.wait_tokens(record.task_id):
            self._orchestrator.abandon(token, "Canceled at the caller's request")
        if self._delegations is not None:
            self._delegations.cancel_delegates(record.task_id)  # real CancelTask of the work it handed on
        logger.info("task canceled", extra={"task_id": record.task_id})
        self._scheduler.ended(record.owner, record.context_id)  # the queue moves on
        return self._render(caller, self._owned(caller.owner, record.task_id), None)
