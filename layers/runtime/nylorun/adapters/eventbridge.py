"""The event bus port on EventBridge."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from nylorun.events import SOURCE, RuntimeEvent


class EventPublishError(Exception):
    """Some entries were not accepted: the caller retries (the stream record is reported as failed)."""


class EventBridgeBus:
    def __init__(self, client: Any, bus_name: str) -> None:
        self._events = client
        self._bus = bus_name

    def publish(self, events: Sequence[RuntimeEvent]) -> None:
        for start in range(0, len(events), 10):  # PutEvents takes at most 10 entries
            chunk = events[start : start + 10]
            out = self._events.put_events(
                Entries=[
                    {
                        "Source": SOURCE,
                        "DetailType": event.detail_type,
                        "Detail": json.dumps(event.detail),
                        "EventBusName": self._bus,
                    }
                    for event in chunk
                ]
            )
            if out.get("FailedEntryCount"):
                codes = {e.get("ErrorCode") for e in out.get("Entries", []) if e.get("ErrorCode")}
                raise EventPublishError(f"{out['FailedEntryCount']} events not accepted: {sorted(codes)}")
