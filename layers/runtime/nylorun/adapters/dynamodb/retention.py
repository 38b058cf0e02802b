"""What goes when a task expires (docs/operate.md#data-retention): the task item carries the TTL (`expiresAt`,
set by the status that ends it); when DynamoDB's TTL deletes it, the sweep function (the stream's REMOVE)
removes the rest with these. Every step is a delete by key, so a repeated or resumed removal does nothing
twice."""

from __future__ import annotations

from collections.abc import Sequence

from nylorun.adapters.dynamodb import codec, layout
from nylorun.adapters.dynamodb.table import Table
from nylorun.ports import TaskRemains


class Retention:
    _t: Table

    def _partition(self, pk: str) -> list[dict[str, object]]:
        return self._t.query_all(KeyConditionExpression="PK = :pk", values={":pk": pk}, ConsistentRead=True)

    def remains(self, task_id: str) -> TaskRemains:
        items = self._partition(layout.task_pk(task_id))
        arts = sorted((i for i in items if str(i["SK"]).startswith("ART#")), key=lambda i: int(str(i["order"])))
        return TaskRemains(
            history=[codec.message(str(i["body"])) for i in items if str(i["SK"]).startswith("MSG#")],
            artifacts=[codec.artifact(str(i["body"])) for i in arts],
            journal={
                int(str(i["seq"])): codec.journal_entry(i)
                for i in self._partition(layout.journal_pk(task_id))
                if str(i["SK"]).startswith("OP#")
            },
        )

    def remove_remains(self, task_id: str, file_writes: Sequence[tuple[str, str]]) -> int:
        task_items = self._partition(layout.task_pk(task_id))
        head = next((i for i in task_items if i["SK"] == "TASK"), None)
        if head is not None and not codec.expired(head):
            return 0  # a task that has not expired keeps everything
        removed = 0
        # First what the task's own items name (its messages' dedupe records, its file writes in the journal's
        # order), so that a removal cut short finds them again; a dedupe record a later send took over is kept.
        for item in task_items:
            if item.get("sent"):
                sent = {"PK": str(item["sent"]), "SK": "MID"}
                removed += self._t.delete(sent, "taskId = :task", {":task": task_id})
        for scope, write_key in file_writes:
            self._t.delete(layout.file_write(scope, write_key))
            removed += 1
        for pk in (layout.journal_pk(task_id), layout.push_pk(task_id), layout.fan_out(task_id, "")["PK"]):
            for item in self._partition(pk):
                self._t.delete({"PK": item["PK"], "SK": item["SK"]})
                removed += 1
        for item in task_items:  # the task's own partition last: it names the rest
            self._t.delete({"PK": item["PK"], "SK": item["SK"]})
            removed += 1
        return removed
