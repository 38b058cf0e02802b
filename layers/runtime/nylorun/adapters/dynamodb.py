"""The task store on one DynamoDB table (keys and indexes declared in template.yaml, `TasksTable`).

Items (PK / SK):
    TASK#<task>      TASK            the task: state, status JSON, open interaction, plan, counters, GSI keys,
                                     metadata when small, `contentBytes` (history + artifacts, the size budget)
    TASK#<task>      META            the task's metadata when larger than INLINE_METADATA_BYTES (written once)
    TASK#<task>      MSG#<seq:08>    one history message (wire JSON)
    TASK#<task>      ART#<artifact>  one artifact (wire JSON) and its order
    CTX#<agent>#<subject-key>#<context>  CTX    the context: turn counter, active task
    MID#<agent>#<subject-key>#<messageId> MID   which task a messageId made (duplicate sends)
    JRN#<task>       OP#<seq:05>     the turn journal: effects, interactions, usage, in code order
    JRN#<task>       WAIT#<interaction>  the Step Functions callback token of an open interaction
    PUSH#<task>      CFG#<config>    a push notification config

Indexes (ListTasks): `BySubject` (GSI1PK = agent#subject-key, GSI1SK = statusTimestamp#task) and
`ByContext` (GSI2PK = agent#subject-key#context, GSI2SK as GSI1SK), both newest status first.
Every write that can race is conditional; task writes carry a version.

Sizes (DynamoDB: 400 KB an item; see nylorun.limits): a message or an artifact is at most 256 KiB of JSON in
its own item; the task item holds one status message (256 KiB at most), the open interaction (64 KiB), the
plan (20 short steps) and at most 16 KiB of metadata, so a caller's metadata and an agent's reply never meet
in one item past the limit.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import time
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from nylorun.domain.contexts import next_in_line, open_turn, takes_context
from nylorun.domain.ids import derive_task_id, subject_key
from nylorun.limits import (
    CALLER_HEADROOM,
    DEFAULT_MAX_TASK_BYTES,
    KIB,
    check_status,
    checked_bytes,
    grown,
    stored_bytes,
)
from nylorun.ports import (
    DuplicateMessage,
    InteractionClosed,
    InvalidPageToken,
    JournalEntry,
    NewTurn,
    NotInState,
    Owner,
    StoredPushConfig,
    TaskPage,
    TaskQuery,
    TaskRecord,
    TaskStore,
    TurnCanceled,
    VersionConflict,
)
from nylorun.profile.extensions import Interaction, PlanStep
from nylorun.protocol.models import (
    Artifact,
    Message,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    format_timestamp,
    now_timestamp,
)

# `derive_task_id` (the task-id rule, nylorun.domain.ids) stays importable here for the tests that use it.
__all__ = ["DynamoTaskStore", "derive_task_id", "subject_key"]

_ser = TypeSerializer()
_de = TypeDeserializer()
BY_SUBJECT, BY_CONTEXT = "BySubject", "ByContext"
# DynamoDB: 400 KB an item. Larger metadata (up to 256 KiB) leaves the task item for its own META item.
INLINE_METADATA_BYTES = 16 * KIB


def _item(values: dict[str, Any]) -> dict[str, Any]:
    return {k: _ser.serialize(v) for k, v in values.items() if v is not None}


def _plain(item: dict[str, Any]) -> dict[str, Any]:
    return {k: _de.deserialize(v) for k, v in item.items()}


def _reasons(exc: ClientError) -> list[str]:
    return [r.get("Code", "None") for r in exc.response.get("CancellationReasons", [])]


def _is(exc: ClientError, code: str) -> bool:
    return bool(exc.response.get("Error", {}).get("Code") == code)


def _own_item_metadata(record: TaskRecord) -> str | None:
    """The task's metadata JSON when it is too large to share the task item with the status (else None)."""
    metadata = json.dumps(record.metadata) if record.metadata else ""
    return metadata if len(metadata) > INLINE_METADATA_BYTES else None


class DynamoTaskStore:
    def __init__(self, client: Any, table_name: str, max_task_bytes: int = DEFAULT_MAX_TASK_BYTES) -> None:
        self._db = client
        self._table = table_name
        self._max_task_bytes = max_task_bytes

    # ------------------------------------------------------------------ keys
    @staticmethod
    def _owner_key(owner: Owner) -> str:
        return f"{owner.agent}#{subject_key(owner.subject)}"

    def _ctx_key(self, owner: Owner, context_id: str) -> dict[str, Any]:
        return _item({"PK": f"CTX#{self._owner_key(owner)}#{context_id}", "SK": "CTX"})

    def _mid_key(self, owner: Owner, retry_key: str) -> dict[str, Any]:
        return _item({"PK": f"MID#{self._owner_key(owner)}#{retry_key}", "SK": "MID"})

    @staticmethod
    def _task_key(task_id: str) -> dict[str, Any]:
        return _item({"PK": f"TASK#{task_id}", "SK": "TASK"})

    # ------------------------------------------------------------------ turns
    def create_turn(self, new: NewTurn, *, queue: bool = True) -> tuple[TaskRecord, bool]:
        """Open the context's next turn. Returns the task and whether it holds the context now (start it)
        or is queued behind a busy context. With `queue=False` a busy context raises ContextBusy instead.

        The context item counts turns created (`turns`) and turns started (`started`) and names the turn
        holding it (`activeTask`): busy = a turn holds it, or created turns wait to start.
        """
        deadline = time.monotonic() + 30
        attempt = 0
        while True:
            ctx = self._get(self._ctx_key(new.owner, new.context_id)) or {}
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
            values: dict[str, Any] = {":turn": turn, ":task": task_id}
            if not ctx:
                condition = "attribute_not_exists(PK)"
            else:
                condition = "turns = :prev"
                values[":prev"] = previous
            expression = "SET turns = :turn, lastTask = :task"
            if not busy:
                # The context is free: this turn takes it at once.
                expression += ", started = :turn, activeTask = :task"
                if ctx:
                    condition += " AND attribute_not_exists(activeTask) AND started = :prev"
            ctx_update: dict[str, Any] = {
                "Update": {
                    "TableName": self._table,
                    "Key": self._ctx_key(new.owner, new.context_id),
                    "UpdateExpression": expression,
                    "ConditionExpression": condition,
                    "ExpressionAttributeValues": _item(values),
                }
            }
            try:
                self._db.transact_write_items(
                    TransactItems=[
                        ctx_update,
                        {
                            "Put": {
                                "TableName": self._table,
                                "Item": self._task_item(record, msg_seq=1),
                                "ConditionExpression": "attribute_not_exists(PK)",
                            }
                        },
                        {"Put": {"TableName": self._table, "Item": self._message_item(task_id, 1, message)}},
                        {
                            "Put": {
                                "TableName": self._table,
                                "Item": {
                                    **self._mid_key(new.owner, new.dedupe_key),
                                    **_item({"taskId": task_id}),
                                },
                                **_new_or_replacing(new.replaces_task),
                                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                            }
                        },
                    ]
                    + self._metadata_items(record)
                )
            except ClientError as exc:
                if not _is(exc, "TransactionCanceledException"):
                    raise
                reasons = exc.response.get("CancellationReasons", [])
                if reasons[3].get("Code") == "ConditionalCheckFailed":
                    old = _plain(reasons[3].get("Item", {}))
                    raise DuplicateMessage(str(old.get("taskId", ""))) from None
                # Another turn opened (or the context was freed) meanwhile: read it again. Many callers
                # racing on one context each get the next number, in the order their writes land.
                attempt += 1
                if time.monotonic() > deadline:
                    raise VersionConflict("context kept changing") from None
                time.sleep(random.uniform(0, min(0.2, 0.005 * 2**attempt)))
                continue
            return record, not busy

    def claim_next(self, owner: Owner, context_id: str) -> str | None:
        """If the context is free and a queued turn waits, let the next one (in turn order) take it.
        Queued turns canceled meanwhile are passed over. Returns the task that took the context."""
        for _ in range(64):
            ctx = self._get(self._ctx_key(owner, context_id))
            if not ctx:
                return None
            started = int(ctx.get("started", 0))
            task_id = next_in_line(
                owner, context_id, turns=int(ctx.get("turns", 0)), started=started, active_task=ctx.get("activeTask")
            )
            if task_id is None:
                return None
            turn = started + 1
            head = self._head(task_id)
            takes = takes_context(TaskState(head["state"]) if head is not None else None)
            items: list[dict[str, Any]] = [
                {
                    "Update": {
                        "TableName": self._table,
                        "Key": self._ctx_key(owner, context_id),
                        "UpdateExpression": "SET started = :turn" + (", activeTask = :task" if takes else ""),
                        "ConditionExpression": "started = :prev AND attribute_not_exists(activeTask)",
                        "ExpressionAttributeValues": _item(
                            {":turn": turn, ":prev": started, **({":task": task_id} if takes else {})}
                        ),
                    }
                }
            ]
            if takes and head is not None:
                # The claim bumps the task's version, so a cancel racing it re-reads and sees it active.
                items.append(
                    {
                        "Update": {
                            "TableName": self._table,
                            "Key": self._task_key(task_id),
                            "UpdateExpression": "SET version = version + :one",
                            "ConditionExpression": "version = :v AND #state = :submitted",
                            "ExpressionAttributeNames": {"#state": "state"},
                            "ExpressionAttributeValues": _item(
                                {":one": 1, ":v": int(head["version"]), ":submitted": TaskState.SUBMITTED.value}
                            ),
                        }
                    }
                )
            try:
                self._db.transact_write_items(TransactItems=items)
            except ClientError as exc:
                if not _is(exc, "TransactionCanceledException"):
                    raise
                continue
            if takes:
                return task_id
        return None

    def context_state(self, owner: Owner, context_id: str) -> dict[str, Any]:
        """The context's counters: turns created, turns started, the task holding it (if any)."""
        ctx = self._get(self._ctx_key(owner, context_id)) or {}
        return {
            "turns": int(ctx.get("turns", 0)),
            "started": int(ctx.get("started", 0)),
            "activeTask": ctx.get("activeTask"),
        }

    def _task_item(self, record: TaskRecord, *, msg_seq: int) -> dict[str, Any]:
        owner_key = self._owner_key(record.owner)
        ts = record.status.timestamp or now_timestamp()
        own_item = _own_item_metadata(record) is not None
        return _item(
            {
                "PK": f"TASK#{record.task_id}",
                "SK": "TASK",
                "taskId": record.task_id,
                "contextId": record.context_id,
                "agent": record.owner.agent,
                "subject": record.owner.subject,
                "turn": record.turn,
                "state": record.status.state.value,
                "status": json.dumps(record.status.wire()),
                "statusTs": ts,
                "metadata": json.dumps(record.metadata) if record.metadata is not None and not own_item else None,
                "metadataItem": own_item or None,
                "version": record.version,
                "msgSeq": msg_seq,
                "artSeq": 0,
                "contentBytes": sum(stored_bytes(m) for m in record.history),
                "GSI1PK": owner_key,
                "GSI1SK": f"{ts}#{record.task_id}",
                "GSI2PK": f"{owner_key}#{record.context_id}",
                "GSI2SK": f"{ts}#{record.task_id}",
            }
        )

    def _metadata_items(self, record: TaskRecord) -> list[dict[str, Any]]:
        """Metadata too large for the task item is its own item, written with the task and never changed."""
        metadata = _own_item_metadata(record)
        if metadata is None:
            return []
        item = _item({"PK": f"TASK#{record.task_id}", "SK": "META", "body": metadata})
        return [{"Put": {"TableName": self._table, "Item": item}}]

    def _spilled_metadata(self, record: TaskRecord, item: dict[str, Any]) -> TaskRecord:
        """The task item's record with its metadata, read from the META item when it lives there."""
        if item.get("metadataItem"):
            meta = self._get(_item({"PK": f"TASK#{record.task_id}", "SK": "META"}))
            record.metadata = json.loads(meta["body"]) if meta else None
        return record

    def _message_item(self, task_id: str, seq: int, message: Message) -> dict[str, Any]:
        return _item({"PK": f"TASK#{task_id}", "SK": f"MSG#{seq:08d}", "body": json.dumps(message.wire())})

    # ------------------------------------------------------------------ reads
    def _get(self, key: dict[str, Any]) -> dict[str, Any] | None:
        out = self._db.get_item(TableName=self._table, Key=key, ConsistentRead=True)
        return _plain(out["Item"]) if "Item" in out else None

    def get(self, task_id: str) -> TaskRecord | None:
        items = self._query_all(
            KeyConditionExpression="PK = :pk",
            ExpressionAttributeValues=_item({":pk": f"TASK#{task_id}"}),
            ConsistentRead=True,
        )
        task = next((i for i in items if i["SK"] == "TASK"), None)
        if task is None:
            return None
        record = self._record(task)
        meta = next((i for i in items if i["SK"] == "META"), None)
        if meta is not None:
            record.metadata = json.loads(meta["body"])
        record.history = [Message.model_validate_json(i["body"]) for i in items if i["SK"].startswith("MSG#")]
        arts = sorted((i for i in items if i["SK"].startswith("ART#")), key=lambda i: int(i["order"]))
        record.artifacts = [Artifact.model_validate_json(i["body"]) for i in arts]
        return record

    def _head(self, task_id: str) -> dict[str, Any] | None:
        return self._get(self._task_key(task_id))

    def head(self, task_id: str) -> dict[str, Any] | None:
        """The task item alone (owner, context, state): what an artifact event needs to say whose it is."""
        return self._head(task_id)

    @staticmethod
    def _record(item: dict[str, Any]) -> TaskRecord:
        return TaskRecord(
            task_id=item["taskId"],
            context_id=item["contextId"],
            owner=Owner(subject=item["subject"], agent=item["agent"]),
            turn=int(item["turn"]),
            status=TaskStatus.model_validate_json(item["status"]),
            metadata=json.loads(item["metadata"]) if item.get("metadata") else None,
            interaction=Interaction.model_validate_json(item["interaction"]) if item.get("interaction") else None,
            plan=[PlanStep.model_validate(s) for s in json.loads(item["plan"])] if item.get("plan") else [],
            version=int(item["version"]),
        )

    def interaction_seq(self, task_id: str) -> int | None:
        head = self._head(task_id)
        return int(head["interactionSeq"]) if head and "interactionSeq" in head else None

    def _query_all(self, **kwargs: Any) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        paginator = self._db.get_paginator("query")
        for page in paginator.paginate(TableName=self._table, **kwargs):
            items.extend(_plain(i) for i in page.get("Items", []))
        return items

    def task_for_message(self, owner: Owner, retry_key: str) -> str | None:
        item = self._get(self._mid_key(owner, retry_key))
        return str(item["taskId"]) if item else None

    # ------------------------------------------------------------------ ListTasks
    def list_tasks(self, owner: Owner, query: TaskQuery) -> TaskPage:
        index, pk_name, sk_name, pk = (
            (BY_CONTEXT, "GSI2PK", "GSI2SK", f"{self._owner_key(owner)}#{query.context_id}")
            if query.context_id is not None
            else (BY_SUBJECT, "GSI1PK", "GSI1SK", self._owner_key(owner))
        )
        key_condition = f"{pk_name} = :pk"
        values: dict[str, Any] = {":pk": pk}
        if query.status_after is not None:
            # A2A §4 ListTasks: keep tasks whose status.timestamp >= statusTimestampAfter. The sort key
            # starts with the fixed-width timestamp, so this is a key condition, not a filter.
            key_condition += f" AND {sk_name} >= :after"
            values[":after"] = format_timestamp(query.status_after)
        base: dict[str, Any] = {
            "IndexName": index,
            "KeyConditionExpression": key_condition,
            "ScanIndexForward": False,  # A2A §4: most recently updated first
        }
        if query.state is not None:
            base["FilterExpression"] = "#state = :state"
            base["ExpressionAttributeNames"] = {"#state": "state"}
            values[":state"] = query.state.value
        base["ExpressionAttributeValues"] = _item(values)
        # The token is bound to the whole query, statusTimestampAfter's value included.
        bound = [index, pk, key_condition, query.state, values.get(":after")]
        fingerprint = hashlib.sha256(json.dumps(bound, default=str).encode())
        fingerprint_hex = fingerprint.hexdigest()[:16]

        total = 0
        for page in self._db.get_paginator("query").paginate(TableName=self._table, Select="COUNT", **base):
            total += int(page["Count"])

        start = self._decode_token(query.page_token, fingerprint_hex) if query.page_token else None
        if start is not None:
            # A rewritten key (partial, another partition, before :after) is a DynamoDB ValidationException:
            # refuse it as a bad token instead.
            key = _plain(start)
            after = values.get(":after")
            if set(key) != {"PK", "SK", pk_name, sk_name} or key[pk_name] != pk or (after and key[sk_name] < after):
                raise InvalidPageToken("pageToken is not one this Runtime issued for this query")
        wanted = query.page_size + 1  # one more tells whether a next page exists
        found: list[dict[str, Any]] = []
        kwargs = dict(base)
        if start:
            kwargs["ExclusiveStartKey"] = start
        while len(found) < wanted:
            out = self._db.query(TableName=self._table, Limit=max(wanted * 2, 20), **kwargs)
            found.extend(_plain(i) for i in out.get("Items", []))
            if "LastEvaluatedKey" not in out:
                break
            kwargs["ExclusiveStartKey"] = out["LastEvaluatedKey"]
        page_items = found[: query.page_size]
        tokens = [
            self._encode_token({k: i[k] for k in ("PK", "SK", pk_name, sk_name)}, fingerprint_hex) for i in page_items
        ]
        return TaskPage(
            tasks=[self._spilled_metadata(self._record(i), i) for i in page_items],
            next_page_token=tokens[-1] if len(found) > query.page_size else "",
            total_size=total,
            tokens=tokens,
        )

    @staticmethod
    def _encode_token(key: dict[str, Any], fingerprint: str) -> str:
        raw = json.dumps({"k": key, "f": fingerprint}, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @staticmethod
    def _decode_token(token: str, fingerprint: str) -> dict[str, Any]:
        try:
            raw = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
            key = raw["k"]
            if raw["f"] != fingerprint or not all(isinstance(v, str) for v in key.values()):
                raise ValueError("token for another query")
            return _item(key)
        except (ValueError, KeyError, TypeError, AttributeError):
            raise InvalidPageToken("pageToken is not one this Runtime issued for this query") from None

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
    ) -> TaskRecord:
        check_status(status, interaction)
        added = checked_bytes(history)
        for _ in range(8):
            head = self._head(task_id)
            if head is None or TaskState(head["state"]) not in expect:
                raise NotInState(f"task {task_id} is not in {sorted(s.value for s in expect)}")
            used = grown(int(head.get("contentBytes", 0)), added, self._max_task_bytes if enforce_budget else None)
            record = self._record(head)
            ts = status.timestamp or now_timestamp()
            status = status.model_copy(update={"timestamp": ts})
            seq = int(head["msgSeq"])
            names = {"#state": "state", "#status": "status"}
            values: dict[str, Any] = {
                ":state": status.state.value,
                ":status": json.dumps(status.wire()),
                ":ts": ts,
                ":k1": f"{ts}#{task_id}",
                ":v": record.version,
                ":one": 1,
                ":seq": seq + len(history),
                ":bytes": used,
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
            ]
            removes: list[str] = []
            if interaction is not None:
                sets += ["interaction = :interaction", "interactionSeq = :iseq"]
                values[":interaction"] = json.dumps(interaction.wire())
                values[":iseq"] = interaction_seq or 0
            else:
                removes += ["interaction", "interactionSeq"]
            if plan is not None:
                sets.append("#plan = :plan")
                names["#plan"] = "plan"
                values[":plan"] = json.dumps([s.wire() for s in plan])
            expression = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
            items: list[dict[str, Any]] = [
                {
                    "Update": {
                        "TableName": self._table,
                        "Key": self._task_key(task_id),
                        "UpdateExpression": expression,
                        "ConditionExpression": "version = :v",
                        "ExpressionAttributeNames": names,
                        "ExpressionAttributeValues": _item(values),
                    }
                }
            ]
            items += [
                {"Put": {"TableName": self._table, "Item": self._message_item(task_id, seq + i + 1, m)}}
                for i, m in enumerate(history)
            ]
            holds_context = status.state.terminal and (
                (self._get(self._ctx_key(record.owner, record.context_id)) or {}).get("activeTask") == task_id
            )
            if holds_context:
                # A terminal status frees the context for its next turn, in the same transaction.
                items.append(
                    {
                        "Update": {
                            "TableName": self._table,
                            "Key": self._ctx_key(record.owner, record.context_id),
                            "UpdateExpression": "REMOVE activeTask",
                            "ConditionExpression": "activeTask = :task",
                            "ExpressionAttributeValues": _item({":task": task_id}),
                        }
                    }
                )
            try:
                self._db.transact_write_items(TransactItems=items)
            except ClientError as exc:
                if _is(exc, "TransactionCanceledException"):
                    continue  # the version moved: read again and re-check the expected states
                raise
            record.status = status
            record.version += 1
            record.interaction = interaction
            if plan is not None:
                record.plan = list(plan)
            return record
        raise VersionConflict(f"task {task_id} kept changing")

    def put_artifact(self, task_id: str, artifact: Artifact) -> None:
        """The artifact keeps the place it was first given; a rewrite (same id) replaces its content and its
        share of the task's size. Conditional on the task's version, so the size it replaces is current."""
        checked_bytes([artifact])
        body = json.dumps(artifact.wire())
        key = _item({"PK": f"TASK#{task_id}", "SK": f"ART#{artifact.artifact_id}"})
        for _ in range(8):
            head = self._head(task_id)
            if head is None:
                raise NotInState(f"task {task_id} is gone")
            old = self._get(key)
            used = int(head.get("contentBytes", 0)) - (len(old["body"]) if old else 0)
            order = int(head["artSeq"]) + 1
            update = {
                "TableName": self._table,
                "Key": self._task_key(task_id),
                "UpdateExpression": "SET artSeq = :order, contentBytes = :bytes, version = version + :one",
                "ConditionExpression": "version = :v",
                "ExpressionAttributeValues": _item(
                    {
                        ":order": order,
                        ":bytes": grown(used, len(body), self._max_task_bytes),
                        ":one": 1,
                        ":v": int(head["version"]),
                    }
                ),
            }
            item = {**key, **_item({"body": body, "order": int(old["order"]) if old else order})}
            try:
                self._db.transact_write_items(
                    TransactItems=[{"Update": update}, {"Put": {"TableName": self._table, "Item": item}}]
                )
                return
            except ClientError as exc:
                if not _is(exc, "TransactionCanceledException"):
                    raise
        raise VersionConflict(f"task {task_id} kept changing")

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
        for _ in range(8):
            head = self._head(task_id)
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
                values[":status"] = json.dumps(status.wire())
            update: dict[str, Any] = {
                "TableName": self._table,
                "Key": self._task_key(task_id),
                "UpdateExpression": expression,
                "ConditionExpression": "version = :v",
                "ExpressionAttributeValues": _item(values),
            }
            if names:
                update["ExpressionAttributeNames"] = names
            once: list[dict[str, Any]] = []
            if sender is not None:
                once = [
                    {
                        "Put": {
                            "TableName": self._table,
                            "Item": {**self._mid_key(*sender), **_item({"taskId": task_id})},
                            "ConditionExpression": "attribute_not_exists(PK)",
                        }
                    }
                ]
            try:
                self._db.transact_write_items(
                    TransactItems=[{"Update": update}]
                    + [
                        {"Put": {"TableName": self._table, "Item": self._message_item(task_id, seq + i + 1, m)}}
                        for i, m in enumerate(messages)
                    ]
                    + once
                )
                return
            except ClientError as exc:
                if not _is(exc, "TransactionCanceledException"):
                    raise
                if once and _reasons(exc)[-1] == "ConditionalCheckFailed":
                    raise DuplicateMessage(task_id) from None
        raise VersionConflict(f"task {task_id} kept changing")

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
        head = self._head(task_id)
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
        try:
            self._db.transact_write_items(
                TransactItems=[
                    {
                        "Update": {
                            "TableName": self._table,
                            "Key": self._task_key(task_id),
                            "UpdateExpression": "SET #state = :state, #status = :status, statusTs = :ts, "
                            "GSI1SK = :k, GSI2SK = :k, msgSeq = :seq, version = version + :one, "
                            "contentBytes = :b REMOVE interaction, interactionSeq",
                            "ConditionExpression": "version = :v",
                            "ExpressionAttributeNames": {"#state": "state", "#status": "status"},
                            "ExpressionAttributeValues": _item(
                                {
                                    ":state": status.state.value,
                                    ":status": json.dumps(status.wire()),
                                    ":ts": ts,
                                    ":k": f"{ts}#{task_id}",
                                    ":seq": seq,
                                    ":v": int(head["version"]),
                                    ":one": 1,
                                    ":b": used,
                                }
                            ),
                        }
                    },
                    {"Put": {"TableName": self._table, "Item": self._message_item(task_id, seq, message)}},
                    {
                        "Update": {
                            "TableName": self._table,
                            "Key": _item({"PK": f"JRN#{task_id}", "SK": f"OP#{int(head['interactionSeq']):05d}"}),
                            "UpdateExpression": "SET answer = :answer, finished = :yes",
                            "ConditionExpression": "attribute_exists(PK) AND attribute_not_exists(answer)",
                            "ExpressionAttributeValues": _item({":answer": json.dumps(answer), ":yes": True}),
                        }
                    },
                    {
                        "Put": {
                            "TableName": self._table,
                            "Item": {**self._mid_key(owner, retry_key), **_item({"taskId": task_id})},
                            "ConditionExpression": "attribute_not_exists(PK)",
                        }
                    },
                ]
            )
        except ClientError as exc:
            if not _is(exc, "TransactionCanceledException"):
                raise
            if _reasons(exc)[3] == "ConditionalCheckFailed":
                raise DuplicateMessage(task_id) from None
            raise InteractionClosed("the interaction was answered or changed meanwhile") from None

    # ------------------------------------------------------------------ journal
    def journal(self, task_id: str) -> dict[int, JournalEntry]:
        items = self._query_all(
            KeyConditionExpression="PK = :pk AND begins_with(SK, :op)",
            ExpressionAttributeValues=_item({":pk": f"JRN#{task_id}", ":op": "OP#"}),
            ConsistentRead=True,
        )
        entries = {}
        for i in items:
            seq = int(i["seq"])
            entries[seq] = JournalEntry(
                seq=seq,
                kind=i["kind"],
                name=i["name"],
                finished=bool(i.get("finished", False)),
                result=json.loads(i["result"]) if "result" in i else None,
                answer=json.loads(i["answer"]) if "answer" in i else None,
            )
        return entries

    def journal_start(self, task_id: str, entry: JournalEntry) -> None:
        record = _item(
            {
                "PK": f"JRN#{task_id}",
                "SK": f"OP#{entry.seq:05d}",
                "seq": entry.seq,
                "kind": entry.kind,
                "name": entry.name,
                "finished": entry.finished,
                "result": json.dumps(entry.result) if entry.finished else None,
            }
        )
        try:
            self._db.transact_write_items(
                TransactItems=[
                    {
                        # Cancel really stops: no journal entry (so no effect) after CANCELED is written.
                        "ConditionCheck": {
                            "TableName": self._table,
                            "Key": self._task_key(task_id),
                            "ConditionExpression": "#state <> :canceled",
                            "ExpressionAttributeNames": {"#state": "state"},
                            "ExpressionAttributeValues": _item({":canceled": TaskState.CANCELED.value}),
                        }
                    },
                    {
                        "Put": {
                            "TableName": self._table,
                            "Item": record,
                            "ConditionExpression": "attribute_not_exists(PK)",
                        }
                    },
                ]
            )
        except ClientError as exc:
            if not _is(exc, "TransactionCanceledException"):
                raise
            if _reasons(exc)[0] == "ConditionalCheckFailed":
                raise TurnCanceled(task_id) from None
            raise VersionConflict(f"journal entry {entry.seq} exists") from None

    def journal_finish(self, task_id: str, seq: int, result: Any) -> None:
        self._db.update_item(
            TableName=self._table,
            Key=_item({"PK": f"JRN#{task_id}", "SK": f"OP#{seq:05d}"}),
            UpdateExpression="SET finished = :yes, #result = :result",
            ConditionExpression="attribute_exists(PK)",
            ExpressionAttributeNames={"#result": "result"},
            ExpressionAttributeValues=_item({":yes": True, ":result": json.dumps(result)}),
        )

    def put_wait_token(self, task_id: str, interaction_id: str, token: str) -> None:
        self._db.put_item(
            TableName=self._table,
            Item=_item({"PK": f"JRN#{task_id}", "SK": f"WAIT#{interaction_id}", "token": token}),
        )

    def get_wait_token(self, task_id: str, interaction_id: str) -> str | None:
        item = self._get(_item({"PK": f"JRN#{task_id}", "SK": f"WAIT#{interaction_id}"}))
        return str(item["token"]) if item else None

    def wait_tokens(self, task_id: str) -> list[str]:
        items = self._query_all(
            KeyConditionExpression="PK = :pk AND begins_with(SK, :w)",
            ExpressionAttributeValues=_item({":pk": f"JRN#{task_id}", ":w": "WAIT#"}),
            ConsistentRead=True,
        )
        return [str(i["token"]) for i in items]

    # ------------------------------------------------------------------ file versions
    def file_version(self, scope: str, path: str, write_key: str) -> int:
        """The version number a write at `path` gets: 1, 2, ... per path and context. Idempotent per
        `write_key` (a retried write keeps its number). Writes to one context run one turn at a time."""
        pk = f"FILE#{scope}"
        for _ in range(8):
            done = self._get(_item({"PK": pk, "SK": f"W#{write_key}"}))
            if done:
                return int(done["version"])
            head = self._get(_item({"PK": pk, "SK": f"PATH#{path}"}))
            current = int(head["version"]) if head else 0
            try:
                self._db.transact_write_items(
                    TransactItems=[
                        {
                            "Update": {
                                "TableName": self._table,
                                "Key": _item({"PK": pk, "SK": f"PATH#{path}"}),
                                "UpdateExpression": "SET version = :next",
                                "ConditionExpression": "attribute_not_exists(PK)" if not head else "version = :v",
                                "ExpressionAttributeValues": _item(
                                    {":next": current + 1, **({":v": current} if head else {})}
                                ),
                            }
                        },
                        {
                            "Put": {
                                "TableName": self._table,
                                "Item": _item({"PK": pk, "SK": f"W#{write_key}", "version": current + 1}),
                                "ConditionExpression": "attribute_not_exists(PK)",
                            }
                        },
                    ]
                )
                return current + 1
            except ClientError as exc:
                if not _is(exc, "TransactionCanceledException"):
                    raise
        raise VersionConflict(f"file version for {path} kept changing")

    # ------------------------------------------------------------------ push configs
    def put_push_config(self, task_id: str, config: StoredPushConfig) -> None:
        self._db.put_item(
            TableName=self._table,
            Item=_item(
                {
                    "PK": f"PUSH#{task_id}",
                    "SK": f"CFG#{config.config.id}",
                    "body": json.dumps(config.config.wire()),
                    "createdAt": config.created_at,
                    "extensions": list(config.extensions) or None,
                    "expiresAt": config.expires_at,
                }
            ),
        )

    def get_push_config(self, task_id: str, config_id: str) -> StoredPushConfig | None:
        item = self._get(_item({"PK": f"PUSH#{task_id}", "SK": f"CFG#{config_id}"}))
        return self._push(item) if item else None

    def list_push_configs(self, task_id: str) -> list[StoredPushConfig]:
        items = self._query_all(
            KeyConditionExpression="PK = :pk",
            ExpressionAttributeValues=_item({":pk": f"PUSH#{task_id}"}),
            ConsistentRead=True,
        )
        return sorted((self._push(i) for i in items), key=lambda c: (c.created_at, c.config.id or ""))

    def delete_push_config(self, task_id: str, config_id: str) -> None:
        self._db.delete_item(
            TableName=self._table, Key=_item({"PK": f"PUSH#{task_id}", "SK": f"CFG#{config_id}"})
        )

    def expire_push_configs(self, task_id: str, expires_at: int) -> None:
        for stored in self.list_push_configs(task_id):
            try:
                self._db.update_item(
                    TableName=self._table,
                    Key=_item({"PK": f"PUSH#{task_id}", "SK": f"CFG#{stored.config.id}"}),
                    UpdateExpression="SET expiresAt = :at",
                    ConditionExpression="attribute_exists(PK)",
                    ExpressionAttributeValues=_item({":at": expires_at}),
                )
            except ClientError as exc:
                if not _is(exc, "ConditionalCheckFailedException"):
                    raise

    def sweep_push_configs(self) -> int:
        """Configs whose task is gone (a config lives as long as its task)."""
        removed = 0
        paginator = self._db.get_paginator("scan")
        pages = paginator.paginate(
            TableName=self._table,
            FilterExpression="begins_with(PK, :push)",
            ExpressionAttributeValues=_item({":push": "PUSH#"}),
            ProjectionExpression="PK, SK",
        )
        for page in pages:
            for raw in page.get("Items", []):
                item = _plain(raw)
                task_id = str(item["PK"]).removeprefix("PUSH#")
                if self._head(task_id) is None:
                    self._db.delete_item(TableName=self._table, Key=_item({"PK": item["PK"], "SK": item["SK"]}))
                    removed += 1
        return removed

    @staticmethod
    def _push(item: dict[str, Any]) -> StoredPushConfig:
        return StoredPushConfig(
            config=TaskPushNotificationConfig.model_validate_json(item["body"]),
            created_at=item["createdAt"],
            extensions=tuple(item.get("extensions") or ()),
        )


def _new_or_replacing(replaced_task: str | None) -> dict[str, Any]:
    """The message key is new, or still names the task this turn replaces (two racing sends: one wins)."""
    if replaced_task is None:
        return {"ConditionExpression": "attribute_not_exists(PK)"}
    return {
        "ConditionExpression": "attribute_not_exists(PK) OR taskId = :replaced",
        "ExpressionAttributeValues": _item({":replaced": replaced_task}),
    }


if TYPE_CHECKING:  # mypy fails here when the port changes and this adapter does not follow
    _store: TaskStore = DynamoTaskStore(None, "")
