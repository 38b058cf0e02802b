"""DynamoDB's Time to Live on one machine: moto keeps a table's TTL setting but never deletes an expired item.

`TtlSweeper` does what DynamoDB's TTL does, on a timer: it deletes the items whose TTL attribute (`expiresAt`, the
template's) has passed, each with an ordinary conditional DeleteItem, so the stream gets its REMOVE with the old image.
DynamoDB marks its own deletions with a `userIdentity` (type Service, principal dynamodb.amazonaws.com:
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/time-to-live-ttl-streams.html); moto's records carry
none, so the stream pollers add it to the REMOVE of every key this sweeper took (`TTL_REMOVED`). Deployed, TTL deletes
within a few days of the expiry; here within `interval` seconds.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from nylorun.observability import logger

from nylorun_local.activity import Activity
from nylorun_local.aws import LocalAws

TTL_IDENTITY = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
TTL_ATTRIBUTE = "expiresAt"


class _Removed:
    """The keys (as the stream's Keys show them) the local TTL deleted."""

    def __init__(self) -> None:
        self._keys: set[str] = set()
        self._lock = threading.Lock()

    @staticmethod
    def _name(keys: dict[str, Any]) -> str:
        return repr(sorted((k, repr(v)) for k, v in keys.items()))

    def add(self, keys: dict[str, Any]) -> None:
        with self._lock:
            self._keys.add(self._name(keys))

    def took(self, keys: dict[str, Any]) -> bool:
        with self._lock:
            return self._name(keys) in self._keys


TTL_REMOVED = _Removed()


class TtlSweeper:
    """Every `interval` seconds, deletes the table's expired items; `woken` is bumped after each sweep that deleted
    something (the retention poller sleeps on it instead of on every write)."""

    def __init__(self, aws: LocalAws, table_name: str, interval: float, woken: Activity) -> None:
        self._aws = aws
        self._table = table_name
        self._interval = interval
        self._woken = woken
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ttl-sweeper", daemon=True)

    def start(self) -> TtlSweeper:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def sweep(self) -> int:
        """Delete every item whose TTL has passed; returns how many."""
        now = int(time.time())
        client = self._aws.client("dynamodb")
        removed = 0
        for keys in self._aws.expired_keys(self._table, TTL_ATTRIBUTE, now):
            TTL_REMOVED.add(keys)  # before the delete: its stream record is then known as the TTL's
            try:
                client.delete_item(
                    TableName=self._table, Key=keys, ConditionExpression=f"{TTL_ATTRIBUTE} <= :now",
                    ExpressionAttributeValues={":now": {"N": str(now)}},
                )
                removed += 1
            except client.exceptions.ConditionalCheckFailedException:
                pass  # changed meanwhile: TTL deletes only what is still expired
        if removed:
            self._woken.bump()
        return removed

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.sweep()
            except Exception:  # noqa: BLE001 - keep sweeping: a failure here must not stop TTL for good
                logger.exception("local TTL sweep failed; retrying")
