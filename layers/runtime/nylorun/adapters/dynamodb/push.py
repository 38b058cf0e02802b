"""Push notification configs of tasks, and the sweep of configs whose task is gone.

The sweep reads the sparse `PushConfigs` index (keys and `expiresAt`; only config items carry its keys), one
query per bucket, never a Scan of the table: it reads configs and nothing else, then removes those whose task
item is gone or whose expiry has passed (the table's TTL removes expired items too, but only within days).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

from nylorun.adapters.dynamodb import codec, layout
from nylorun.adapters.dynamodb.table import Table, aws
from nylorun.ports import PUSH_CREDENTIAL, Sealer, StoredPushConfig


class PushConfigs:
    _t: Table
    _sealer: Sealer | None

    def put_push_config(self, task_id: str, config: StoredPushConfig) -> None:
        """The config's credentials and token are stored sealed (only the push function opens them: the api
        never answers with them, the turn function cannot read the item at all)."""
        if self._sealer is not None:
            seal, wire = self._sealer.seal, config.config
            auth = wire.authentication
            sealed = wire.model_copy(update={
                "token": seal(wire.token, PUSH_CREDENTIAL, task_id) if wire.token else wire.token,
                "authentication": auth.model_copy(update={"credentials": seal(auth.credentials, PUSH_CREDENTIAL, task_id)})
                if auth is not None and auth.credentials else auth,
            })  # fmt: skip
            config = replace(config, config=sealed)
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

    def expire_push_configs(self, task_id: str, expires_at: int, config_ids: Sequence[str] | None = None) -> None:
        ids = [str(c.config.id) for c in self.list_push_configs(task_id)] if config_ids is None else config_ids
        for config_id in ids:
            # A config deleted meanwhile stays deleted (the condition fails; nothing to expire).
            self._t.update(
                layout.push_config(task_id, config_id),
                "SET expiresAt = :at",
                "attribute_exists(PK)",
                {":at": expires_at},
            )

    def push_configs_after(self, task_id: str, after: str | None, limit: int) -> list[StoredPushConfig]:
        # One page of the key range: a fan-out step reads only the configs it queues (not all of them each step).
        start = layout.push_config(task_id, after)["SK"] if after is not None else "CFG#"
        with aws("query"):
            out = self._t.db.query(
                TableName=self._t.name,
                KeyConditionExpression="PK = :pk AND SK > :after",
                ExpressionAttributeValues=codec.to_item({":pk": layout.push_pk(task_id), ":after": start}),
                ConsistentRead=True,
                Limit=limit,
            )
        return [codec.push_config(codec.from_item(item)) for item in out.get("Items", [])]

    def fan_out_cursor(self, task_id: str, event_id: str) -> str | None:
        item = self._t.get(layout.fan_out(task_id, event_id))
        return str(item["configId"]) if item else None

    def set_fan_out_cursor(self, task_id: str, event_id: str, after: str | None, expires_at: int) -> None:
        key = layout.fan_out(task_id, event_id)
        if after is None:
            self._t.delete(key)
        else:
            self._t.put({**key, "configId": after, "expiresAt": expires_at})

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
