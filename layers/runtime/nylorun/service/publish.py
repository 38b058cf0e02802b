"""Turn the store's changes into Runtime events and publish them, and queue the pushed ones for their task's push
configs (the publish function's logic)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nylorun.events import ArtifactChanged, Change, TaskChanged, TaskImage, from_change
from nylorun.observability import metrics
from nylorun.ports import DeliveryQueue, EventBus
from nylorun.service.push import hand_off


class EventPublisher:
    """`decode` turns one change-stream record into the change it stands for (the store's adapter provides it:
    `nylorun.adapters.dynamodb.decode_change`); artifact changes are told whose they are from the store. With a
    `push_queue` (push on), each status and artifact event of a task with push configs is queued there, in the
    task's own message group, after it is on the bus."""

    def __init__(
        self,
        store: Any,
        bus: EventBus,
        decode: Callable[[dict[str, Any]], Change | None],
        push_queue: DeliveryQueue | None = None,
    ) -> None:
        self._store = store
        self._bus = bus
        self._decode = decode
        self._push_queue = push_queue

    def publish_record(self, record: dict[str, Any]) -> int:
        return self.publish(self._decode(record))

    def publish(self, change: Change | None) -> int:
        head = self._head(change.task_id) if isinstance(change, ArtifactChanged) else None
        events = from_change(change, head)
        # The task's push configs as of this change: a status change's image carries the count, an artifact's task
        # item was just read (`head`).
        task = change.new if isinstance(change, TaskChanged) else head
        if events:
            self._bus.publish(events)
            metrics.add_metric(name="EventsPublished", unit="Count", value=len(events))
        if self._push_queue is not None:
            # Straight into the task's own group (docs/architecture.md, "Fair push delivery"). An EventBridge rule
            # can only put every event in one fixed group (an SQS target's MessageGroupId is a plain string), which
            # every task's events then passed single file: one caller's flood of events held up every other
            # caller's pushes. A retried record queues its events again; the queue drops each within 5 minutes (its
            # deduplication id is the event's).
            for event in events:
                hand_off(
                    self._store,
                    self._push_queue,
                    {"detail-type": event.detail_type, "detail": event.detail},
                    task.push_configs if task is not None else None,
                )
        return len(events)

    def _head(self, task_id: str) -> TaskImage | None:
        head = self._store.head(task_id)
        if head is None:
            return None
        return TaskImage.from_head(head)
