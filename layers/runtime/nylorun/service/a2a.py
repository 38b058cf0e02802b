"""The A2A service: one method per A2A operation, scoped to the caller (Profile v2: the subject the caller
authenticated as, and the Agent it called). It speaks to ports only; the JSON-RPC layer parses and maps.
"""

from __future__ import annotations

import dataclasses
import hmac
import json
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nylorun.domain.ids import RUNTIME_KEY
from nylorun.domain.messages import agent_text, current_trace_id, totals, with_telemetry
from nylorun.domain.urls import PushUrlRejected, check_push_url
from nylorun.engine.agent import AgentRegistry
from nylorun.engine.files import FileService
from nylorun.engine.runner import NOT_TERMINAL
from nylorun.limits import ANSWER_BUDGET, MAX_STORED_JSON_BYTES, answer_bytes, fit_task
from nylorun.observability import logger, metrics
from nylorun.ports import (
    ContextBusy,
    DuplicateMessage,
    InteractionClosed,
    InvalidPageToken,
    NewTurn,
    Owner,
    QuotaExceeded,
    StateConflict,
    StoredPushConfig,
    TaskQuery,
    TaskRecord,
    TaskStore,
    TooLarge,
    TurnOrchestrator,
    with_task,
)
from nylorun.profile.components import view_parts
from nylorun.profile.extensions import INTERACTIONS, visible, with_extension
from nylorun.profile.status import ANSWERED_TEXT, text_does_not_approve, with_plan
from nylorun.protocol.errors import (
    A2AError,
    InvalidParamsError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
    context_busy,
    quota_exceeded,
)
from nylorun.protocol.models import (
    AuthenticationInfo,
    CancelTaskRequest,
    CreatePushConfigRequest,
    GetTaskRequest,
    ListPushConfigsRequest,
    ListPushConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Role,
    SendMessageRequest,
    Task,
    TaskIdRequest,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    now_timestamp,
)
from nylorun.protocol.text import repaired
from nylorun.service.answers import answer_value, answers_open, read_reply_answer, refuse_closed
from nylorun.service.scheduler import TurnScheduler
from nylorun.settings import Settings

if TYPE_CHECKING:  # made by wiring when first used: standardwebhooks and the A2A client stay out of cold start
    from nylorun.service.delegation import DelegationCallbacks

JsonObject = dict[str, Any]
# A stored message (and a task's metadata) is one DynamoDB item, at most 400 KB (MAX_STORED_JSON_BYTES); a
# request body may be up to `max_request_bytes` (4 MiB). Larger content travels as `url` parts (files/v1).


@dataclass(frozen=True)
class Caller:
    """Who is calling which Agent, with which profile extensions activated."""

    subject: str
    agent: str
    extensions: tuple[str, ...] = ()

    @property
    def owner(self) -> Owner:
        return Owner(subject=self.subject, agent=self.agent)


class A2AService:
    def __init__(
        self,
        store: TaskStore,
        orchestrator: TurnOrchestrator,
        registry: AgentRegistry,
        settings: Settings,
        scheduler: TurnScheduler,
        sleep: Callable[[float], None] = time.sleep,
        files: FileService | None = None,
        delegations: DelegationCallbacks | None = None,
    ) -> None:
        self._delegations = delegations  # issue 19: a canceled task's delegates are canceled too
        self._files = files
        self._store = store
        self._orchestrator = orchestrator
        self._scheduler = scheduler
        self._registry = registry
        self._settings = settings
        self._sleep = sleep

    # ================================================================== SendMessage
    def send_message(self, caller: Caller, request: SendMessageRequest) -> JsonObject:
        message = request.message
        if message.role != Role.USER:
            raise InvalidParamsError(
                "message.role must be ROLE_USER", field_violations=[("message.role", "Must be ROLE_USER.")]
            )
        for field, value in (("message", message.wire()), ("metadata", request.metadata)):
            if value is not None and len(json.dumps(value)) > MAX_STORED_JSON_BYTES:
                raise InvalidParamsError(
                    f"{field} is too large: at most {MAX_STORED_JSON_BYTES} bytes of JSON; send large content "
                    "as a url part",
                    field_violations=[(field, f"At most {MAX_STORED_JSON_BYTES} bytes of JSON.")],
                )
        config = request.configuration
        push = config.task_push_notification_config if config else None
        if push is not None:
            self._check_push_config(push)  # before anything is written: bad input changes nothing

        owner = caller.owner
        retry_key = message.retry_key()
        replaces: str | None = None
        answered_by = self._store.task_for_message(owner, retry_key)
        if answered_by is not None:
            record = self._owned(owner, answered_by)
            if not _acted_on(record, message.message_id):
                # A retry (same messageId, same content) is not a second turn: answer with the task it made.
                self._scheduler.resubmitted(record)  # the first send may have died before starting or queueing it
                return self._respond(caller, record, request)
            # The caller has acted on that task since (a follow-up, a cancel): it had the first answer, so the
            # same message again is a new message (the A2A TCK sends identical messages to make new tasks).
            replaces = record.task_id

        if message.task_id is not None:
            record = self._owned(owner, message.task_id)
            if message.context_id is not None and message.context_id != record.context_id:
                raise InvalidParamsError(
                    "message.contextId does not match the task's context",
                    field_violations=[("message.contextId", "Does not match the task's contextId.")],
                )
            answer = read_reply_answer(message)
            if answer is not None and not answers_open(record, answer):
                # interactions/v1: a late or duplicate answer is refused (-32602), ended task or not; never a turn.
                record = refuse_closed(self._store, record, answer.interaction_id, retry_key)
                return self._respond(caller, record, request)
            if record.state.terminal:
                # docs/protocol.md §2.5: terminal tasks are immutable; a refinement is a new task in the same context.
                raise UnsupportedOperationError(
                    f"Task {record.task_id} is in terminal state: {record.state.value}"
                )
            if record.state.interrupted:
                value = answer_value(record, message, answer)  # checked before any file is stored
                with self._inbound_files(caller, record.context_id, message) as reply:
                    reply = reply.model_copy(update={"context_id": record.context_id})
                    record = self._answer(record, reply, retry_key, value)
                return self._respond(caller, record, request)
            # A message to a task that is not waiting for input is a new turn in its context (queued).
            return self._new_turn(caller, request, record.context_id, retry_key, replaces)

        agent = self._registry.get(caller.agent)
        if agent is not None and agent.direct is not None:
            direct = agent.direct(message)
            if direct is not None:
                # Well-formed text, as a turn records it (profile/status.py), and only the caller's extensions.
                return {"message": visible(repaired(direct), caller.extensions).wire()}

        return self._new_turn(caller, request, message.context_id or str(uuid.uuid4()), retry_key, replaces)

    def _new_turn(
        self,
        caller: Caller,
        request: SendMessageRequest,
        context_id: str,
        retry_key: str,
        replaces: str | None = None,
    ) -> JsonObject:
        """The context's next turn: it starts now, or waits its turn behind a busy context (queued), and
        either way the caller gets the task that will take the message."""
        message = request.message.model_copy(update={"task_id": None, "context_id": context_id})
        # Profile v2: `delivery: "reject"` in the message's metadata refuses a busy context instead.
        reject = (message.metadata or {}).get("delivery") == "reject"
        push = request.configuration.task_push_notification_config if request.configuration else None
        with self._inbound_files(caller, context_id, message) as message:
            try:
                record, took_context = self._store.create_turn(
                    NewTurn(
                        owner=caller.owner,
                        context_id=context_id,
                        message=message,
                        metadata=request.metadata,
                        retry_key=retry_key,
                        replaces_task=replaces,
                        # Written with the task, so a quota refuses both or neither.
                        push_config=self._stored_push_config(push, caller) if push is not None else None,
                    ),
                    queue=not reject,
                )
            except ContextBusy as busy:
                raise context_busy(context_id, busy.active_task_id) from None
            except QuotaExceeded as over:
                raise _over_quota(over) from None
            except DuplicateMessage as duplicate:  # raced with the same messageId: the winner's files are kept
                self._refused_files(message)
                record = self._owned(caller.owner, duplicate.task_id)
                self._scheduler.resubmitted(record)
                return self._respond(caller, record, request)
        self._scheduler.submitted(record, took_context)
        logger.info("turn submitted", extra={"task_id": record.task_id, "queued": not took_context})
        return self._respond(caller, record, request)

    def _respond(self, caller: Caller, record: TaskRecord, request: SendMessageRequest) -> JsonObject:
        config = request.configuration
        if config is None or not config.return_immediately:
            record = self._wait(record)
        history_length = config.history_length if config else None
        return {"task": self._render(caller, record, history_length).wire()}

    def _wait(self, record: TaskRecord) -> TaskRecord:
        """Blocking SendMessage: until terminal or interrupted, or `a2aWaitMs` (then WORKING as it is)."""
        deadline = time.monotonic() + self._settings.a2a_wait_ms / 1000
        delay = 0.02
        if not (record.state.terminal or record.state.interrupted):
            record = self._store.get(record.task_id) or record  # a fast turn may already be done
        while not (record.state.terminal or record.state.interrupted):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            self._sleep(min(delay, remaining))
            delay = min(delay * 1.5, 0.5)
            record = self._store.get(record.task_id) or record
        return record

    def _answer(self, record: TaskRecord, message: Message, retry_key: str, value: JsonObject | None) -> TaskRecord:
        """A reply to an interrupted task: the caller's answer (`answer_value`) to the open interaction."""
        interaction = record.interaction
        assert interaction is not None  # answer_value refused a task without one
        if value is None:
            return self._text_does_not_approve(record, message, retry_key)
        stored = message.model_copy(update={"task_id": record.task_id})
        try:
            self._store.answer_interaction(
                record.task_id,
                interaction.interaction_id,
                value,
                stored,
                TaskStatus(state=TaskState.WORKING, message=self._resuming(record)),
                record.owner,
                retry_key,
            )
        except DuplicateMessage:
            return self._store.get(record.task_id) or record
        except TooLarge as large:
            raise _over_budget(large) from None
        except InteractionClosed:  # another answer won the race (or this one's first send did)
            return refuse_closed(self._store, record, interaction.interaction_id, retry_key)
        metrics.add_metric(name="InteractionAnswered", unit="Count", value=1)
        token = self._store.get_wait_token(record.task_id, interaction.interaction_id)
        if token is not None:
            self._orchestrator.resume(token)
        # else: the turn has not parked its token yet; parking sees the answer and resumes itself.
        return self._store.get(record.task_id) or record

    @staticmethod
    def _resuming(record: TaskRecord, text: str = ANSWERED_TEXT) -> Message:
        """A status message the service writes on a task (by default: right after an answer, the turn
        resumes), with the plan still in view (progress/v1)."""
        return with_plan(agent_text(record, text), record.plan)

    def _text_does_not_approve(self, record: TaskRecord, message: Message, retry_key: str) -> TaskRecord:
        """Profile v2: text never approves. The approval stays open and the status message says why, with
        the plan still in view (progress/v1)."""
        interaction = record.interaction
        assert interaction is not None
        reminder = self._resuming(record, text_does_not_approve(interaction))
        # The components the approval showed (the order it is about) stay in view beside the reminder.
        shown = view_parts(record.status.message.parts) if record.status.message else []
        reminder = reminder.model_copy(update={"parts": [*reminder.parts, *shown]})
        metadata, extensions = with_extension(reminder.metadata, reminder.extensions, INTERACTIONS, interaction)
        reminder = reminder.model_copy(update={"metadata": metadata, "extensions": extensions})
        try:
            self._store.append_history(
                record.task_id,
                [message.model_copy(update={"task_id": record.task_id}), reminder],
                TaskStatus(state=record.state, message=reminder, timestamp=record.status.timestamp),
                sender=(record.owner, retry_key),  # a retried text reply is recorded once
            )
        except DuplicateMessage:
            pass
        except TooLarge as large:
            raise _over_budget(large) from None
        return self._store.get(record.task_id) or record

    # ================================================================== GetTask / ListTasks
    def get_task(self, caller: Caller, request: GetTaskRequest) -> JsonObject:
        record = self._owned(caller.owner, request.id)
        return self._render(caller, record, request.history_length).wire()

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
            task = self._render(caller, record, history_length)
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
        self._orchestrator.stop(record.task_id, record.attempt)  # the execution of its current attempt (issue 16)
        for token in self._store.wait_tokens(record.task_id):
            self._orchestrator.abandon(token, "Canceled at the caller's request")
        if self._delegations is not None:
            self._delegations.cancel_delegates(record.task_id)  # real CancelTask of the work it handed on
        logger.info("task canceled", extra={"task_id": record.task_id})
        self._scheduler.ended(record.owner, record.context_id)  # the queue moves on
        return self._render(caller, self._owned(caller.owner, record.task_id), None).wire()

    # ================================================================== push notification configs
    def create_push_config(self, caller: Caller, request: CreatePushConfigRequest) -> JsonObject:
        self._require_push()
        record = self._owned(caller.owner, request.task_id)
        config = TaskPushNotificationConfig.model_validate(request.model_dump())
        self._check_push_config(config)
        # Decision: a config on a task that has ended is accepted (A2A allows it; the TCK's push tests do it).
        # It sends nothing (an ended task changes no more) and, like every config (ADR 0051: a config lives as long
        # as its task), expires with its task (README "Data retention").
        saved = self._save_push_config(request.task_id, config, caller, record.expires_at)
        return _redacted(saved).wire()

    def get_push_config(self, caller: Caller, request: TaskIdRequest) -> JsonObject:
        self._require_push()
        self._owned(caller.owner, request.task_id)
        stored = self._store.get_push_config(request.task_id, request.id)
        if stored is None:
            raise TaskNotFoundError(f"Push notification config {request.id} not found")
        return _redacted(stored.config).wire()

    def list_push_configs(self, caller: Caller, request: ListPushConfigsRequest) -> JsonObject:
        self._require_push()
        self._owned(caller.owner, request.task_id)
        configs = [_redacted(c.config) for c in self._store.list_push_configs(request.task_id)]
        start = _offset(request.task_id, request.page_token)
        size = request.page_size or 50
        page = configs[start : start + size]
        token = _offset_token(request.task_id, start + size) if start + size < len(configs) else None
        return ListPushConfigsResponse(configs=page, next_page_token=token).wire()

    def delete_push_config(self, caller: Caller, request: TaskIdRequest) -> JsonObject:
        self._require_push()
        self._owned(caller.owner, request.task_id)
        self._store.delete_push_config(request.task_id, request.id)  # idempotent: absent is fine
        return {}

    def _require_push(self) -> None:
        if not self._settings.push_enabled:
            # Profile v2: push configs only when the Runtime has a push secret.
            raise PushNotificationNotSupportedError("This Runtime has no push secret: push notifications are off")

    def _check_push_config(self, config: TaskPushNotificationConfig) -> None:
        self._require_push()
        try:
            check_push_url(
                config.url,
                allowed_hosts=self._settings.push_allowed_hosts,
                http_hosts=self._settings.push_http_hosts,
            )
        except PushUrlRejected as exc:
            raise InvalidParamsError(str(exc), field_violations=[("url", str(exc))]) from None

    @staticmethod
    def _stored_push_config(
        config: TaskPushNotificationConfig, caller: Caller, expires_at: int | None = None
    ) -> StoredPushConfig:
        saved = config.model_copy(update={"id": config.id or str(uuid.uuid4()), "tenant": None})
        # The caller's subject: its deliveries are signed with that subject's key (issue 15).
        return StoredPushConfig(
            config=saved,
            created_at=now_timestamp(),
            extensions=caller.extensions,
            expires_at=expires_at,
            subject=caller.subject,
        )

    def _save_push_config(
        self,
        task_id: str,
        config: TaskPushNotificationConfig,
        caller: Caller,
        expires_at: int | None = None,
    ) -> TaskPushNotificationConfig:
        stored = with_task(self._stored_push_config(config, caller, expires_at), task_id)
        try:
            self._store.put_push_config(task_id, stored)
        except QuotaExceeded as over:
            raise _over_quota(over) from None
        return stored.config

    @contextmanager
    def _inbound_files(self, caller: Caller, context_id: str, message: Message) -> Iterator[Message]:
        """Files in a caller's message: checked (size, media type, url host) and `raw` ones kept in the
        bucket, so history holds a reference rather than the bytes. The body of the `with` writes the request;
        when it refuses it (a busy context, say: known only by that write), the stored files are marked refused."""
        has_files = any(p.raw is not None or p.url is not None for p in message.parts)
        if not has_files:
            yield message
            return
        agent = self._registry.get(caller.agent)
        modes = agent.input_modes if agent else ["text/plain"]
        if self._files is None:
            raise UnsupportedOperationError("This Runtime takes no files (it has no file store)")
        stored = self._files.accept_inbound(caller.owner, context_id, message, modes)
        try:
            yield stored
        except A2AError:  # a refusal; an AWS error may come after the write took the files, so those stay
            self._refused_files(stored)
            raise

    def _refused_files(self, message: Message) -> None:
        # Issue 15: a refused request keeps nothing: the bucket's lifecycle expires files marked refused.
        if self._files is not None:
            self._files.refuse_inbound(message)

    # ================================================================== shared
    def _owned(self, owner: Owner, task_id: str) -> TaskRecord:
        record = self._store.get(task_id)
        if record is None or record.owner != owner:
            # Another subject's task is "not found", never "forbidden" (nothing leaks).
            raise TaskNotFoundError(f"Task {task_id[:128]} not found")
        return record

    def _render(self, caller: Caller, record: TaskRecord, history_length: int | None) -> Task:
        history = record.history
        if history_length is not None:
            history = history[-history_length:] if history_length > 0 else []
        artifacts = record.artifacts
        if self._files is not None:
            # Stored files are handed out as fresh presigned URLs on every read (an old one may have expired).
            files = self._files
            artifacts = [a.model_copy(update={"parts": files.render_parts(a.parts)}) for a in artifacts]
            history = [m.model_copy(update={"parts": files.render_parts(m.parts)}) for m in history]
        task = Task(
            id=record.task_id,
            context_id=record.context_id,
            status=record.status,
            artifacts=artifacts or None,
            history=history or None,
            metadata=record.metadata,
        )
        # Lambda: 6 MB response payload; we keep answers under 5 MiB (nylorun.limits.fit_task).
        return fit_task(visible(task, caller.extensions))


def _acted_on(record: TaskRecord, message_id: str) -> bool:
    """Whether the caller has acted on a task since its message `message_id` reached it: sent the task another
    message after it, or canceled the task. Either needs the answer to that message, so a message sent again
    after that is not a retry."""
    if record.state == TaskState.CANCELED:
        return True
    users = [m.message_id for m in record.history if m.role == Role.USER]
    last = max((i for i, m in enumerate(users) if m == message_id), default=len(users) - 1)
    return last < len(users) - 1


def _over_budget(large: TooLarge) -> InvalidParamsError:
    """A caller's message the task has no room for: refused, nothing written (README "Limits")."""
    return InvalidParamsError(
        f"message would pass the task's size budget: {large}. Start a new task in this context, or send large "
        "content as a url part",
        field_violations=[("message", f"Over the task's size budget: {large}.")],
    )


# What each quota counts, as its error says it (README "Security").
_QUOTA_UNITS = {
    "turnsPerContext": "open turns (running, waiting for a person, or queued) in one context; wait for one to end "
    "or cancel one",
    "turnsPerSubject": "open turns (running, waiting for a person, or queued) for one caller; wait for one to end "
    "or cancel one",
    "pushConfigsPerTask": "push notification configs on one task; delete one first",
    "pushConfigsPerSubject": "push notification configs on one caller's open tasks; delete one first",
}


def _over_quota(over: QuotaExceeded) -> UnsupportedOperationError:
    return quota_exceeded(over.quota, over.limit, _QUOTA_UNITS[over.quota])


def _redacted(config: TaskPushNotificationConfig) -> TaskPushNotificationConfig:
    """Push credentials are write-only: Get and List never return them."""
    auth = config.authentication
    return config.model_copy(
        update={"authentication": AuthenticationInfo(scheme=auth.scheme) if auth else None, "token": None}
    )


def _offset(task_id: str, token: str | None) -> int:
    """Where a push-config page starts; -32602 unless this Runtime issued the token for this task (issue 15)."""
    if not token:
        return 0
    offset, _, mac = token.partition(".")
    if offset.isascii() and offset.isdigit() and hmac.compare_digest(mac, _offset_mac(task_id, offset)):
        return int(offset)
    raise InvalidParamsError("pageToken is not valid", field_violations=[("pageToken", "Not valid.")])


def _offset_token(task_id: str, offset: int) -> str:
    return f"{offset}.{_offset_mac(task_id, str(offset))}"


def _offset_mac(task_id: str, offset: str) -> str:
    return RUNTIME_KEY.digest("config-page", f"{task_id}\n{offset}")[:32]
