"""Turns on a context: opening the next one (taking the context or queueing), handing a freed one on."""

from __future__ import annotations

from typing import Any

from nylorun.adapters.dynamodb import codec, layout
from nylorun.adapters.dynamodb.messages import record_once
from nylorun.adapters.dynamodb.push import sealed
from nylorun.adapters.dynamodb.reads import TaskReads
from nylorun.adapters.dynamodb.table import RETRY, Canceled
from nylorun.domain.contexts import next_in_line, open_turn, takes_context
from nylorun.domain.quotas import QuotaExceeded, Quotas
from nylorun.ports import DuplicateMessage, NewTurn, Owner, Sealer, StoredPushConfig, TaskRecord, with_task
from nylorun.protocol.models import TaskState, now_timestamp


def _subject_opens(quotas: Quotas, config: StoredPushConfig | None) -> tuple[str, str, dict[str, Any]]:
    """The subject quota item's update for a new turn (with its SendMessage config, if any): expression,
    condition, values. Its condition fails only over a quota."""
    expression = "ADD openTurns :one"
    condition = "(attribute_not_exists(openTurns) OR openTurns < :turns)"
    values: dict[str, Any] = {":one": 1, ":turns": quotas.turns_per_subject}
    if config is not None:
        expression += ", pushConfigs :one"
        condition += " AND (attribute_not_exists(pushConfigs) OR pushConfigs < :configs)"
        values[":configs"] = quotas.push_configs_per_subject
    return expression, condition, values

class Turns(TaskReads):
    _quotas: Quotas
    _sealer: Sealer | None

    def create_turn(self, new: NewTurn, *, queue: bool = True) -> tuple[TaskRecord, bool]:
        """Open the context's next turn. Returns the task and whether it holds the context now (start it)
        or is queued behind a busy context. With `queue=False` a busy context raises ContextBusy instead.

        The context item counts turns created (`turns`) and turns started (`started`) and names the turn
        holding it (`activeTask`): busy = a turn holds it, or created turns wait to start.
        """
        ctx_key = layout.context(new.owner, new.context_id)
        for _ in RETRY.attempts("context kept changing"):
            ctx = self._t.get(ctx_key) or {}
            previous = int(ctx.get("turns", 0))
            opening = open_turn(
                new.owner,
                new.context_id,
                turns=previous,
                started=int(ctx.get("started", 0)),
                active_task=str(ctx.get("activeTask") or "") or None,
                last_task=str(ctx.get("lastTask") or "") or None,
                queue=queue,
                timestamp=now_timestamp(),
            )
            quotas = self._quotas
            open_turns = int(ctx.get("openTurns", 0))
            if open_turns >= quotas.turns_per_context:
                raise QuotaExceeded("turnsPerContext", quotas.turns_per_context)
            turn, task_id, busy = opening.turn, opening.task_id, not opening.takes_context
            message = new.message.model_copy(update={"task_id": task_id, "context_id": new.context_id})
            record = TaskRecord(
                task_id=task_id,
                context_id=new.context_id,
                owner=new.owner,
                turn=turn,
                status=opening.status,
                history=[message],
                metadata=new.metadata,
                version=1,
            )
            values: dict[str, Any] = {":turn": turn, ":task": task_id, ":one": 1}
            if not ctx:
                condition = "attribute_not_exists(PK)"
            else:
                # Quotas: an ending turn decrements `openTurns` without touching `turns`, so it is counted with
                # ADD under its own condition, never set from what was read.
                condition = "turns = :prev AND (attribute_not_exists(openTurns) OR openTurns < :most)"
                values.update({":prev": previous, ":most": quotas.turns_per_context})
            expression = "SET turns = :turn, lastTask = :task"
            if not busy:
                # The context is free: this turn takes it at once.
                expression += ", started = :turn, activeTask = :task"
                if ctx:
                    condition += " AND attribute_not_exists(activeTask) AND started = :prev"
            expression += " ADD openTurns :one"
            txn = (
                self._t.transaction()
                .update("context", ctx_key, expression, condition, values)
                .update("subject", layout.subject_quota(new.owner), *_subject_opens(quotas, new.push_config))
                .put(
                    "task",
                    codec.task_item(record, msg_seq=1) | {"pushConfigs": int(new.push_config is not None)},
                    "attribute_not_exists(PK)",
                )
                .put("message", {**layout.message(task_id, 1), "body": codec.message_body(message),
                                 "sent": layout.sent(new.owner, new.dedupe_key)["PK"]})
            )
            record_once(txn, "sent", new.owner, new.dedupe_key, task_id, replaces_task=new.replaces_task)
            if new.push_config is not None:
                # Sealed as put_push_config seals it: SendMessage's config carries credentials too.
                config = sealed(self._sealer, task_id, with_task(new.push_config, task_id))
                txn.put("config", codec.push_item(task_id, config))
            spilled = codec.spilled_metadata(record)
            if spilled is not None:
                txn.put("metadata", {**layout.metadata(task_id), "body": spilled})
            try:
                txn.write()
            except Canceled as canceled:
                if canceled.failed("sent"):
                    raise DuplicateMessage(str(canceled.old("sent").get("taskId", ""))) from None
                if canceled.failed("subject"):
                    subject = self._t.get(layout.subject_quota(new.owner)) or {}
                    if int(subject.get("openTurns", 0)) >= quotas.turns_per_subject:
                        raise QuotaExceeded("turnsPerSubject", quotas.turns_per_subject) from None
                    raise QuotaExceeded("pushConfigsPerSubject", quotas.push_configs_per_subject) from None
                # Another turn opened (or the context was freed) meanwhile: read it again. Many callers
                # racing on one context each get the next number, in the order their writes land.
                continue
            record.metadata = codec.round_trip(record.metadata)
            return record, not busy
        raise AssertionError("unreachable")  # RETRY.attempts raises when its budget is spent

    def claim_next(self, owner: Owner, context_id: str) -> str | None:
        """If the context is free and a queued turn waits, let the next one (in turn order) take it.
        Queued turns canceled meanwhile are passed over. Returns the task that took the context."""
        ctx_key = layout.context(owner, context_id)
        for _ in RETRY.attempts(f"context {context_id} kept changing"):
            while True:
                ctx = self._t.get(ctx_key)
                if not ctx:
                    return None
                started = int(ctx.get("started", 0))
                task_id = next_in_line(
                    owner, context_id, turns=int(ctx.get("turns", 0)), started=started,
                    active_task=ctx.get("activeTask"),
                )
                if task_id is None:
                    return None
                head = self.head(task_id)
                takes = takes_context(TaskState(head["state"]) if head is not None else None)
                txn = self._t.transaction().update(
                    "context",
                    ctx_key,
                    "SET started = :turn" + (", activeTask = :task" if takes else ""),
                    "started = :prev AND attribute_not_exists(activeTask)",
                    {":turn": started + 1, ":prev": started, **({":task": task_id} if takes else {})},
                )
                if takes and head is not None:
                    # The claim bumps the task's version, so a cancel racing it re-reads and sees it active.
                    txn.update(
                        "task",
                        layout.task(task_id),
                        "SET version = version + :one",
                        "version = :v AND #state = :submitted",
                        {":one": 1, ":v": int(head["version"]), ":submitted": TaskState.SUBMITTED.value},
                        {"#state": "state"},
                    )
                try:
                    txn.write()
                except Canceled:
                    break  # raced: back off, read again
                if takes:
                    return task_id
                # a canceled queued turn was passed over: look at the next one at once
        raise AssertionError("unreachable")

    def context_state(self, owner: Owner, context_id: str) -> dict[str, Any]:
        """The context's counters: turns created, turns started, the task holding it (if any)."""
        ctx = self._t.get(layout.context(owner, context_id)) or {}
        return {
            "turns": int(ctx.get("turns", 0)),
            "started": int(ctx.get("started", 0)),
            "activeTask": ctx.get("activeTask"),
        }
