"""Tasks: reading them (GetTask, heads, ListTasks) and writing their statuses, history, artifacts, answers."""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from typing import Any

from nylorun.adapters.dynamodb import codec, salvage
from nylorun.adapters.memory.state import State, SubjectEntry, as_stored, copy_record, sound
from nylorun.limits import CALLER_HEADROOM, check_status, checked_bytes, grown, stored_bytes
from nylorun.ports import (
    DuplicateMessage,
    InteractionClosed,
    NotInState,
    Owner,
    TaskPage,
    TaskQuery,
    TaskRecord,
    Uncertainty,
)
from nylorun.profile.extensions import Interaction, PlanStep
from nylorun.protocol.models import Artifact, Message, TaskState, TaskStatus, format_timestamp, now_timestamp


class Tasks(State):
    """Tasks as GetTask and ListTasks read them, and the writes of their status, history and artifacts."""

    # ------------------------------------------------------------------ reads
    def get(self, task_id: str) -> TaskRecord | None:
        with self._lock:
            task = self._live(task_id)
            return salvage.readable(copy_record(task.record), task.status_ts, sound) if task else None

    def head(self, task_id: str) -> dict[str, Any] | None:
        """The same plain values the DynamoDB store's task item holds."""
        with self._lock:
            task = self._live(task_id)
            if task is None:
                return None
            return codec.head(
                codec.task_item(
                    task.record,
                    status_ts=task.status_ts,
                    art_seq=task.art_seq,
                    content_bytes=task.content_bytes,
                    interaction_seq=task.interaction_seq,
                    status_log=task.status_log or None,
                )
            )

    def list_tasks(self, owner: Owner, query: TaskQuery) -> TaskPage:
        """Newest status first (ties: task id, descending), as the DynamoDB indexes order them. The page token
        names the last task shown and is bound to the query."""
        after = format_timestamp(query.status_after) if query.status_after is not None else None
        bound_to = codec.fingerprint([owner.agent, owner.subject, query.context_id, query.state, after])
        start = codec.decode_token(query.page_token, bound_to) if query.page_token else None
        if start is not None and (not isinstance(start, str) or (after is not None and start < after)):
            raise codec.invalid_token()
        with self._lock:
            matches = sorted(
                (
                    t
                    for t in self._tasks.values()
                    if t.record.owner == owner
                    and self._live(t.record.task_id) is not None
                    and (query.context_id is None or t.record.context_id == query.context_id)
                    and (query.state is None or t.record.state == query.state)
                    and (after is None or t.status_ts >= after)
                ),
                key=lambda t: t.sort_key,
                reverse=True,
            )
            rest = [t for t in matches if start is None or t.sort_key < start]
            page = rest[: query.page_size]
            tokens = [codec.encode_token(t.sort_key, bound_to) for t in page]
            # Like the index: tasks without their history and artifacts (GetTask reads those).
            return TaskPage(
                tasks=[salvage.readable(copy_record(t.record, with_content=False), t.status_ts, sound) for t in page],
                next_page_token=tokens[-1] if len(rest) > query.page_size else "",
                total_size=len(matches),
                tokens=tokens,
            )

    # ------------------------------------------------------------------ writes
    def set_status(
        self,
        task_id: str,
        status: TaskStatus,
        *,
        expect: Collection[TaskState],
        history: Sequence[Message] = (),
        interaction: Interaction | None = None,
        interaction_seq: int | None = None,
        plan: Sequence[PlanStep] | None = None,
        enforce_budget: bool = True,
        uncertain: Uncertainty | None = None,
        expect_uncertain: int | None = None,
    ) -> TaskRecord:
        check_status(status, interaction)
        added = checked_bytes(history)
        with self._lock:
            task = self._tasks.get(task_id)
            if task is None or task.record.state not in expect:
                raise NotInState(f"task {task_id} is not in {sorted(s.value for s in expect)}")
            marked = task.record.uncertainty
            if expect_uncertain is not None and (marked is None or marked.attempt != expect_uncertain):
                raise NotInState(f"task {task_id} is not waiting for an operator in attempt {expect_uncertain}")
            task.record.uncertainty = uncertain
            task.content_bytes = grown(task.content_bytes, added, self._max_task_bytes if enforce_budget else None)
            record = task.record
            ctx = self._contexts.get((record.owner, record.context_id))
            if status.state.terminal and not record.state.terminal:
                # The task ends: its turn and its push configs leave the open counts (domain/quotas.py).
                subject = self._subjects.setdefault(record.owner.subject, SubjectEntry())
                subject.open_turns -= 1
                subject.push_configs -= len(self._push.get(task_id, {}))
                if ctx is not None:
                    ctx.open_turns -= 1
                record.expires_at = int(time.time()) + self._retention
            ts = status.timestamp or now_timestamp()
            record.status = as_stored(status.model_copy(update={"timestamp": ts}))
            task.status_ts = ts
            record.history = [*record.history, *map(as_stored, history)]
            record.interaction = as_stored(interaction) if interaction is not None else None
            task.interaction_seq = (interaction_seq or 0) if interaction is not None else None
            if plan is not None:
                record.plan = [as_stored(step) for step in plan]
            record.version += 1
            task.status_changed()
            if status.state.terminal and ctx is not None and ctx.active_task == task_id:
                ctx.active_task = None  # a terminal status frees the context for its next turn
            # As the DynamoDB store: the new status, interaction and plan; history and artifacts are for `get`.
            return copy_record(record, with_content=False)

    def put_artifact(self, task_id: str, artifact: Artifact) -> None:
        """An artifact keeps the place it was first given; a rewrite (same id) replaces its content."""
        size = checked_bytes([artifact])
        with self._lock:
            task = self._task(task_id)
            record = task.record
            old = sum(stored_bytes(a) for a in record.artifacts if a.artifact_id == artifact.artifact_id)
            task.content_bytes = grown(task.content_bytes - old, size, self._max_task_bytes)
            record.version += 1  # as the DynamoDB store: every write of the task's size is versioned
            task.art_seq += 1
            artifact = as_stored(artifact)
            ids = [a.artifact_id for a in record.artifacts]
            if artifact.artifact_id in ids:
                record.artifacts = [
                    artifact if a.artifact_id == artifact.artifact_id else a for a in record.artifacts
                ]
            else:
                record.artifacts = [*record.artifacts, artifact]

    def append_history(
        self,
        task_id: str,
        messages: Sequence[Message],
        status: TaskStatus | None,
        *,
        sender: tuple[Owner, str] | None = None,
    ) -> None:
        """Append messages, optionally replacing the status (same state): the task keeps its place in lists."""
        if status is not None:
            check_status(status, None)
        added = checked_bytes(messages)
        with self._lock:
            task = self._task(task_id)
            used = grown(task.content_bytes, added, self._max_task_bytes, reserve=CALLER_HEADROOM)
            if sender is not None and sender in self._messages:
                raise DuplicateMessage(self._messages[sender])
            task.content_bytes = used
            if sender is not None:
                self._messages[sender] = task_id
            task.record.history = [*task.record.history, *map(as_stored, messages)]
            if status is not None:
                task.record.status = as_stored(status)
                task.status_changed()
            task.record.version += 1

    def answer_interaction(
        self,
        task_id: str,
        interaction_id: str,
        answer: Any,
        message: Message,
        status: TaskStatus,
        owner: Owner,
        retry_key: str,
    ) -> None:
        """Exactly one answer wins: the interaction must be the open one, its journal entry unanswered, and
        the reply (its retry key) new."""
        with self._lock:
            task = self._tasks.get(task_id)
            if task is None or task.record.interaction is None:
                raise InteractionClosed("no open interaction")
            if task.record.interaction.interaction_id != interaction_id:
                raise InteractionClosed("not the open interaction")
            used = grown(task.content_bytes, checked_bytes([message]), self._max_task_bytes, reserve=CALLER_HEADROOM)
            if (owner, retry_key) in self._messages:
                raise DuplicateMessage(self._messages[(owner, retry_key)])
            entry = task.journal.get(task.interaction_seq or 0)
            if entry is None or entry.get("answer") is not None:
                raise InteractionClosed("the interaction was answered or changed meanwhile")
            ts = status.timestamp or now_timestamp()
            record = task.record
            record.status = as_stored(status.model_copy(update={"timestamp": ts}))
            task.status_ts = ts
            record.history = [*record.history, as_stored(message)]
            record.interaction, task.interaction_seq = None, None
            record.version += 1
            task.status_changed()
            task.content_bytes = used
            entry.update(answer=codec.dumps(answer), finished=True, finishedAt=ts)
            self._messages[(owner, retry_key)] = task_id
