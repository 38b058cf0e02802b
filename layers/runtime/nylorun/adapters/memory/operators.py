"""Operators: the actions they took and the tasks waiting for them on a lost outcome."""

from __future__ import annotations

from nylorun.adapters.dynamodb import codec
from nylorun.adapters.memory.state import State, as_stored
from nylorun.limits import check_status
from nylorun.ports import NotInState, OperatorAction, Resolution, Resolved, UncertainTask, Uncertainty
from nylorun.protocol.models import TaskState, TaskStatus, now_timestamp


class Operators(State):
    """Operators' actions and lost outcomes (docs/operate.md#lost-outcomes)."""

    def record_operator_action(self, task_id: str, action: OperatorAction) -> None:
        with self._lock:
            self._task(task_id).operator_actions.append(action)

    def operator_actions(self, task_id: str) -> list[OperatorAction]:
        with self._lock:
            task = self._tasks.get(task_id)
            return list(task.operator_actions) if task else []

    def uncertain_tasks(self) -> list[UncertainTask]:
        with self._lock:
            marked = [
                UncertainTask(task_id=t.record.task_id, context_id=t.record.context_id, owner=t.record.owner,
                              since=t.status_ts, uncertainty=t.record.uncertainty)
                for t in self._tasks.values()
                if t.record.uncertainty is not None
            ]
        return sorted(marked, key=lambda u: (u.since, u.task_id))

    def resolve_uncertain(
        self, task_id: str, uncertainty: Uncertainty, resolution: Resolution, status: TaskStatus
    ) -> int:
        check_status(status, None)
        with self._lock:
            task = self._tasks.get(task_id)
            if task is None or task.record.state != TaskState.WORKING or task.record.uncertainty != uncertainty:
                raise NotInState(f"task {task_id} is not waiting for an operator on {uncertainty.effect_id}")
            entry = task.journal.get(uncertainty.seq)
            if resolution.effect_id != uncertainty.effect_id or entry is None or entry.get("finished"):
                raise NotInState(f"{resolution.effect_id} is not the effect task {task_id} lost")
            ts = status.timestamp or now_timestamp()
            if resolution.done:
                entry.update(finished=True, result=codec.dumps(resolution.result), finishedAt=ts)
            else:
                del task.journal[uncertainty.seq]
            record = task.record
            record.status = as_stored(status.model_copy(update={"timestamp": ts}))
            task.status_ts = ts
            record.uncertainty = None
            record.attempt += 1
            record.version += 1
            task.status_changed()
            task.last_resolution = Resolved(resolution.effect_id, resolution.done, resolution.digest, record.attempt)
            return record.attempt

    def last_resolution(self, task_id: str) -> Resolved | None:
        with self._lock:
            task = self._tasks.get(task_id)
            return task.last_resolution if task else None
