"""Turn change-stream records into Runtime events and publish them (the publish function's logic)."""

from __future__ import annotations

from typing import Any

from nylorun.events import from_stream_record
from nylorun.observability import metrics
from nylorun.ports import EventBus


class EventPublisher:
    def __init__(self, store: Any, bus: EventBus) -> None:
        self._store = store
        self._bus = bus

    def publish_record(self, record: dict[str, Any]) -> int:
        heads: dict[str, dict[str, Any]] = {}
        new = record.get("dynamodb", {}).get("NewImage") or {}
        sk = new.get("SK", {}).get("S", "")
        if sk.startswith("ART#"):
            task_id = new["PK"]["S"].removeprefix("TASK#")
            head = self._store.head(task_id)
            if head is not None:
                heads[task_id] = head
        events = from_stream_record(record, heads)
        if events:
            self._bus.publish(events)
            metrics.add_metric(name="EventsPublished", unit="Count", value=len(events))
        return len(events)
