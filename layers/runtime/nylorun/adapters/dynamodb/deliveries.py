"""The delegation callbacks' replay cache (`CallbackReplays`): one conditional put per delivery id."""

from __future__ import annotations

import time

from nylorun.adapters.dynamodb import layout
from nylorun.adapters.dynamodb.table import Table


class Deliveries:
    _t: Table

    def first_delivery(self, task_id: str, delivery_id: str, expires_at: int) -> bool:
        # An item past its expiry counts as absent: DynamoDB's TTL deletes it only some time later.
        return self._t.update(
            layout.seen_delivery(task_id, delivery_id),
            "SET expiresAt = :expires",
            "attribute_not_exists(PK) OR expiresAt < :now",
            {":expires": expires_at, ":now": int(time.time())},
        )
