"""What an operator does to a task whose step lost its outcome (`nylorun admin`,
docs/operate.md#lost-outcomes), and the gauge of the tasks waiting for one.

Profile v2: a lost outcome leaves the task WORKING with effects/v1 `uncertain`; the Runtime never runs the effect
again by itself. An operator looks at the outside world, then either

* resolves it: the effect finished (with the result it had) or did not happen (it runs again with the same
  idempotency key). Either way the turn resumes in a new execution, the task's next attempt;
* or fails it: the task ends FAILED with the operator's reason, and its context's next queued turn starts.

Nobody doing either within the uncertainty deadline fails the task from the turn state machine
(`TurnRunner.deadline`). Every action is conditional on the task still waiting on the same effect in the same
attempt, so two operators (or an operator and the deadline) never both act; a repeated resolution does nothing
more than make sure its attempt was started.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from nylorun.domain.messages import agent_text, current_trace_id, totals, with_telemetry
from nylorun.engine.replay import opaque_id
from nylorun.limits import MAX_STORED_JSON_BYTES
from nylorun.ports import (
    OperatorAction,
    OperatorStore,
    Owner,
    Resolution,
    StateConflict,
    TaskRecord,
    TaskStore,
    TurnOrchestrator,
    UncertainTask,
)
from nylorun.profile.status import RESOLVED_TEXT, progress_message
from nylorun.protocol.models import TaskState, TaskStatus


class Operations(TaskStore, OperatorStore, Protocol):
    """The store an operator acts through: the task store and the operators' part of it."""


class Scheduler(Protocol):
    def ended(self, owner: Owner, context_id: str) -> str | None: ...


class Refused(Exception):
    """The action does not apply to the task as it is (one line for the operator; nothing was changed)."""


@dataclass(frozen=True)
class Waiting:
    """A task waiting for an operator, with what the operator needs to look the effect up outside."""

    task: UncertainTask
    effect_name: str
    effect_started_at: str | None
    age_seconds: float

    def view(self) -> dict[str, Any]:
        u = self.task.uncertainty
        return {
            "taskId": self.task.task_id, "agent": self.task.owner.agent, "subject": self.task.owner.subject,
            "contextId": self.task.context_id, "since": self.task.since, "ageSeconds": round(self.age_seconds),
            "effect": {"id": u.effect_id, "name": self.effect_name, "seq": u.seq, "startedAt": self.effect_started_at},
            "attempt": u.attempt,
        }


@dataclass(frozen=True)
class Resumed:
    task_id: str
    effect_id: str
    attempt: int
    again: bool  # a repeat of a resolution already made: nothing more was written


def age_seconds(since: str, now: datetime) -> float:
    """Seconds from a status timestamp (RFC 3339, `Z`) to `now`."""
    return max(0.0, (now - datetime.fromisoformat(since)).total_seconds())


def gauge(store: OperatorStore, now: datetime) -> tuple[int, float]:
    """How many tasks wait for an operator, and how long the oldest has waited (seconds; 0 when none)."""
    waiting = store.uncertain_tasks()
    return len(waiting), max((age_seconds(w.since, now) for w in waiting), default=0.0)


def parse_result(text: str) -> Any:
    """`--result JSON`: what the effect returned, as JSON; Refused if it is not JSON or too large to journal."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise Refused(f"--result is not JSON: {error}") from None
    if len(json.dumps(value)) > MAX_STORED_JSON_BYTES:
        raise Refused(f"--result holds at most {MAX_STORED_JSON_BYTES} bytes of JSON")
    return value


def _nothing() -> None:
    return None


class OperatorService:
    def __init__(self, store: Operations, orchestrator: TurnOrchestrator, scheduler: Scheduler) -> None:
        self._store = store
        self._orchestrator = orchestrator
        self._scheduler = scheduler

    # ------------------------------------------------------------------ reads
    def waiting(self, now: datetime | None = None) -> list[Waiting]:
        now = now or datetime.now(UTC)
        found = []
        for task in self._store.uncertain_tasks():
            entry = self._store.journal(task.task_id).get(task.uncertainty.seq)
            found.append(Waiting(task, entry.name if entry else "?", entry.started_at if entry else None,
                                 age_seconds(task.since, now)))
        return found

    def show(self, task_id: str) -> dict[str, Any]:
        """The task as an operator sees it: its journal (effects' names, keys, times, results), its interactions
        and usage, and what operators did to it. Never for a caller: effects' names and results are internals."""
        record = self._task(task_id)
        journal = self._store.journal(task_id)
        telemetry = totals(journal, current_trace_id(task_id))

        steps = []
        for seq, entry in sorted(journal.items()):
            step: dict[str, Any] = {"seq": seq, "kind": entry.kind, "name": entry.name,
                                    "startedAt": entry.started_at, "finishedAt": entry.finished_at,
                                    "finished": entry.finished}
            if entry.kind == "effect":
                step["key"] = opaque_id(task_id, seq, "eff")
                step["result"] = entry.result
            elif entry.kind == "interaction":
                step["key"] = opaque_id(task_id, seq, "ia")
                step["answer"] = entry.answer
            else:
                step["usage"] = entry.result
            steps.append(step)
        u = record.uncertainty
        status_text = " ".join(p.text for p in (record.status.message.parts if record.status.message else []) if p.text)
        return {
            "task": {
                "id": task_id, "agent": record.owner.agent, "subject": record.owner.subject,
                "contextId": record.context_id, "turn": record.turn, "state": record.state.value,
                "statusTimestamp": record.status.timestamp, "statusText": status_text, "attempt": record.attempt,
                "uncertain": {"effect": u.effect_id, "seq": u.seq, "attempt": u.attempt} if u else None,
            },
            "journal": steps,
            "usage": {"steps": telemetry.steps, "tokens": telemetry.tokens, "costUsd": telemetry.cost_usd},
            "operatorActions": [_action(a) for a in self._store.operator_actions(task_id)],
        }

    # ------------------------------------------------------------------ resolve
    def resolve(self, task_id: str, resolution: Resolution, before: Callable[[], object] = _nothing) -> Resumed:
        """Record what became of the lost effect and resume the turn in its next attempt (a new execution).
        `before` runs once the resolution is accepted, before anything is written (the operator's log entry)."""
        record = self._task(task_id)
        lost = record.uncertainty
        if lost is None:
            return self._resolved_before(record, resolution)
        if resolution.effect_id != lost.effect_id:
            raise Refused(f"{resolution.effect_id} is not the effect task {task_id} lost (that is {lost.effect_id})")
        status = TaskStatus(
            state=TaskState.WORKING, message=progress_message(task_id, record.context_id, RESOLVED_TEXT, record.plan)
        )
        before()
        try:
            attempt = self._store.resolve_uncertain(task_id, lost, resolution, status)
        except StateConflict:
            raise Refused(f"task {task_id} changed meanwhile (resolved, failed or canceled): look again") from None
        self._orchestrator.start(task_id, attempt)
        # The lost attempt's execution only waits for its deadline, which now finds the task moved on: end it now.
        self._orchestrator.stop(task_id, lost.attempt)
        return Resumed(task_id, lost.effect_id, attempt, again=False)

    def _resolved_before(self, record: TaskRecord, resolution: Resolution) -> Resumed:
        """A resolution that finds the task no longer waiting: a repeat of the one that resumed it does nothing
        more (but starts its attempt, in case the first stopped before it could); anything else is refused."""
        last = self._store.last_resolution(record.task_id)
        if last is None or last.effect_id != resolution.effect_id:
            raise Refused(_not_waiting(record))
        if last.digest != resolution.digest:
            how = "finished with another result" if last.done else "not done"
            raise Refused(f"{resolution.effect_id} was already resolved ({how}); task {record.task_id} "
                          f"is {_state(record)}")
        if not record.state.terminal and record.attempt == last.attempt:
            self._orchestrator.start(record.task_id, last.attempt)  # idempotent: the execution's name
        return Resumed(record.task_id, resolution.effect_id, last.attempt, again=True)

    # ------------------------------------------------------------------ fail
    def fail(self, task_id: str, reason: str, before: Callable[[], object] = _nothing) -> TaskRecord:
        """End a task waiting for an operator: FAILED with the reason (the caller reads it), the context moves on.
        `before` runs once the task is found waiting, before anything is written."""
        record = self._task(task_id)
        lost = record.uncertainty
        if lost is None:
            raise Refused(_not_waiting(record))
        text = f"An operator ended this task: {reason}" if reason.strip() else "An operator ended this task."
        message = with_telemetry(agent_text(record, text), totals(self._store.journal(task_id), current_trace_id(task_id)))
        before()
        try:
            ended = self._store.set_status(
                task_id, TaskStatus(state=TaskState.FAILED, message=message), expect={TaskState.WORKING},
                history=[message], enforce_budget=False, expect_uncertain=lost.attempt,
            )
        except StateConflict:
            raise Refused(f"task {task_id} changed meanwhile (resolved, failed or canceled): look again") from None
        self._orchestrator.stop(task_id, lost.attempt)
        self._scheduler.ended(record.owner, record.context_id)  # the context's next queued turn starts
        return ended

    def _task(self, task_id: str) -> TaskRecord:
        record = self._store.get(task_id)
        if record is None:
            raise Refused(f"no task {task_id}")
        return record


def _state(record: TaskRecord) -> str:
    return record.state.value.removeprefix("TASK_STATE_")


def _not_waiting(record: TaskRecord) -> str:
    return f"task {record.task_id} is not waiting for an operator (it is {_state(record)})"


def _action(action: OperatorAction) -> dict[str, Any]:
    return {"at": action.at, "operator": action.operator, "action": action.action, "detail": action.detail}
