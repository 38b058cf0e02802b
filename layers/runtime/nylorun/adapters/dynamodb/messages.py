"""Message dedupe: the MID item records which task a message (its retry key) made or answered, so a retried
send is recognised (DuplicateMessage) and answered with the first task."""

from __future__ import annotations

from nylorun.adapters.dynamodb import layout
from nylorun.adapters.dynamodb.table import Table, Transaction
from nylorun.ports import Owner


def record_once(txn: Transaction, name: str, owner: Owner, retry_key: str, task_id: str,
                *, replaces_task: str | None = None) -> Transaction:
    """Add the MID item to `txn`, new (or still naming the task this one replaces: two racing sends, one
    wins). `Canceled.failed(name)` then means the message was seen; `Canceled.old(name)` names its task."""
    item = {**layout.sent(owner, retry_key), "taskId": task_id}
    if replaces_task is None:
        return txn.put(name, item, "attribute_not_exists(PK)", return_old=True)
    return txn.put(name, item, "attribute_not_exists(PK) OR taskId = :replaced", {":replaced": replaces_task},
                   return_old=True)


class Messages:
    _t: Table

    def task_for_message(self, owner: Owner, retry_key: str) -> str | None:
        item = self._t.get(layout.sent(owner, retry_key))
        return str(item["taskId"]) if item else None
