"""The turn journal (replay) and the callback tokens of open interactions."""

from __future__ import annotations

import secrets
from typing import Any

from nylorun.adapters.dynamodb import codec, layout
from nylorun.adapters.dynamodb.table import Canceled, Table
from nylorun.events import logged
from nylorun.limits import check_status
from nylorun.ports import (
    TASK_TOKEN,
    JournalEntry,
    NotInState,
    OperatorAction,
    Resolution,
    Resolved,
    Sealer,
    TurnCanceled,
    UncertainTask,
    Uncertainty,
    VersionConflict,
)
from nylorun.protocol.models import TaskState, TaskStatus, now_timestamp


class Journal:
    _t: Table
    _sealer: Sealer | None

    def _seal_token(self, task_id: str, token: str) -> str:
        return self._sealer.seal(token, TASK_TOKEN, task_id) if self._sealer else token

    def _open_token(self, task_id: str, stored: str) -> str:
        return self._sealer.open(stored, TASK_TOKEN, task_id) if self._sealer else stored

    def journal(self, task_id: str) -> dict[int, JournalEntry]:
        items = self._t.query_all(
            KeyConditionExpression="PK = :pk AND begins_with(SK, :op)",
            values={":pk": layout.journal_pk(task_id), ":op": "OP#"},
            ConsistentRead=True,
        )
        return {entry.seq: entry for entry in map(codec.journal_entry, items)}

    def journal_start(self, task_id: str, entry: JournalEntry) -> None:
        item = codec.journal_item(task_id, entry) | {"answer": None}
        txn = (
            self._t.transaction()
            # Cancel really stops: no journal entry (so no effect) after CANCELED is written.
            .check("task", layout.task(task_id), "#state <> :canceled", {":canceled": TaskState.CANCELED.value},
                   {"#state": "state"})
            .put("entry", item, "attribute_not_exists(PK)")
        )
        try:
            txn.write()
        except Canceled as canceled:
            if canceled.failed("task"):
                raise TurnCanceled(task_id) from None
            raise VersionConflict(f"journal entry {entry.seq} exists") from None

    def journal_finish(self, task_id: str, seq: int, result: Any) -> None:
        if not self._t.update(
            layout.journal_op(task_id, seq),
            "SET finished = :yes, #result = :result, finishedAt = :at",
            "attribute_exists(PK)",
            {":yes": True, ":result": codec.dumps(result), ":at": now_timestamp()},
            {"#result": "result"},
        ):
            raise NotInState(f"journal entry {seq} does not exist")

    def put_wait_token(self, task_id: str, interaction_id: str, token: str) -> None:
        self._t.put({**layout.wait_token(task_id, interaction_id), "token": self._seal_token(task_id, token)})

    def get_wait_token(self, task_id: str, interaction_id: str) -> str | None:
        item = self._t.get(layout.wait_token(task_id, interaction_id))
        return self._open_token(task_id, str(item["token"])) if item else None

    def wait_tokens(self, task_id: str) -> list[str]:
        items = self._t.query_all(
            KeyConditionExpression="PK = :pk AND begins_with(SK, :w)",
            values={":pk": layout.journal_pk(task_id), ":w": "WAIT#"},
            ConsistentRead=True,
        )
        return [self._open_token(task_id, str(i["token"])) for i in items]

    # ------------------------------------------------------------------ operators (docs/operate.md)
    def record_operator_action(self, task_id: str, action: OperatorAction) -> None:
        key = layout.operator_action(task_id, action.at, secrets.token_hex(4))
        self._t.put({**key, "at": action.at, "operator": action.operator, "action": action.action,
                     "detail": codec.dumps(action.detail)})

    def operator_actions(self, task_id: str) -> list[OperatorAction]:
        items = self._t.query_all(
            KeyConditionExpression="PK = :pk AND begins_with(SK, :log)",
            values={":pk": layout.journal_pk(task_id), ":log": "OPLOG#"},
            ConsistentRead=True,
        )
        return [
            OperatorAction(at=str(i["at"]), operator=str(i["operator"]), action=str(i["action"]),
                           detail=codec.loads(i["detail"]))
            for i in items
        ]

    def uncertain_tasks(self) -> list[UncertainTask]:
        # The sparse Uncertain index (layout): every subject's waiting tasks, oldest first; never a Scan. An index is
        # read eventually consistent, so a task resolved a moment ago may still be listed: a resolution checks the
        # task item itself.
        items = self._t.query_all(
            IndexName=layout.UNCERTAIN,
            KeyConditionExpression="GSI4PK = :pk",
            values={":pk": layout.UNCERTAIN_PK},
        )
        return [codec.uncertain_task(item) for item in items]

    def resolve_uncertain(
        self, task_id: str, uncertainty: Uncertainty, resolution: Resolution, status: TaskStatus
    ) -> int:
        check_status(status, None)
        head = self._t.get(layout.task(task_id))
        marked = codec.uncertainty(head) if head is not None else None
        if head is None or TaskState(head["state"]) != TaskState.WORKING or marked != uncertainty:
            raise NotInState(f"task {task_id} is not waiting for an operator on {uncertainty.effect_id}")
        if resolution.effect_id != uncertainty.effect_id:
            raise NotInState(f"{resolution.effect_id} is not the effect task {task_id} lost")
        ts = status.timestamp or now_timestamp()
        body = codec.status_body(status.model_copy(update={"timestamp": ts}))
        attempt = int(head.get("attempt") or 0) + 1
        txn = self._t.transaction().update(
            "task",
            layout.task(task_id),
            "SET #status = :status, statusTs = :ts, GSI1SK = :k, GSI2SK = :k, statusLog = :log, attempt = :attempt, "
            "lastResolution = :resolved, version = version + :one REMOVE " + ", ".join(layout.UNCERTAIN_ATTRIBUTES),
            "version = :v AND #state = :working AND uncertainEffect = :effect AND uncertainAttempt = :was",
            {
                ":status": body, ":ts": ts, ":k": f"{ts}#{task_id}", ":log": logged(head.get("statusLog"), body),
                ":attempt": attempt, ":one": 1, ":v": int(head["version"]), ":working": TaskState.WORKING.value,
                ":effect": uncertainty.effect_id, ":was": uncertainty.attempt,
                ":resolved": codec.dumps({"effect": resolution.effect_id, "done": resolution.done,
                                          "digest": resolution.digest, "attempt": attempt}),
            },
            {"#status": "status", "#state": "state"},
        )
        entry = layout.journal_op(task_id, uncertainty.seq)
        unfinished = "attribute_exists(PK) AND finished = :no"
        if resolution.done:
            # Finished with the operator's result: the resumed run replays it as if the effect had returned it.
            txn.update("journal", entry, "SET finished = :yes, #result = :result, finishedAt = :ts", unfinished,
                       {":yes": True, ":no": False, ":result": codec.dumps(resolution.result), ":ts": ts},
                       {"#result": "result"})
        else:
            # It did not happen: without its entry, the resumed run starts it again at the same place, so with the
            # same idempotency key (`opaque_id(task, seq, "eff")`).
            txn.delete("journal", entry, unfinished, {":no": False})
        try:
            txn.write()
        except Canceled:
            raise NotInState(f"task {task_id} changed while it was being resolved") from None
        return attempt

    def last_resolution(self, task_id: str) -> Resolved | None:
        item = self._t.get(layout.task(task_id))
        if item is None or not item.get("lastResolution"):
            return None
        kept = codec.loads(item["lastResolution"])
        return Resolved(effect_id=kept["effect"], done=kept["done"], digest=kept["digest"], attempt=kept["attempt"])
