"""Tasks and their contexts: turns, statuses, history, artifacts, answers, and ListTasks."""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from typing import Any

from nylorun.adapters.dynamodb import codec, layout, salvage
from nylorun.adapters.dynamodb.messages import Messages, record_once
from nylorun.adapters.dynamodb.push import sealed
from nylorun.adapters.dynamodb.table import RETRY, Canceled, Table, aws
from nylorun.domain.contexts import next_in_line, open_turn, takes_context
from nylorun.domain.quotas import QuotaExceeded, Quotas
from nylorun.events import logged
from nylorun.limits import CALLER_HEADROOM, check_status, checked_bytes, grown
from nylorun.ports import (
    DuplicateMessage,
    InteractionClosed,
    NewTurn,
    NotInState,
    Owner,
    Sealer,
    StoredPushConfig,
    TaskPage,
    TaskQuery,
    TaskRecord,
    Uncertainty,
    with_task,
)
from nylorun.profile.extensions import Interaction, PlanStep
from nylorun.protocol.models import Artifact, Message, TaskState, TaskStatus, format_timestamp, now_timestamp

_STATE = {"#state": "state", "#status": "status"}


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


class Tasks(Messages):
    _t: Table
    _max_task_bytes: int
    _quotas: Quotas
    _sealer: Sealer | None
    _retention: int

    # ------------------------------------------------------------------ turns
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

    # ------------------------------------------------------------------ reads
    def get(self, task_id: str) -> TaskRecord | None:
        items = self._t.query_all(
            KeyConditionExpression="PK = :pk", values={":pk": layout.task_pk(task_id)}, ConsistentRead=True
        )
        task = next((i for i in items if i["SK"] == "TASK"), None)
        if task is None or codec.expired(task):
            return None  # README "Data retention": an expired task is gone, whether or not TTL has deleted it yet
        record = codec.task_record(task)
        meta = next((i for i in items if i["SK"] == "META"), None)
        if meta is not None:
            record.metadata = salvage.metadata(meta["body"], task_id)
        msgs = [i["body"] for i in items if i["SK"].startswith("MSG#")]
        record.history = salvage.messages(((f"history message {n}", body) for n, body in enumerate(msgs)), task_id)
        arts = sorted((i for i in items if i["SK"].startswith("ART#")), key=lambda i: int(i["order"]))
        record.artifacts = salvage.artifacts(((f"artifact {n}", i["body"]) for n, i in enumerate(arts)), task_id)
        return record

    def head(self, task_id: str) -> dict[str, Any] | None:
        """The task item alone (owner, context, state): what an artifact event needs to say whose it is."""
        item = self._t.get(layout.task(task_id))
        return codec.head(item) if item is not None and not codec.expired(item) else None

    def interaction_seq(self, task_id: str) -> int | None:
        head = self.head(task_id)
        return int(head["interactionSeq"]) if head and "interactionSeq" in head else None

    def _with_metadata(self, item: dict[str, Any]) -> TaskRecord:
        """The task item's record with its metadata, read from the META item when it lives there."""
        record = codec.task_record(item)
        if item.get("metadataItem"):
            meta = self._t.get(layout.metadata(record.task_id))
            record.metadata = salvage.metadata(meta["body"], record.task_id) if meta else None
        return record

    # ------------------------------------------------------------------ ListTasks
    def list_tasks(self, owner: Owner, query: TaskQuery) -> TaskPage:
        index, pk_name, sk_name, pk = (
            (layout.BY_CONTEXT, "GSI2PK", "GSI2SK", f"{layout.owner_key(owner)}#{query.context_id}")
            if query.context_id is not None
            else (layout.BY_SUBJECT, "GSI1PK", "GSI1SK", layout.owner_key(owner))
        )
        key_condition = f"{pk_name} = :pk"
        values: dict[str, Any] = {":pk": pk}
        if query.status_after is not None:
            # docs/protocol.md §7.2 (ListTasks): keep tasks whose status.timestamp >= statusTimestampAfter. The sort key
            # starts with the fixed-width timestamp, so this is a key condition, not a filter.
            key_condition += f" AND {sk_name} >= :after"
            values[":after"] = format_timestamp(query.status_after)
        base: dict[str, Any] = {
            "IndexName": index,
            "KeyConditionExpression": key_condition,
            "ScanIndexForward": False,  # docs/protocol.md §7.3: most recently updated first
        }
        # README "Data retention": an expired task is gone from the list too, before TTL deletes it.
        filters = ["(attribute_not_exists(expiresAt) OR expiresAt > :now)"]
        values[":now"] = int(time.time())
        if query.state is not None:
            filters.append("#state = :state")
            base["ExpressionAttributeNames"] = {"#state": "state"}
            values[":state"] = query.state.value
        base["FilterExpression"] = " AND ".join(filters)
        base["ExpressionAttributeValues"] = codec.to_item(values)
        # The token is bound to the whole query, statusTimestampAfter's value included.
        bound_to = codec.fingerprint([index, pk, key_condition, query.state, values.get(":after")])
        start: dict[str, Any] | None = None
        if query.page_token:
            key = codec.decode_token(query.page_token, bound_to)
            # A rewritten key (partial, another partition, before :after) is a DynamoDB ValidationException:
            # refuse it as a bad token instead.
            after = values.get(":after")
            if (
                not isinstance(key, dict)
                or set(key) != {"PK", "SK", pk_name, sk_name}
                or not all(isinstance(v, str) for v in key.values())
                or key[pk_name] != pk
                or (after and key[sk_name] < after)
            ):
                raise codec.invalid_token()
            start = codec.to_item(key)

        total = 0
        found: list[dict[str, Any]] = []
        wanted = query.page_size + 1  # one more tells whether a next page exists
        with aws("query"):
            for page in self._t.db.get_paginator("query").paginate(TableName=self._t.name, Select="COUNT", **base):
                total += int(page["Count"])
            kwargs = dict(base)
            if start:
                kwargs["ExclusiveStartKey"] = start
            while len(found) < wanted:
                out = self._t.db.query(TableName=self._t.name, Limit=max(wanted * 2, 20), **kwargs)
                found.extend(codec.from_item(i) for i in out.get("Items", []))
                if "LastEvaluatedKey" not in out:
                    break
                kwargs["ExclusiveStartKey"] = out["LastEvaluatedKey"]
        page_items = found[: query.page_size]
        tokens = [codec.encode_token({k: i[k] for k in ("PK", "SK", pk_name, sk_name)}, bound_to) for i in page_items]
        return TaskPage(
            tasks=[self._with_metadata(i) for i in page_items],
            next_page_token=tokens[-1] if len(found) > query.page_size else "",
            total_size=total,
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
                # Issue 16: waiting for an operator, listed (Uncertain index) until the next status write.
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
                # README "Data retention": the task expires (TTL) the retention after it ends; everything of it
                # follows (service/retention.py). Set in the write that ends it, never on an open task.
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

