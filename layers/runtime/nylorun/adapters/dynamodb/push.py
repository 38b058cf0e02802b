"""Push notification configs of tasks, and the sweep of configs whose task is gone.

A config counts against its task (`pushConfigs` on the task item) and, while the task is open, against its subject
(the subject's quota item): each add and delete changes them in one transaction, conditional on the count and the
state it read, so racing callers never pass a quota (domain/quotas.py).

The sweep reads the sparse `PushConfigs` index (keys and `expiresAt`; only config items carry its keys), one
query per bucket, never a Scan of the table: it reads configs and nothing else, then removes those whose task
item is gone or whose expiry has passed (the table's TTL removes expired items too, but only within days).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from nylorun.adapters.dynamodb import codec, layout
from nylorun.adapters.dynamodb.table import RETRY, Canceled, Table, Transaction, aws
from nylorun.domain.quotas import QuotaExceeded, Quotas
from nylorun.ports import PUSH_CREDENTIAL, Owner, Sealer, StoredPushConfig
from nylorun.protocol.models import TaskState

# The task's count changes only while it holds the count (and the state) that was read.
_SAME_TASK = "#state = :state AND (attribute_not_exists(pushConfigs) OR pushConfigs = :configs)"
# A config deleted meanwhile stays deleted: the condition fails, nothing to expire (no item made of a key).
_EXPIRE = ("SET expiresAt = :at", "attribute_exists(PK)")
# TransactWriteItems: at most 100 actions a call
# (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html).
_TRANSACTION_MOST = 100


def sealed(sealer: Sealer | None, task_id: str, config: StoredPushConfig) -> StoredPushConfig:
    """The config as it is stored: its credentials and token sealed (only the push function opens them: the api never
    answers with them, the turn function cannot read the item at all); as it is without a sealer (no key)."""
    if sealer is None:
        return config
    seal, wire = sealer.seal, config.config
    auth = wire.authentication
    return replace(config, config=wire.model_copy(update={
        "token": seal(wire.token, PUSH_CREDENTIAL, task_id) if wire.token else wire.token,
        "authentication": auth.model_copy(update={"credentials": seal(auth.credentials, PUSH_CREDENTIAL, task_id)})
        if auth is not None and auth.credentials else auth,
    }))  # fmt: skip


class PushConfigs:
    _t: Table
    _sealer: Sealer | None
    _quotas: Quotas

    def put_push_config(self, task_id: str, config: StoredPushConfig) -> None:
        """The config is stored sealed (`sealed`); a new one counts against its task and its subject in the
        transaction that writes it (domain/quotas.py)."""
        item = codec.push_item(task_id, sealed(self._sealer, task_id, config))
        key = layout.push_config(task_id, str(config.config.id))
        quotas = self._quotas
        for _ in RETRY.attempts(f"push configs of task {task_id} kept changing"):
            head = self._t.get(layout.task(task_id))
            if head is None:
                self._t.put(item)  # no task, nothing to count against: the sweep removes the config
                return
            if self._t.get(key) is not None:
                try:  # a replaced config (same id) counts once
                    self._t.transaction().put("config", item, "attribute_exists(PK)").write()
                    return
                except Canceled:
                    continue  # deleted meanwhile: add it
            configs = int(head.get("pushConfigs", 0))
            if configs >= quotas.push_configs_per_task:
                raise QuotaExceeded("pushConfigsPerTask", quotas.push_configs_per_task)
            txn = self._counted(self._t.transaction().put("config", item, "attribute_not_exists(PK)"), head, +1)
            try:
                txn.write()
                return
            except Canceled as canceled:
                if canceled.failed("subject"):
                    raise QuotaExceeded("pushConfigsPerSubject", quotas.push_configs_per_subject) from None
                continue  # the config, the task's count or its state moved: read again

    def get_push_config(self, task_id: str, config_id: str) -> StoredPushConfig | None:
        item = self._t.get(layout.push_config(task_id, config_id))
        return codec.push_config(item) if item else None

    def list_push_configs(self, task_id: str) -> list[StoredPushConfig]:
        items = self._t.query_all(
            KeyConditionExpression="PK = :pk", values={":pk": layout.push_pk(task_id)}, ConsistentRead=True
        )
        return sorted(map(codec.push_config, items), key=lambda c: (c.created_at, c.config.id or ""))

    def delete_push_config(self, task_id: str, config_id: str) -> None:
        key = layout.push_config(task_id, config_id)
        for _ in RETRY.attempts(f"push configs of task {task_id} kept changing"):
            if self._t.get(key) is None:
                return  # idempotent: absent is fine
            head = self._t.get(layout.task(task_id))
            if head is None:
                self._t.delete(key)
                return
            try:
                self._counted(self._t.transaction().delete("config", key, "attribute_exists(PK)"), head, -1).write()
                return
            except Canceled:
                continue

    def _counted(self, txn: Transaction, head: dict[str, Any], change: int) -> Transaction:
        """`txn` with the task's count changed by `change` and, while the task is open, its subject's (adding:
        only under the subject's quota)."""
        txn.update(
            "task",
            layout.task(str(head["taskId"])),
            "ADD pushConfigs :change",
            _SAME_TASK,
            {":change": change, ":state": head["state"], ":configs": int(head.get("pushConfigs", 0))},
            {"#state": "state"},
        )
        if not TaskState(head["state"]).terminal:
            txn.update(
                "subject",
                layout.subject_quota(Owner(subject=str(head["subject"]), agent=str(head["agent"]))),
                "ADD pushConfigs :change",
                "attribute_not_exists(pushConfigs) OR pushConfigs < :most" if change > 0 else None,
                {":change": change} | ({":most": self._quotas.push_configs_per_subject} if change > 0 else {}),
            )
        return txn

    def expire_push_configs(self, task_id: str, expires_at: int, config_ids: Sequence[str] | None = None) -> None:
        ids = [str(c.config.id) for c in self.list_push_configs(task_id)] if config_ids is None else config_ids
        # One TransactWriteItems per (at most) 100 configs, not one UpdateItem each: a fan-out step's ten configs
        # cost one round trip instead of ten (twice the write units; the push function's time is the dearer part).
        for start in range(0, len(ids), _TRANSACTION_MOST):
            chunk = ids[start : start + _TRANSACTION_MOST]
            txn = self._t.transaction()
            for n, config_id in enumerate(chunk):
                txn.update(str(n), layout.push_config(task_id, config_id), *_EXPIRE, {":at": expires_at})
            try:
                txn.write()
            except Canceled:  # a config deleted (or changed) meanwhile: one at a time, each on its own condition
                for config_id in chunk:
                    self._t.update(layout.push_config(task_id, config_id), *_EXPIRE, {":at": expires_at})

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
                if not alive[task_id]:
                    self._t.delete({"PK": key["PK"], "SK": key["SK"]})
                    removed += 1
                elif expires is not None and int(expires) <= now:
                    self.delete_push_config(task_id, str(key["SK"]).removeprefix("CFG#"))  # its task's count too
                    removed += 1
        return removed
