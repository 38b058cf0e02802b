"""Push notification configs of tasks, and the sweep of configs whose task is gone.

The sweep reads the sparse `PushConfigs` index (keys and `expiresAt`; only config items carry its keys), one
query per bucket, never a Scan of the table: it reads configs and nothing else, then removes those whose task
item is gone or whose expiry has passed (the table's TTL removes expired items too, but only within days).
"""

from __future__ import annotations

import time

from nylorun.adapters.dynamodb import codec, layout
from nylorun.adapters.dynamodb.table import Table
from nylorun.ports import StoredPushConfig


class PushConfigs:
    _t: Table

    def put_push_config(self, task_id: str, config: StoredPushConfig) -> None:
        self._t.put(codec.push_item(task_id, config))

    def get_push_config(self, task_id: str, config_id: str) -> StoredPushConfig | None:
        item = self._t.get(layout.push_config(task_id, config_id))
        return codec.push_config(item) if item else None

    def list_push_configs(self, task_id: str) -> list[StoredPushConfig]:
        items = self._t.query_all(
            KeyConditionExpression="PK = :pk", values={":pk": layout.push_pk(task_id)}, ConsistentRead=True
        )
        return sorted(map(codec.push_config, items), key=lambda c: (c.created_at, c.config.id or ""))

    def delete_push_config(self, task_id: str, config_id: str) -> None:
        self._t.delete(layout.push_config(task_id, config_id))

    def expire_push_configs(self, task_id: str, expires_at: int) -> None:
        for stored in self.list_push_configs(task_id):
            # A config deleted meanwhile stays deleted (the condition fails; nothing to expire).
            self._t.update(
                layout.push_config(task_id, str(stored.config.id)),
                "SET expiresAt = :at",
                "attribute_exists(PK)",
                {":at": expires_at},
            )

    def sweep_push_configs(self) -> int:
        """Configs whose task is gone (a config lives as long as its task) or whose expiry has passed; returns
        how many were removed."""
        now = int(time.time())
        removed = 0
        for bucket in range(layout.PUSH_BUCKETS):
            keys = self._t.query_all(
                IndexName=layout.PUSH_CONFIGS,
                KeyConditionExpression="GSI3PK = :bucket",
                values={":bucket": layout.push_bucket(bucket)},
            )
            alive: dict[str, bool] = {}
            for key in keys:
                task_id = str(key["PK"]).removeprefix("PUSH#")
                if task_id not in alive:
                    alive[task_id] = self._t.get(layout.task(task_id)) is not None
                expires = key.get("expiresAt")
                if not alive[task_id] or (expires is not None and int(expires) <= now):
                    self._t.delete({"PK": key["PK"], "SK": key["SK"]})
                    removed += 1
        return removed
