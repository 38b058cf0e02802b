"""In-memory adapters: the task store, a turn orchestrator that runs each turn at once in the caller's thread,
and a context queue. One process, no AWS: the benchmarks use them to measure the protocol layer alone.

`InMemoryTaskStore` keeps the `TaskStore` contract the DynamoDB store keeps (same task ids, same conflicts,
same ListTasks order and paging, same errors), with one lock instead of conditional writes. What it keeps
goes through the DynamoDB store's codec (`nylorun.adapters.dynamodb.codec`): JSON values (metadata, messages,
artifacts, journal results and answers, push configs) come back as their JSON round trip, heads are the same
plain task items, page tokens are encoded alike. Records handed out are copies: changing one never changes the
store. The contract both stores keep is tests/integration/test_store_contract.py.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from collections import deque
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from nylorun.adapters.dynamodb import codec, salvage
from nylorun.domain.contexts import next_in_line, open_turn, takes_context
from nylorun.domain.quotas import QuotaExceeded, Quotas
from nylorun.events import logged
from nylorun.limits import (
    CALLER_HEADROOM,
    DEFAULT_MAX_TASK_BYTES,
    DEFAULT_RETENTION_SECONDS,
    check_status,
    checked_bytes,
    grown,
    stored_bytes,
)
from nylorun.ports import (
    ContextQueue,
    DuplicateMessage,
    InteractionClosed,
    JournalEntry,
    NewTurn,
    NotInState,
    OperatorAction,
    OperatorStore,
    Owner,
    Resolution,
    Resolved,
    StoredPushConfig,
    TaskPage,
    TaskQuery,
    TaskRecord,
    TaskRemains,
    TaskStore,
    TurnCanceled,
    TurnHandler,
    TurnOrchestrator,
    UncertainTask,
    Uncertainty,
    VersionConflict,
    with_task,
)
from nylorun.profile.extensions import Interaction, PlanStep
from nylorun.protocol.models import Artifact, Message, TaskState, TaskStatus, format_timestamp, now_timestamp


@dataclass
class _Context:
    turns: int = 0  # turns created
    started: int = 0  # turns that took the context (in turn order)
    active_task: str | None = None
    last_task: str | None = None
    open_turns: int = 0  # created and not ended (domain/quotas.py)


@dataclass
class _Subject:
    open_turns: int = 0
    push_configs: int = 0  # configs of the subject's open tasks


@dataclass
class _Task:
    record: TaskRecord
    status_ts: str  # ListTasks orders by this; a reminder that keeps the state does not move it
    interaction_seq: int | None = None
    content_bytes: int = 0  # history and artifacts, as stored (the task's size budget)
    art_seq: int = 0
    journal: dict[int, dict[str, Any]] = field(default_factory=dict)  # seq -> journal item (codec)
    wait_tokens: dict[str, str] = field(default_factory=dict)  # interaction id -> callback token
    status_log: list[str] = field(default_factory=list)  # as the task item's statusLog (nylorun.events.logged)
    last_resolution: Resolved | None = None  # issue 16: an operator's last, and its attempt
    operator_actions: list[OperatorAction] = field(default_factory=list)

    def status_changed(self) -> None:
        self.status_log = logged(self.status_log, codec.status_body(self.record.status))

    @property
    def sort_key(self) -> str:
        return f"{self.status_ts}#{self.record.task_id}"


def _copy(record: TaskRecord, *, with_content: bool = True) -> TaskRecord:
    """A record the caller may change freely (wire models are never changed in place, only copied)."""
    return dataclasses.replace(
        record,
        history=list(record.history) if with_content else [],
        artifacts=list(record.artifacts) if with_content else [],
        plan=list(record.plan),
    )


class InMemoryTaskStore:
    """The `TaskStore` port in one process's memory; thread-safe."""

    def __init__(
        self,
        max_task_bytes: int = DEFAULT_MAX_TASK_BYTES,
        quotas: Quotas | None = None,
        retention_seconds: int = DEFAULT_RETENTION_SECONDS,
    ) -> None:
        self._max_task_bytes = max_task_bytes
        self._retention = retention_seconds  # README "Data retention": from a task's end to its expiry
        self._quotas = quotas or Quotas()
        self._subjects: dict[str, _Subject] = {}
        self._lock = threading.RLock()
        self._tasks: dict[str, _Task] = {}
        self._contexts: dict[tuple[Owner, str], _Context] = {}
        self._messages: dict[tuple[Owner, str], str] = {}  # (owner, messageId) -> task id
        self._push: dict[str, dict[str, dict[str, Any]]] = {}  # task -> config id -> push config item (codec)
        self._fan_out: dict[tuple[str, str], str] = {}  # (task, event) -> the id of the last config queued
        self._file_heads: dict[tuple[str, str], int] = {}  # (scope, path) -> latest version
        self._file_writes: dict[tuple[str, str], int] = {}  # (scope, write key) -> the version it got

    # ------------------------------------------------------------------ turns
    def create_turn(self, new: NewTurn, *, queue: bool = True) -> tuple[TaskRecord, bool]:
        with self._lock:
            known = self._messages.get((new.owner, new.dedupe_key))
            if known is not None and known != new.replaces_task:
                raise DuplicateMessage(known)
            ctx = self._contexts.setdefault((new.owner, new.context_id), _Context())
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
            subject = self._subjects.setdefault(new.owner.subject, _Subject())
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
            message = _stored(new.message.model_copy(update={"task_id": task_id, "context_id": new.context_id}))
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
            self._tasks[task_id] = _Task(record=record, status_ts=ts, content_bytes=stored_bytes(message))
            self._messages[(new.owner, new.dedupe_key)] = task_id
            if new.push_config is not None:
                stored = with_task(new.push_config, task_id)
                self._push.setdefault(task_id, {})[str(stored.config.id)] = codec.push_item(task_id, stored)
                subject.push_configs += 1
            return _copy(record), opening.takes_context

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
            ctx = self._contexts.get((owner, context_id)) or _Context()
            return {"turns": ctx.turns, "started": ctx.started, "activeTask": ctx.active_task}

    # ------------------------------------------------------------------ reads
    def _live(self, task_id: str) -> _Task | None:
        """The task, unless it is gone: never stored, removed, or expired (README "Data retention")."""
        task = self._tasks.get(task_id)
        expires = task.record.expires_at if task is not None else None
        return None if task is None or (expires is not None and expires <= time.time()) else task

    def get(self, task_id: str) -> TaskRecord | None:
        with self._lock:
            task = self._live(task_id)
            return salvage.readable(_copy(task.record), task.status_ts) if task else None

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

    def task_for_message(self, owner: Owner, retry_key: str) -> str | None:
        with self._lock:
            return self._messages.get((owner, retry_key))

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
                tasks=[salvage.readable(_copy(t.record, with_content=False), t.status_ts) for t in page],
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
                subject = self._subjects.setdefault(record.owner.subject, _Subject())
                subject.open_turns -= 1
                subject.push_configs -= len(self._push.get(task_id, {}))
                if ctx is not None:
                    ctx.open_turns -= 1
                record.expires_at = int(time.time()) + self._retention
            ts = status.timestamp or now_timestamp()
            record.status = _stored(status.model_copy(update={"timestamp": ts}))
            task.status_ts = ts
            record.history = [*record.history, *map(_stored, history)]
            record.interaction = _stored(interaction) if interaction is not None else None
            task.interaction_seq = (interaction_seq or 0) if interaction is not None else None
            if plan is not None:
                record.plan = [_stored(step) for step in plan]
            record.version += 1
            task.status_changed()
            if status.state.terminal and ctx is not None and ctx.active_task == task_id:
                ctx.active_task = None  # a terminal status frees the context for its next turn
            # As the DynamoDB store: the new status, interaction and plan; history and artifacts are for `get`.
            return _copy(record, with_content=False)

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
            artifact = _stored(artifact)
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
            task.record.history = [*task.record.history, *map(_stored, messages)]
            if status is not None:
                task.record.status = _stored(status)
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
            record.status = _stored(status.model_copy(update={"timestamp": ts}))
            task.status_ts = ts
            record.history = [*record.history, _stored(message)]
            record.interaction, task.interaction_seq = None, None
            record.version += 1
            task.status_changed()
            task.content_bytes = used
            entry.update(answer=codec.dumps(answer), finished=True, finishedAt=ts)
            self._messages[(owner, retry_key)] = task_id

    # ------------------------------------------------------------------ journal
    def journal(self, task_id: str) -> dict[int, JournalEntry]:
        with self._lock:
            task = self._tasks.get(task_id)
            return {seq: codec.journal_entry(item) for seq, item in task.journal.items()} if task else {}

    def journal_start(self, task_id: str, entry: JournalEntry) -> None:
        item = codec.journal_item(task_id, entry) | {"answer": None}
        with self._lock:
            task = self._task(task_id)
            if task.record.state == TaskState.CANCELED:
                raise TurnCanceled(task_id)  # cancel really stops: no effect starts after CANCELED
            if entry.seq in task.journal:
                raise VersionConflict(f"journal entry {entry.seq} exists")
            task.journal[entry.seq] = item

    def journal_finish(self, task_id: str, seq: int, result: Any) -> None:
        body = codec.dumps(result)
        with self._lock:
            task = self._tasks.get(task_id)
            if task is None or seq not in task.journal:
                raise NotInState(f"journal entry {seq} does not exist")
            task.journal[seq].update(finished=True, result=body, finishedAt=now_timestamp())

    # ------------------------------------------------------------------ operators (issue 16)
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
            record.status = _stored(status.model_copy(update={"timestamp": ts}))
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

    def put_wait_token(self, task_id: str, interaction_id: str, token: str) -> None:
        with self._lock:
            self._task(task_id).wait_tokens[interaction_id] = token

    def get_wait_token(self, task_id: str, interaction_id: str) -> str | None:
        with self._lock:
            task = self._tasks.get(task_id)
            return task.wait_tokens.get(interaction_id) if task else None

    def wait_tokens(self, task_id: str) -> list[str]:
        with self._lock:
            task = self._tasks.get(task_id)
            return list(task.wait_tokens.values()) if task else []

    # ------------------------------------------------------------------ file versions
    def file_version(self, scope: str, path: str, write_key: str) -> int:
        """The version a write at `path` gets: 1, 2, ... per path and scope; a retried write (same key) keeps
        its number."""
        with self._lock:
            if (scope, write_key) not in self._file_writes:
                version = self._file_heads.get((scope, path), 0) + 1
                self._file_heads[(scope, path)] = version
                self._file_writes[(scope, write_key)] = version
            return self._file_writes[(scope, write_key)]

    # ------------------------------------------------------------------ retention
    def remains(self, task_id: str) -> TaskRemains:
        with self._lock:
            task = self._tasks.get(task_id)
            if task is None:
                return TaskRemains(history=[], artifacts=[], journal={})
            return TaskRemains(history=list(task.record.history), artifacts=list(task.record.artifacts),
                               journal=self.journal(task_id))

    def remove_remains(self, task_id: str, file_writes: Sequence[tuple[str, str]]) -> int:
        with self._lock:
            task = self._tasks.get(task_id)
            if task is not None and self._live(task_id) is not None:
                return 0  # not expired: everything stays
            removed: list[object] = [self._tasks.pop(task_id, None), self._push.pop(task_id, None)]
            removed += [self._messages.pop(k) for k, v in list(self._messages.items()) if v == task_id]
            removed += [self._fan_out.pop(k) for k in list(self._fan_out) if k[0] == task_id]
            removed += [self._file_writes.pop(w, None) for w in file_writes]
            return sum(r is not None for r in removed)

    # ------------------------------------------------------------------ push configs
    def put_push_config(self, task_id: str, config: StoredPushConfig) -> None:
        """Add or replace (same id) a config; a new one counts against its task and, while the task is open, its
        subject (QuotaExceeded over either, nothing written)."""
        item = codec.push_item(task_id, config)
        with self._lock:
            configs = self._push.setdefault(task_id, {})
            task = self._tasks.get(task_id)
            if str(config.config.id) not in configs and task is not None:
                if len(configs) >= self._quotas.push_configs_per_task:
                    raise QuotaExceeded("pushConfigsPerTask", self._quotas.push_configs_per_task)
                if not task.record.state.terminal:
                    subject = self._subjects.setdefault(task.record.owner.subject, _Subject())
                    if subject.push_configs >= self._quotas.push_configs_per_subject:
                        raise QuotaExceeded("pushConfigsPerSubject", self._quotas.push_configs_per_subject)
                    subject.push_configs += 1
            configs[str(config.config.id)] = item

    def get_push_config(self, task_id: str, config_id: str) -> StoredPushConfig | None:
        with self._lock:
            found = self._push.get(task_id, {}).get(config_id)
            return codec.push_config(found) if found else None

    def list_push_configs(self, task_id: str) -> list[StoredPushConfig]:
        with self._lock:
            configs = [codec.push_config(item) for item in self._push.get(task_id, {}).values()]
        return sorted(configs, key=lambda c: (c.created_at, c.config.id or ""))

    def delete_push_config(self, task_id: str, config_id: str) -> None:
        with self._lock:
            removed = self._push.get(task_id, {}).pop(config_id, None)
            task = self._tasks.get(task_id)
            if removed is not None and task is not None and not task.record.state.terminal:
                self._subjects.setdefault(task.record.owner.subject, _Subject()).push_configs -= 1

    def expire_push_configs(self, task_id: str, expires_at: int, config_ids: Sequence[str] | None = None) -> None:
        """Marks the task's configs to expire (DynamoDB's TTL deletes them, and both stores' sweep)."""
        with self._lock:
            for config_id, item in self._push.get(task_id, {}).items():
                if config_ids is None or config_id in config_ids:
                    item["expiresAt"] = expires_at

    def push_configs_after(self, task_id: str, after: str | None, limit: int) -> list[StoredPushConfig]:
        with self._lock:
            ids = sorted(i for i in self._push.get(task_id, {}) if after is None or i > after)[:limit]
            return [codec.push_config(self._push[task_id][i]) for i in ids]

    def fan_out_cursor(self, task_id: str, event_id: str) -> str | None:
        with self._lock:
            return self._fan_out.get((task_id, event_id))

    def set_fan_out_cursor(self, task_id: str, event_id: str, after: str | None, expires_at: int) -> None:
        with self._lock:
            if after is None:
                self._fan_out.pop((task_id, event_id), None)
            else:
                self._fan_out[(task_id, event_id)] = after

    def sweep_push_configs(self) -> int:
        """Remove configs whose task is gone or whose expiry has passed; returns how many."""
        now = int(time.time())
        removed = 0
        with self._lock:
            for task_id, configs in self._push.items():
                for config_id in list(configs):
                    expires_at = configs[config_id].get("expiresAt")
                    if task_id not in self._tasks or (expires_at is not None and expires_at <= now):
                        del configs[config_id]
                        removed += 1
        return removed

    def _task(self, task_id: str) -> _Task:
        task = self._tasks.get(task_id)
        if task is None:
            raise NotInState(f"task {task_id} is gone")
        return task


Stored = TypeVar("Stored", Message, Artifact, TaskStatus, Interaction, PlanStep)


def _stored(model: Stored) -> Stored:
    """A wire model as a store hands it back: through its wire JSON (as the DynamoDB store keeps it)."""
    return type(model).model_validate_json(codec.dumps(model.wire()))


class InMemoryContextQueue:
    """The `ContextQueue` port as a list: in one process the ending turn starts the next one directly, so
    nothing drains it; it records what was queued (once per task, as SQS FIFO deduplicates)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.queued: list[tuple[str, str]] = []  # (task id, group)

    def enqueue(self, task_id: str, group: str) -> None:
        with self._lock:
            if all(queued != task_id for queued, _ in self.queued):
                self.queued.append((task_id, group))


class InMemoryOrchestrator:
    """The `TurnOrchestrator` port without Step Functions: `start` runs the turn at once in the calling
    thread, as the turn state machine would (run; when interrupted, park a callback token; `resume` runs it
    again). Turns started while one runs in the same thread (the next queued turn, a resumed wait) run after
    it, in order, never nested. `attach` the runner (`engine/runner.py`, `TurnRunner`) before the first start."""

    def __init__(self) -> None:
        self._runner: TurnHandler | None = None
        self._lock = threading.Lock()
        self._started: set[tuple[str, int]] = set()  # (task, attempt): the execution names used
        self._waiting: dict[str, str] = {}  # callback token -> task id
        self._local = threading.local()

    def attach(self, runner: TurnHandler) -> None:
        self._runner = runner

    def start(self, task_id: str, attempt: int = 0) -> None:
        with self._lock:
            if (task_id, attempt) in self._started:
                return  # execution names are unique: a second start is a no-op
            self._started.add((task_id, attempt))
        self._drive(task_id)

    def resume(self, token: str) -> None:
        with self._lock:
            task_id = self._waiting.pop(token, None)
        if task_id is not None:  # else the wait was already finished (Step Functions: InvalidToken, ignored)
            self._drive(task_id)

    def abandon(self, token: str, reason: str) -> None:
        with self._lock:
            self._waiting.pop(token, None)

    def stop(self, task_id: str, attempt: int = 0) -> None:
        """Nothing runs in the background; a canceled task's journal refuses further effects."""

    def _drive(self, task_id: str) -> None:
        pending: deque[str] | None = getattr(self._local, "pending", None)
        if pending is not None:
            pending.append(task_id)
            return
        self._local.pending = pending = deque([task_id])
        try:
            while pending:
                self._run(pending.popleft())
        finally:
            self._local.pending = None

    def _run(self, task_id: str) -> None:
        runner = self._runner
        if runner is None:
            raise RuntimeError("InMemoryOrchestrator.attach(runner) was not called")
        try:
            outcome = runner.handle({"action": "run", "taskId": task_id})
        except Exception:  # noqa: BLE001 - the state machine's Catch States.ALL → FailTurn
            # The run failed (the runner handles the agent's own errors; this is the store's).
            runner.handle({"action": "fail", "taskId": task_id})
            return
        if outcome["outcome"] in ("interrupted", "waiting"):  # waiting for a person, or for a delegate (issue 19)
            token = str(uuid.uuid4())
            with self._lock:
                self._waiting[token] = task_id
            runner.handle(
                {
                    "action": "park",
                    "taskId": task_id,
                    "interactionId": outcome["interactionId"],
                    "token": token,
                }
            )


if TYPE_CHECKING:  # `make typecheck` fails here when a port changes and these adapters do not follow
    _store: TaskStore = InMemoryTaskStore()
    _operators: OperatorStore = InMemoryTaskStore()
    _orchestrator: TurnOrchestrator = InMemoryOrchestrator()
    _queue: ContextQueue = InMemoryContextQueue()
