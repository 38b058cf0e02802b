"""The task store port: the Protocols the service and the turn engine speak to.

Their records (tasks, turns, journal entries, ...) are in `nylorun.ports.records`. Adapters
(`adapters/dynamodb/`, `adapters/memory/`) implement it and translate AWS errors into the domain errors
(`nylorun.domain.errors`); mapping to JSON-RPC errors happens in the service, never in an adapter.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, Protocol

from nylorun.domain.ids import Owner
from nylorun.ports.receivers import ReceiverStates
from nylorun.ports.records import (
    JournalEntry,
    NewTurn,
    OperatorAction,
    Resolution,
    Resolved,
    StoredPushConfig,
    TaskPage,
    TaskQuery,
    TaskRecord,
    TaskRemains,
    UncertainTask,
    Uncertainty,
)
from nylorun.profile.extensions import Interaction, PlanStep
from nylorun.protocol.models import Artifact, Message, TaskState, TaskStatus


class TurnStore(Protocol):
    """Tasks and their contexts: turns, statuses, history, artifacts and answers."""

    def create_turn(self, new: NewTurn, *, queue: bool = True) -> tuple[TaskRecord, bool]:
        """Open the context's next turn: task SUBMITTED, message in history. Returns the task and whether
        it took the context (start it now) or is queued behind the busy context. `queue=False` raises
        ContextBusy instead of queueing. DuplicateMessage if the messageId was seen before (so a retried
        call answers with the first call's task). QuotaExceeded (nothing written) when the context or the
        subject already holds its most open turns, or the subject its most push configs."""
        ...

    def claim_next(self, owner: Owner, context_id: str) -> str | None:
        """Let the next queued turn take a free context; returns its task id (to start), else None."""
        ...

    def head(self, task_id: str) -> dict[str, Any] | None:
        """The task item alone (owner, context, state, turn)."""
        ...

    def context_state(self, owner: Owner, context_id: str) -> dict[str, Any]:
        """`turns` created, `started`, and the `activeTask` holding the context (or None)."""
        ...

    def get(self, task_id: str) -> TaskRecord | None:
        """Consistent read of a task with its history and artifacts."""
        ...

    def task_for_message(self, owner: Owner, retry_key: str) -> str | None:
        """The task a message with this `Message.retry_key()` made (or answered), if any."""
        ...

    def list_tasks(self, owner: Owner, query: TaskQuery) -> TaskPage:
        """Owner's tasks, newest status first. Raises InvalidPageToken."""
        ...

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
        """docs/operate.md#lost-outcomes: `uncertain` marks the task as waiting for an operator (listed by
        `uncertain_tasks`) until its next status write, which clears the mark; `expect_uncertain` writes only
        while the task is marked so in that attempt (NotInState otherwise: an operator resumed it meanwhile).

        Conditional status change (NotInState unless the task is in one of `expect`; VersionConflict if
        other writers kept changing it). A terminal
        status frees the context. `history` is appended; the open interaction is replaced. TooLarge if the
        status message or the interaction is too large, or `history` would pass the task's budget (unless
        `enforce_budget=False`: the Runtime's own short closing message, counted but never refused). Returns
        the task's new status, interaction and plan (history, artifacts and metadata are for `get`)."""
        ...

    def put_artifact(self, task_id: str, artifact: Artifact) -> None:
        """Add or replace (same id) an artifact; TooLarge if it would pass the task's budget."""
        ...

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
        """Record the caller's answer exactly once, with the reply in history and the new status:
        InteractionClosed if the interaction is not the open one (unknown, already answered, or raced by another
        answer); DuplicateMessage if the reply (its `retry_key`) was seen before; TooLarge if the reply would
        leave less than `CALLER_HEADROOM` of the task's budget."""
        ...

    def append_history(
        self,
        task_id: str,
        messages: Sequence[Message],
        status: TaskStatus | None,
        *,
        sender: tuple[Owner, str] | None = None,
    ) -> None:
        """Append a caller's message (and the Runtime's note on it) without a state change; TooLarge as for
        `answer_interaction`. With `sender` (owner, the message's retry key), the message is recorded once:
        DuplicateMessage if that key was seen before."""
        ...



class JournalStore(Protocol):
    """The turn journal (replay) and the callback tokens of open interactions."""

    def journal(self, task_id: str) -> dict[int, JournalEntry]: ...

    def journal_start(self, task_id: str, entry: JournalEntry) -> None:
        """Write an entry *started*; TurnCanceled if the task is canceled, VersionConflict if the seq exists."""
        ...

    def journal_finish(self, task_id: str, seq: int, result: Any) -> None: ...

    def put_wait_token(self, task_id: str, interaction_id: str, token: str) -> None: ...

    def get_wait_token(self, task_id: str, interaction_id: str) -> str | None: ...

    def wait_tokens(self, task_id: str) -> list[str]: ...



class OperatorLog(Protocol):
    """Who did what to a task from `nylorun admin`: written before the action, shown by `admin show`."""

    def record_operator_action(self, task_id: str, action: OperatorAction) -> None: ...

    def operator_actions(self, task_id: str) -> list[OperatorAction]:
        """Oldest first."""
        ...


class OperatorStore(OperatorLog, Protocol):
    """docs/operate.md#lost-outcomes: the tasks waiting for an operator, and an operator's resolution of one."""

    def uncertain_tasks(self) -> list[UncertainTask]:
        """Every subject's tasks marked uncertain (`set_status(uncertain=…)`), oldest first; never a Scan."""
        ...

    def resolve_uncertain(
        self, task_id: str, uncertainty: Uncertainty, resolution: Resolution, status: TaskStatus
    ) -> int:
        """In one write: the lost effect's journal entry finished with the result (or, not done, removed, so the
        effect starts again with the same key), the mark cleared, `status` the task's (WORKING), its attempt one
        more, and the resolution kept as the task's last (`last_resolution`); returns that attempt. NotInState
        unless the task is still marked with `uncertainty`."""
        ...

    def last_resolution(self, task_id: str) -> Resolved | None:
        """The task's last resolution, if an operator resolved one."""
        ...


class PushConfigStore(Protocol):
    """Push notification configs of tasks."""

    def put_push_config(self, task_id: str, config: StoredPushConfig) -> None:
        """Add, or replace (same id), a config. A new one counts against its task and, while the task is open,
        against the task's subject: QuotaExceeded over either, nothing written. A config of a task that does not
        exist counts nowhere (the sweep removes it)."""
        ...

    def get_push_config(self, task_id: str, config_id: str) -> StoredPushConfig | None: ...

    def list_push_configs(self, task_id: str) -> list[StoredPushConfig]: ...

    def delete_push_config(self, task_id: str, config_id: str) -> None:
        """Remove a config (absent is fine), and its place in the counts `put_push_config` made."""
        ...

    def expire_push_configs(self, task_id: str, expires_at: int, config_ids: Sequence[str] | None = None) -> None:
        """The task ended: its configs (those named, else all) expire (TTL) at `expires_at` (epoch seconds)."""
        ...

    def sweep_push_configs(self) -> int:
        """Remove configs whose task no longer exists; returns how many."""
        ...

    def push_configs_after(self, task_id: str, after: str | None, limit: int) -> list[StoredPushConfig]:
        """Up to `limit` of the task's configs by id, those after the id `after` (a fan-out step)."""
        ...

    def fan_out_cursor(self, task_id: str, event_id: str) -> str | None:
        """The id of the last config an event's fan-out queued, if it stopped part-way."""
        ...

    def set_fan_out_cursor(self, task_id: str, event_id: str, after: str | None, expires_at: int) -> None:
        """Remember how far an event's fan-out got (None: it is done, forget it)."""
        ...


class FileVersions(Protocol):
    """Version numbers of the files an agent writes."""

    def file_version(self, scope: str, path: str, write_key: str) -> int:
        """The next version number of an output path (idempotent per write key)."""
        ...


class RetentionStore(Protocol):
    """What goes when a task expires (docs/operate.md#data-retention)."""

    def remains(self, task_id: str) -> TaskRemains:
        """The history, artifacts and journal still stored for a task (its item may be gone already)."""
        ...

    def remove_remains(self, task_id: str, file_writes: Sequence[tuple[str, str]]) -> int:
        """Delete every item of an expired task: its message dedupe records (those still naming it), its file
        writes (`(scope, write key)`), journal, callback tokens, push configs, fan-out cursors, then its history,
        artifacts and metadata. Safe to repeat; nothing of a task that has not expired. Returns the items deleted."""
        ...


class TaskStore(TurnStore, JournalStore, PushConfigStore, FileVersions, RetentionStore, ReceiverStates, Protocol):
    """Everything the Runtime keeps about tasks (and the push receivers' state, in the same table): the store the
    service and the turn engine speak to."""
