"""The turn journal (replay) and the callback tokens of open interactions."""

from __future__ import annotations

import secrets
from typing import Any

from nylorun.adapters.dynamodb import codec, layout
from nylorun.adapters.dynamodb.table import Canceled, Table
from nylorun.ports import (
    TASK_TOKEN,
    JournalEntry,
    NotInState,
    OperatorAction,
    Sealer,
    TurnCanceled,
    VersionConflict,
)
from nylorun.protocol.models import TaskState


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
            "SET finished = :yes, #result = :result",
            "attribute_exists(PK)",
            {":yes": True, ":result": codec.dumps(result)},
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

    # ------------------------------------------------------------------ operators (issue 16)
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
