"""A reply to an interrupted task: the answer to its open interaction, or why its text does not answer."""

from __future__ import annotations

from nylorun.domain.messages import agent_text
from nylorun.observability import metrics
from nylorun.ports import DuplicateMessage, InteractionClosed, TaskRecord, TooLarge
from nylorun.profile.components import view_parts
from nylorun.profile.extensions import INTERACTIONS, with_extension
from nylorun.profile.status import ANSWERED_TEXT, text_does_not_approve, with_plan
from nylorun.protocol.errors import InvalidParamsError
from nylorun.protocol.models import JsonObject, Message, TaskState, TaskStatus
from nylorun.service.a2a.base import ServiceBase
from nylorun.service.a2a.refusals import over_budget
from nylorun.service.answers import refuse_closed


class Replies(ServiceBase):
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
            raise over_budget(large) from None
        except InteractionClosed:  # another answer won the race (or this one's first send did)
            return refuse_closed(self._store, record, interaction.interaction_id, retry_key)
        metrics.add_metric(name="InteractionAnswered", unit="Count", value=1)
        token = self._store.get_wait_token(record.task_id, interaction.interaction_id)
        if token is not None:
            self._orchestrator.resume(token)
        # else: the turn has not parked its token yet; parking sees the answer and resumes itself.
        return self._store.get(record.task_id) or record

    def _check_connection_answer(self, record: TaskRecord, value: JsonObject | None) -> None:
        """docs/writing/connections.md: a typed `approved: true` connects nothing; it counts only when the
        subject has the connection already (connected in another task meanwhile). `approved: false`
        declines."""
        if value == {"approved": True} and record.interaction is not None and record.interaction.kind == "connection":
            if self._connections is None:
                raise InvalidParamsError("This Runtime declares no connection providers: answer `approved: false`")
            self._connections.refuse_unconnected(record)

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
            raise over_budget(large) from None
        return self._store.get(record.task_id) or record
