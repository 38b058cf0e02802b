"""The delegation callbacks' replay cache (`CallbackReplays`) in memory: delivery ids and when they expire."""

from __future__ import annotations

import time

from nylorun.adapters.memory.state import State


class Deliveries(State):
    def first_delivery(self, task_id: str, delivery_id: str, expires_at: int) -> bool:
        with self._lock:
            seen = self._seen_deliveries
            if seen.get((task_id, delivery_id), 0) >= time.time():
                return False
            if len(seen) > 10_000:  # forget the expired ones now and then: what the DynamoDB TTL does there
                for key in [key for key, until in seen.items() if until < time.time()]:
                    del seen[key]
            seen[(task_id, delivery_id)] = expires_at
            return True
