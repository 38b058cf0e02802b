"""Turn the store's changes into Runtime events and publish them (the publish function's logic)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nylorun.events import ArtifactChanged, Change, TaskImage, from_change
from nylorun.observability import metrics
from nylorun.ports import EventBus


class EventPublisher:
    """`decode` turns one change-stream record into the change it stands for (the store's adapter provides it:
    `nylorun.adapters.dynamodb.decode_change`); artifact changes are told whose they are from the store."""

    def __init__(self, store: Any, bus: EventBus, decode: Callable[[dict[str, Any]], Change | None]) -> None:
        self._store = store
        self._bus = bus
        self._decode = decode

    def publish_record(self, record: dict[str, Any]) -> int:
        return self.publish(self._decode(record))

    def publish(self, change: Change | None) -> int:
        head = self._head(change.task_id) if isinstance(change, ArtifactChanged) else None
        events = from_change(change, head)
        if events:
            self._bus.publish(events)
            metrics.add_metric(name="EventsPublished", unit="Count", value=len(events))
        return len(events)

    def _head(self, task_id: str) -> TaskImage | None:
        head = self._store.head(task_id)
        if head is None:
            return None
        return TaskImage.from_head(head)
