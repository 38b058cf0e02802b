"""SendMessage: a retry, a reply to a task (an answer, or a new turn in its context), or a new task."""

from __future__ import annotations

import json
import time
import uuid

from nylorun.engine.task_signal import TASK_SIGNAL
from nylorun.limits import MAX_STORED_JSON_BYTES
from nylorun.observability import logger
from nylorun.ports import ContextBusy, DuplicateMessage, NewTurn, QuotaExceeded, TaskRecord
from nylorun.profile.extensions import visible
from nylorun.protocol.errors import InvalidParamsError, UnsupportedOperationError, context_busy
from nylorun.protocol.models import JsonObject, Role, SendMessageRequest, TaskState
from nylorun.protocol.text import repaired
from nylorun.service.a2a.caller import Caller
from nylorun.service.a2a.files import InboundFiles
from nylorun.service.a2a.push_configs import PushConfigs
from nylorun.service.a2a.refusals import over_quota
from nylorun.service.a2a.replies import Replies
from nylorun.service.a2a.wait_schedule import next_gap
from nylorun.service.answers import answer_value, answers_open, read_reply_answer, refuse_closed

# A stored message (and a task's metadata) is one DynamoDB item, at most 400 KB (MAX_STORED_JSON_BYTES); a
# request body may be up to `max_request_bytes` (1 MiB). Larger content travels as `url` parts (files/v1).


class Messages(InboundFiles, Replies, PushConfigs):
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
                self._check_connection_answer(record, value)
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
                raise over_quota(over) from None
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
        return {"task": self._render(caller, record, history_length)}

    def _wait(self, record: TaskRecord) -> TaskRecord:
        """Blocking SendMessage: until terminal or interrupted, or `a2aWaitMs` (then WORKING as it is)."""
        if _settled(record.state):
            return record
        task_id = record.task_id
        started = time.monotonic()
        deadline = started + self._settings.a2a_wait_ms / 1000
        # Watched before the first read, so a turn that ends between a read and the wait is not missed.
        with TASK_SIGNAL.watching(task_id) as written:
            latest = self._store.get(task_id) or record  # a fast turn may already be done
            if _settled(latest.state):
                return latest
            while (now := time.monotonic()) < deadline:
                written.wait(min(next_gap(now - started), deadline - now))
                written.clear()
                # The task item alone (one small read), not its history: the whole task is read once, below.
                head = self._store.head(task_id)
                if head is None or _settled(TaskState(head["state"])):
                    break
        return self._store.get(task_id) or latest


def _settled(state: TaskState) -> bool:
    """Where a blocking SendMessage stops waiting (A2A: a terminal or interrupted state)."""
    return state.terminal or state.interrupted


def _acted_on(record: TaskRecord, message_id: str) -> bool:
    """Whether the caller has acted on a task since its message `message_id` reached it: sent the task another
    message after it, or canceled the task. Either needs the answer to that message, so a message sent again
    after that is not a retry."""
    if record.state == TaskState.CANCELED:
        return True
    users = [m.message_id for m in record.history if m.role == Role.USER]
    last = max((i for i, m in enumerate(users) if m == message_id), default=len(users) - 1)
    return last < len(users) - 1
