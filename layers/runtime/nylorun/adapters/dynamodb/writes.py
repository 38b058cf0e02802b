"""Writes to a task, each on its version: statuses, artifacts, appended history, interaction answers."""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from typing import Any

from nylorun.adapters.dynamodb import codec, layout
from nylorun.adapters.dynamodb.messages import record_once
from nylorun.adapters.dynamodb.reads import TaskReads
from nylorun.adapters.dynamodb.table import RETRY, Canceled
from nylorun.events import logged
from nylorun.limits import CALLER_HEADROOM, check_status, checked_bytes, grown
from nylorun.ports import DuplicateMessage, InteractionClosed, NotInState, Owner, TaskRecord, Uncertainty
from nylorun.profile.extensions import Interaction, PlanStep
from nylorun.protocol.models import Artifact, Message, TaskState, TaskStatus, now_timestamp

_STATE = {"#state": "state", "#status": "status"}


class TaskWrites(TaskReads):
    _max_task_bytes: int
    _retention: int

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
        for _ in RETRY.attempts(f"task {task_id} kept changing"):
            head = self.head(task_id)
            if head is None or TaskState(head["state"]) not in expect:
                raise NotInState(f"task {task_id} is not in {sorted(s.value for s in expect)}")
            marked = codec.uncertainty(head)
            if expect_uncertain is not None and (marked is None or marked.attempt != expect_uncertain):
                # The write is conditional on the version read with this head, so it holds at the write too.
                raise NotInState(f"task {task_id} is not waiting for an operator in attempt {expect_uncertain}")
            used = grown(int(head.get("contentBytes", 0)), added, self._max_task_bytes if enforce_budget else None)
            record = codec.task_record(head)
            ts = status.timestamp or now_timestamp()
            status = status.model_copy(update={"timestamp": ts})
            seq = int(head["msgSeq"])
            names = dict(_STATE)
            values: dict[str, Any] = {
                ":state": status.state.value,
                ":status": codec.status_body(status),
                ":ts": ts,
                ":k1": f"{ts}#{task_id}",
                ":v": record.version,
                ":one": 1,
                ":seq": seq + len(history),
                ":bytes": used,
                ":log": logged(head.get("statusLog"), codec.status_body(status)),
            }
            sets = [
                "#state = :state",
                "#status = :status",
                "statusTs = :ts",
                "GSI1SK = :k1",
                "GSI2SK = :k1",
                "version = version + :one",
                "msgSeq = :seq",
                "contentBytes = :bytes",
                "statusLog = :log",
            ]
            removes: list[str] = []
            if uncertain is not None:
                # docs/operate.md#lost-outcomes: waiting for an operator, listed (Uncertain index) until the
                # next status write.
                for name, value in codec.uncertain_attributes(task_id, ts, uncertain).items():
                    sets.append(f"{name} = :u_{name}")
                    values[f":u_{name}"] = value
            elif marked is not None:
                removes += layout.UNCERTAIN_ATTRIBUTES
            if interaction is not None:
                sets += ["interaction = :interaction", "interactionSeq = :iseq"]
                values[":interaction"] = codec.interaction_body(interaction)
                values[":iseq"] = interaction_seq or 0
            else:
                removes += ["interaction", "interactionSeq"]
            if plan is not None:
                sets.append("#plan = :plan")
                names["#plan"] = "plan"
                values[":plan"] = codec.plan_body(list(plan))
            ends = status.state.terminal and not TaskState(head["state"]).terminal
            condition = "version = :v"
            configs = int(head.get("pushConfigs", 0))
            if ends:
                # The subject's count releases exactly the configs the task has: a config added meanwhile
                # (which does not move the version) makes this write read again.
                condition += " AND (attribute_not_exists(pushConfigs) OR pushConfigs = :configs)"
                values[":configs"] = configs
                # docs/operate.md#data-retention: the task expires (TTL) the retention after it ends;
                # everything of it follows (service/retention.py). Set in the write that ends it, never on an
                # open task.
                sets.append("expiresAt = :expires")
                values[":expires"] = int(time.time()) + self._retention
            expression = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
            txn = self._t.transaction().update("task", layout.task(task_id), expression, condition, values, names)
            for i, m in enumerate(history):
                txn.put(f"message {i}", {**layout.message(task_id, seq + i + 1), "body": codec.message_body(m)})
            ctx_key = layout.context(record.owner, record.context_id)
            active = status.state.terminal and (self._t.get(ctx_key) or {}).get("activeTask") == task_id
            if ends or active:
                # A terminal status frees the context for its next turn, and the task that ends leaves the open
                # counts (domain/quotas.py), in the same transaction.
                clauses: list[str] = []
                ctx_values: dict[str, Any] = {}
                if ends:
                    clauses.append("ADD openTurns :minus")
                    ctx_values[":minus"] = -1
                if active:
                    clauses.append("REMOVE activeTask")
                    ctx_values[":task"] = task_id
                txn.update("context", ctx_key, " ".join(clauses), "activeTask = :task" if active else None, ctx_values)
            if ends:
                txn.update(
                    "subject",
                    layout.subject_quota(record.owner),
                    "ADD openTurns :minus, pushConfigs :released",
                    values={":minus": -1, ":released": -configs},
                )
            try:
                txn.write()
            except Canceled:
                continue  # the version moved: read again and re-check the expected states
            record.status = status
            record.version += 1
            if ends:
                record.expires_at = values[":expires"]
            record.interaction = interaction
            if plan is not None:
                record.plan = list(plan)
            return record
        raise AssertionError("unreachable")

    def put_artifact(self, task_id: str, artifact: Artifact) -> None:
        """The artifact keeps the place it was first given; a rewrite (same id) replaces its content and its
        share of the task's size. Conditional on the task's version, so the size it replaces is current."""
        checked_bytes([artifact])
        body = codec.artifact_body(artifact)
        key = layout.artifact(task_id, artifact.artifact_id)
        for _ in RETRY.attempts(f"task {task_id} kept changing"):
            head = self.head(task_id)
            if head is None:
                raise NotInState(f"task {task_id} is gone")
            old = self._t.get(key)
            used = int(head.get("contentBytes", 0)) - (len(old["body"]) if old else 0)
            order = int(head["artSeq"]) + 1
            txn = self._t.transaction().update(
                "task",
                layout.task(task_id),
                "SET artSeq = :order, contentBytes = :bytes, version = version + :one",
                "version = :v",
                {
                    ":order": order,
                    ":bytes": grown(used, len(body), self._max_task_bytes),
                    ":one": 1,
                    ":v": int(head["version"]),
                },
            )
            txn.put("artifact", {**key, "body": body, "order": int(old["order"]) if old else order})
            try:
                txn.write()
                return
            except Canceled:
                continue

    def append_history(
        self,
        task_id: str,
        messages: Sequence[Message],
        status: TaskStatus | None,
        *,
        sender: tuple[Owner, str] | None = None,
    ) -> None:
        """Append messages (and optionally replace the status message, same state) without a state change."""
        if status is not None:
            check_status(status, None)
        added = checked_bytes(messages)
        for _ in RETRY.attempts(f"task {task_id} kept changing"):
            head = self.head(task_id)
            if head is None:
                raise NotInState(f"task {task_id} is gone")
            seq = int(head["msgSeq"])
            used = grown(int(head.get("contentBytes", 0)), added, self._max_task_bytes, reserve=CALLER_HEADROOM)
            values: dict[str, Any] = {":seq": seq + len(messages), ":v": int(head["version"]), ":one": 1, ":b": used}
            expression = "SET msgSeq = :seq, version = version + :one, contentBytes = :b"
            names: dict[str, str] = {}
            if status is not None:
                expression += ", #status = :status"
                names["#status"] = "status"
                values[":status"] = codec.status_body(status)
                expression += ", statusLog = :log"
                values[":log"] = logged(head.get("statusLog"), values[":status"])
            txn = self._t.transaction().update("task", layout.task(task_id), expression, "version = :v", values,
                                               names or None)
            for i, m in enumerate(messages):
                # The caller's message (the first) names its dedupe record: it goes when the task does.
                sent = layout.sent(*sender)["PK"] if sender is not None and i == 0 else None
                txn.put(f"message {i}", {**layout.message(task_id, seq + i + 1), "body": codec.message_body(m),
                                         "sent": sent})
            if sender is not None:
                record_once(txn, "sent", *sender, task_id)
            try:
                txn.write()
                return
            except Canceled as canceled:
                if canceled.failed("sent"):
                    raise DuplicateMessage(str(canceled.old("sent").get("taskId") or task_id)) from None

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
        """Exactly one answer wins: the task must still hold this open interaction (same version), the
        journal entry must have no answer yet, and the reply (its retry key) must be new."""
        head = self.head(task_id)
        if head is None or not head.get("interaction"):
            raise InteractionClosed("no open interaction")
        open_interaction = Interaction.model_validate_json(head["interaction"])
        if open_interaction.interaction_id != interaction_id:
            raise InteractionClosed("not the open interaction")
        seq = int(head["msgSeq"]) + 1
        used = grown(int(head.get("contentBytes", 0)), checked_bytes([message]), self._max_task_bytes,
                     reserve=CALLER_HEADROOM)
        ts = status.timestamp or now_timestamp()
        status = status.model_copy(update={"timestamp": ts})
        txn = (
            self._t.transaction()
            .update(
                "task",
                layout.task(task_id),
                "SET #state = :state, #status = :status, statusTs = :ts, GSI1SK = :k, GSI2SK = :k, msgSeq = :seq, "
                "version = version + :one, contentBytes = :b, statusLog = :log REMOVE interaction, interactionSeq",
                "version = :v",
                {
                    ":state": status.state.value,
                    ":status": codec.status_body(status),
                    ":ts": ts,
                    ":k": f"{ts}#{task_id}",
                    ":seq": seq,
                    ":v": int(head["version"]),
                    ":one": 1,
                    ":b": used,
                    ":log": logged(head.get("statusLog"), codec.status_body(status)),
                },
                _STATE,
            )
            .put("message", {**layout.message(task_id, seq), "body": codec.message_body(message),
                             "sent": layout.sent(owner, retry_key)["PK"]})
            .update(
                "journal",
                layout.journal_op(task_id, int(head["interactionSeq"])),
                "SET answer = :answer, finished = :yes, finishedAt = :ts",
                "attribute_exists(PK) AND attribute_not_exists(answer)",
                {":answer": codec.dumps(answer), ":yes": True, ":ts": ts},
            )
        )
        record_once(txn, "sent", owner, retry_key, task_id)
        try:
            txn.write()
        except Canceled as canceled:
            if canceled.failed("sent"):
                raise DuplicateMessage(str(canceled.old("sent").get("taskId") or task_id)) from None
            raise InteractionClosed("the interaction was answered or changed meanwhile") from None
