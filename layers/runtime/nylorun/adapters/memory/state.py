"""The in-memory store's private state: per-task, per-context and per-subject records, and copies out."""

from __future__ import annotations

import dataclasses
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, TypeVar

from nylorun.adapters.dynamodb import codec
from nylorun.domain.quotas import Quotas
from nylorun.events import logged
from nylorun.ports import NotInState, OperatorAction, Owner, ReceiverState, Resolved, TaskRecord
from nylorun.profile.extensions import Interaction, PlanStep
from nylorun.protocol.models import Artifact, Message, TaskStatus


@dataclass
class ContextEntry:
    """A context's turn counters (domain/contexts.py)."""

    turns: int = 0  # turns created
    started: int = 0  # turns that took the context (in turn order)
    active_task: str | None = None
    last_task: str | None = None
    open_turns: int = 0  # created and not ended (domain/quotas.py)


@dataclass
class SubjectEntry:
    """A subject's open counts (domain/quotas.py)."""

    open_turns: int = 0
    push_configs: int = 0  # configs of the subject's open tasks


@dataclass
class TaskEntry:
    """A task's record and what the DynamoDB store keeps beside it (journal, tokens, sizes)."""

    record: TaskRecord
    status_ts: str  # ListTasks orders by this; a reminder that keeps the state does not move it
    interaction_seq: int | None = None
    content_bytes: int = 0  # history and artifacts, as stored (the task's size budget)
    art_seq: int = 0
    journal: dict[int, dict[str, Any]] = field(default_factory=dict)  # seq -> journal item (codec)
    wait_tokens: dict[str, str] = field(default_factory=dict)  # interaction id -> callback token
    status_log: list[str] = field(default_factory=list)  # as the task item's statusLog (nylorun.events.logged)
    last_resolution: Resolved | None = None  # an operator's last, and its attempt (docs/operate.md#lost-outcomes)
    operator_actions: list[OperatorAction] = field(default_factory=list)

    def status_changed(self) -> None:
        self.status_log = logged(self.status_log, codec.status_body(self.record.status))

    @property
    def sort_key(self) -> str:
        return f"{self.status_ts}#{self.record.task_id}"


def copy_record(record: TaskRecord, *, with_content: bool = True) -> TaskRecord:
    """A record the caller may change freely (wire models are never changed in place, only copied)."""
    return dataclasses.replace(
        record,
        history=list(record.history) if with_content else [],
        artifacts=list(record.artifacts) if with_content else [],
        plan=list(record.plan),
    )


class State:
    """What every part of the in-memory store shares: its records and the one lock over them."""

    _max_task_bytes: int
    _retention: int  # docs/operate.md#data-retention: from a task's end to its expiry
    _quotas: Quotas
    _subjects: dict[str, SubjectEntry]
    _lock: threading.RLock
    _tasks: dict[str, TaskEntry]
    _contexts: dict[tuple[Owner, str], ContextEntry]
    _messages: dict[tuple[Owner, str], str]  # (owner, messageId) -> task id
    _push: dict[str, dict[str, dict[str, Any]]]  # task -> config id -> push config item (codec)
    _fan_out: dict[tuple[str, str], str]  # (task, event) -> the id of the last config queued
    _file_heads: dict[tuple[str, str], int]  # (scope, path) -> latest version
    _file_writes: dict[tuple[str, str], int]  # (scope, write key) -> the version it got
    _seen_deliveries: dict[tuple[str, str], int]  # (task, a delegate's delivery id) -> when it may be forgotten
    _receivers: dict[str, ReceiverState]  # a subject's receiver (keyed digest) -> its breaker
    _probes: dict[str, float]  # a receiver -> until when its one probe attempt is claimed
    _budgets: dict[tuple[str, int], float]  # (a subject's budget, window) -> delivery seconds reserved
    _attempts: dict[str, int]  # a push delivery (its webhook-id) -> its failed attempts

    def _live(self, task_id: str) -> TaskEntry | None:
        """The task, unless it is gone: never stored, removed, or expired (docs/operate.md#data-retention)."""
        task = self._tasks.get(task_id)
        expires = task.record.expires_at if task is not None else None
        return None if task is None or (expires is not None and expires <= time.time()) else task

    def _task(self, task_id: str) -> TaskEntry:
        task = self._tasks.get(task_id)
        if task is None:
            raise NotInState(f"task {task_id} is gone")
        return task


Stored = TypeVar("Stored", Message, Artifact, TaskStatus, Interaction, PlanStep)


def as_stored(model: Stored) -> Stored:
    """A wire model as a store hands it back: through its wire JSON (as the DynamoDB store keeps it)."""
    stored = type(model).model_validate_json(codec.dumps(model.wire()))
    _SOUND[id(stored)] = stored
    return stored


# What `as_stored` made, by id, for as long as it lives: read back, each went through its wire JSON already, so a
# read need not check it again (wire models are never changed in place). Anything else the store holds (an object
# put in its records by hand) is checked on every read, as the DynamoDB store checks every item it reads.
_SOUND: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()


def sound(model: Any) -> bool:
    """Whether `model` is one `as_stored` made (a weak reference: an id is never taken for a dead object's)."""
    return _SOUND.get(id(model)) is model
