"""Turns: opening a context's next turn, handing a free context to the next queued one, message dedupe."""

from __future__ import annotations

from typing import Any

from nylorun.adapters.dynamodb import codec
from nylorun.adapters.memory.state import ContextEntry, State, SubjectEntry, TaskEntry, as_stored, copy_record
from nylorun.domain.contexts import next_in_line, open_turn, takes_context
from nylorun.domain.quotas import QuotaExceeded
from nylorun.limits import stored_bytes
from nylorun.ports import DuplicateMessage, NewTurn, Owner, TaskRecord, with_task
from nylorun.protocol.models import now_timestamp


class Turns(State):
    """Opening turns, handing a free context on, and the messages already taken (dedupe)."""

    def create_turn(self, new: NewTurn, *, queue: bool = True) -> tuple[TaskRecord, bool]:
        with self._lock:
            known = self._messages.get((new.owner, new.dedupe_key))
            if known is not None and known != new.replaces_task:
                raise DuplicateMessage(known)
            ctx = self._contexts.setdefault((new.owner, new.context_id), ContextEntry())
            ts = now_timestamp()
            opening = open_turn(
                new.owner,
                new.context_id,
                turns=ctx.turns,
                started=ctx.started,
                active_task=ctx.active_task,
                last_task=ctx.last_task,
                queue=queue,
                timestamp=ts,
            )
            subject = self._subjects.setdefault(new.owner.subject, SubjectEntry())
            if ctx.open_turns >= self._quotas.turns_per_context:
                raise QuotaExceeded("turnsPerContext", self._quotas.turns_per_context)
            if subject.open_turns >= self._quotas.turns_per_subject:
                raise QuotaExceeded("turnsPerSubject", self._quotas.turns_per_subject)
            if new.push_config is not None and subject.push_configs >= self._quotas.push_configs_per_subject:
                raise QuotaExceeded("pushConfigsPerSubject", self._quotas.push_configs_per_subject)
            task_id = opening.task_id
            ctx.open_turns += 1
            subject.open_turns += 1
            ctx.turns = opening.turn
            ctx.last_task = task_id
            if opening.takes_context:
                ctx.started, ctx.active_task = ctx.turns, task_id
            message = as_stored(new.message.model_copy(update={"task_id": task_id, "context_id": new.context_id}))
            record = TaskRecord(
                task_id=task_id,
                context_id=new.context_id,
                owner=new.owner,
                turn=ctx.turns,
                status=opening.status,
                history=[message],
                metadata=codec.round_trip(new.metadata),
                version=1,
            )
            self._tasks[task_id] = TaskEntry(record=record, status_ts=ts, content_bytes=stored_bytes(message))
            self._messages[(new.owner, new.dedupe_key)] = task_id
            if new.push_config is not None:
                stored = with_task(new.push_config, task_id)
                self._push.setdefault(task_id, {})[str(stored.config.id)] = codec.push_item(task_id, stored)
                subject.push_configs += 1
            return copy_record(record), opening.takes_context

    def claim_next(self, owner: Owner, context_id: str) -> str | None:
        """The next queued turn (in turn order) takes the free context; queued turns canceled meanwhile are
        passed over."""
        with self._lock:
            ctx = self._contexts.get((owner, context_id))
            while ctx is not None and (
                task_id := next_in_line(
                    owner, context_id, turns=ctx.turns, started=ctx.started, active_task=ctx.active_task
                )
            ):
                ctx.started += 1
                task = self._tasks.get(task_id)
                if task is not None and takes_context(task.record.state):
                    ctx.active_task = task_id
                    task.record.version += 1
                    return task_id
            return None

    def context_state(self, owner: Owner, context_id: str) -> dict[str, Any]:
        with self._lock:
            ctx = self._contexts.get((owner, context_id)) or ContextEntry()
            return {"turns": ctx.turns, "started": ctx.started, "activeTask": ctx.active_task}

    def task_for_message(self, owner: Owner, retry_key: str) -> str | None:
        with self._lock:
            return self._messages.get((owner, retry_key))
