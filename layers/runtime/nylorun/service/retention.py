"""Retention (docs/operate.md#data-retention): a task and everything of it expire the retention after it ends.

The status that ends a task sets its TTL (`expiresAt`) in the same write; readers treat an expired task as gone at
once. DynamoDB's TTL deletes the task item (within days); its REMOVE on the table's stream runs `expired` (the sweep
function), which deletes the task's files (every version it named) and then its other items. The stream is
at-least-once: each step deletes by key and the files go before the items that name them, so a repeated or
resumed record does nothing twice and loses nothing. The bucket's lifecycle rules are the backstop.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nylorun.engine.files import FileService
from nylorun.observability import logger, metrics
from nylorun.ports import ExpiredTask, TaskStore


class RetentionService:
    """`decode` turns one change-stream record into the task whose expiry it records, if it is one (the store's
    adapter provides it: `nylorun.adapters.dynamodb.decode_expiry`)."""

    def __init__(
        self, store: TaskStore, files: FileService | None, decode: Callable[[dict[str, Any]], ExpiredTask | None]
    ) -> None:
        self._store = store
        self._files = files
        self._decode = decode

    def expired_record(self, record: dict[str, Any]) -> int:
        task = self._decode(record)
        return self.expired(task) if task is not None else 0

    def expired(self, task: ExpiredTask) -> int:
        """Remove what is left of an expired task: its files first, then its items. Returns the items removed."""
        writes: list[tuple[str, str]] = []
        if self._files is not None:
            remains = self._store.remains(task.task_id)
            writes = self._files.forget(task.task_id, task.owner, task.context_id, remains)
        removed = self._store.remove_remains(task.task_id, writes)
        logger.info("expired task removed", extra={"task_id": task.task_id, "items": removed})
        metrics.add_metric(name="TasksExpired", unit="Count", value=1)
        return removed
