"""Reads of one task: all of it (history, artifacts, metadata), its item alone, its interaction's place."""

from __future__ import annotations

from typing import Any

from nylorun.adapters.dynamodb import codec, layout, salvage
from nylorun.adapters.dynamodb.table import Table
from nylorun.ports import TaskRecord


class TaskReads:
    _t: Table

    def get(self, task_id: str) -> TaskRecord | None:
        items = self._t.query_all(
            KeyConditionExpression="PK = :pk", values={":pk": layout.task_pk(task_id)}, ConsistentRead=True
        )
        task = next((i for i in items if i["SK"] == "TASK"), None)
        if task is None or codec.expired(task):
            # docs/operate.md#data-retention: an expired task is gone, whether or not TTL has deleted it yet
            return None
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
