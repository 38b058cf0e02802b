"""The records the task store exchanges with the service and the turn engine (its Protocols: `ports.tasks`).

Tasks, turns and their queries, push configs, journal entries, operator resolutions, and what is left of an
expired task.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from nylorun.domain.errors import StoreError
from nylorun.domain.ids import Owner
from nylorun.profile.extensions import Interaction, PlanStep
from nylorun.protocol.models import Artifact, Message, TaskPushNotificationConfig, TaskState, TaskStatus


@dataclass(frozen=True)
class Uncertainty:
    """docs/operate.md#lost-outcomes: the effect whose outcome was lost, that the task waits on an operator for
    (`nylorun admin`)."""

    effect_id: str  # the effect's idempotency key, `opaque_id(task, seq, "eff")`, as effects/v1 shows it
    seq: int  # its place in the journal
    attempt: int  # the run of the turn that lost it (TaskRecord.attempt)


@dataclass
class TaskRecord:
    task_id: str
    context_id: str
    owner: Owner
    turn: int
    status: TaskStatus
    history: list[Message] = field(default_factory=list)
    artifacts: list[Artifact] = field(default_factory=list)
    metadata: dict[str, Any] | None = None
    interaction: Interaction | None = None
    plan: list[PlanStep] = field(default_factory=list)
    version: int = 0
    # When it expires (epoch seconds; docs/operate.md#data-retention): set by the status that ends it, never
    # before.
    expires_at: int | None = None
    # Which run of the turn this is: 0, then one more each time an operator resumes it after a lost outcome
    # (docs/operate.md#lost-outcomes). Its Step Functions execution is named after the task and this
    # (`execution_name`).
    attempt: int = 0
    # docs/operate.md#lost-outcomes: the lost effect the task waits on an operator for (set by
    # `set_status(uncertain=…)`, cleared by the next status write).
    uncertainty: Uncertainty | None = None

    @property
    def state(self) -> TaskState:
        return self.status.state


@dataclass(frozen=True)
class NewTurn:
    owner: Owner
    context_id: str
    message: Message
    metadata: dict[str, Any] | None = None
    # `Message.retry_key()` of the message as the caller sent it: a repeat of it is the same turn.
    retry_key: str = ""
    # The task the same message made before, which the caller has since acted on: this turn takes its key.
    replaces_task: str | None = None
    # SendMessage's `taskPushNotificationConfig`: written with the task (its `taskId` set then), counted as
    # `put_push_config` counts it, so a quota refuses the message and the config together.
    push_config: StoredPushConfig | None = None

    @property
    def dedupe_key(self) -> str:
        return self.retry_key or self.message.retry_key()


@dataclass(frozen=True)
class TaskQuery:
    context_id: str | None = None
    state: TaskState | None = None
    status_after: datetime | None = None
    page_size: int = 50
    page_token: str | None = None


@dataclass(frozen=True)
class TaskPage:
    tasks: list[TaskRecord]
    next_page_token: str
    total_size: int
    # tokens[i] resumes after tasks[i]: ListTasks ends a page early when its answer would grow too large.
    tokens: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class StoredPushConfig:
    config: TaskPushNotificationConfig  # with credentials: never returned to a caller as is
    created_at: str
    # The profile extensions its creator activated: deliveries show the same extension data.
    extensions: tuple[str, ...] = ()
    # When it expires (epoch seconds; TTL): set once its task has ended.
    expires_at: int | None = None
    # Who created it (the task's owner): its deliveries are signed with this subject's key
    # (docs/calling/push.md#your-signing-key). Empty on configs stored before it was kept: the push service
    # then reads the task's owner.
    subject: str = ""


def with_task(stored: StoredPushConfig, task_id: str) -> StoredPushConfig:
    """The config as it is kept for task `task_id` (a SendMessage's config learns its task id with the task)."""
    return dataclasses.replace(stored, config=stored.config.model_copy(update={"task_id": task_id}))


JournalKind = Literal["effect", "interaction", "usage", "wait"]


@dataclass
class JournalEntry:
    """One operation of a turn, by its position in the agent's code (replay order)."""

    seq: int
    kind: JournalKind
    name: str
    finished: bool = False
    result: Any = None
    answer: Any = None  # interactions: the caller's answer once given
    # When the store wrote it started and finished (ISO 8601 UTC; None on entries written before it kept them).
    started_at: str | None = None
    finished_at: str | None = None


@dataclass(frozen=True)
class UncertainTask:
    """One task waiting for an operator, as `nylorun admin uncertain` lists it (every subject's)."""

    task_id: str
    context_id: str
    owner: Owner
    since: str  # the uncertain status' timestamp
    uncertainty: Uncertainty


@dataclass(frozen=True)
class Resolution:
    """What an operator found of a lost effect: it finished with `result`, or (`done=False`) it never happened
    and runs again with the same key."""

    effect_id: str
    done: bool
    result: Any = None

    @property
    def digest(self) -> str:
        """What tells two resolutions apart (a repeated one from another): how, and the result's canonical JSON."""
        body = json.dumps([self.effect_id, self.done, self.result if self.done else None], sort_keys=True)
        return hashlib.sha256(body.encode()).hexdigest()


@dataclass(frozen=True)
class OperatorAction:
    """What an operator did to a task (`nylorun admin`, docs/operate.md#lost-outcomes), and who: kept beside
    the task's journal."""

    at: str  # ISO 8601 UTC, as status timestamps
    operator: str  # the IAM principal's ARN, or "local:<user>"
    action: str  # "resolve", "fail", "redrive", …
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ExpiredTask:
    """A task item DynamoDB's TTL deleted (the stream's REMOVE), as its old image names it."""

    task_id: str
    owner: Owner
    context_id: str


@dataclass(frozen=True)
class TaskRemains:
    """What is left of a task whose item expired (docs/operate.md#data-retention): where its files are named."""

    history: list[Message]
    artifacts: list[Artifact]
    journal: dict[int, JournalEntry]


@dataclass(frozen=True)
class Resolved:
    """A resolution as the task keeps it: which effect, how (`Resolution.digest`), and the attempt it started."""

    effect_id: str
    done: bool
    digest: str
    attempt: int


class InvalidPageToken(StoreError):
    pass
