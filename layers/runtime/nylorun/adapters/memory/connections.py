"""The `ConnectionStore` port in memory: the same contract as the DynamoDB one, under one lock."""

from __future__ import annotations

import copy
import threading
import time
from collections import Counter
from typing import TYPE_CHECKING

from nylorun.domain.connections import (
    CONNECTION_UNUSED_SECONDS,
    ConnectionKey,
    ConnectionStart,
    StoredConnection,
)

if TYPE_CHECKING:
    from nylorun.ports.connections import ConnectionStore


class InMemoryConnectionStore:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._connections: dict[ConnectionKey, StoredConnection] = {}
        self._starts: dict[str, ConnectionStart] = {}

    def get_connection(self, key: ConnectionKey) -> StoredConnection | None:
        with self._lock:
            found = self._connections.get(key)
            if found is not None and found.used_at + CONNECTION_UNUSED_SECONDS < time.time():
                return None  # expired, as the table's TTL would have deleted it
            return copy.copy(found)

    def put_connection(self, connection: StoredConnection, *, expect_version: int | None) -> bool:
        with self._lock:
            stored = self._connections.get(connection.key)
            if expect_version is not None and (stored.version if stored else None) != expect_version:
                return False
            written = copy.copy(connection)
            written.version = (stored.version if stored else 0) + 1
            self._connections[connection.key] = written
            return True

    def touch_connection(self, key: ConnectionKey, used_at: int) -> None:
        with self._lock:
            if key in self._connections:
                self._connections[key].used_at = used_at

    def delete_connection(self, key: ConnectionKey) -> StoredConnection | None:
        with self._lock:
            return self._connections.pop(key, None)

    def list_connections(self, subject: str) -> list[StoredConnection]:
        with self._lock:
            return [copy.copy(c) for k, c in sorted(self._connections.items(), key=lambda kc: (kc[0].agent, kc[0].provider))
                    if k.subject == subject]

    def count_connections(self) -> dict[tuple[str, str], int]:
        with self._lock:
            return dict(Counter((key.agent, key.provider) for key in self._connections))

    def put_start(self, start: ConnectionStart) -> None:
        with self._lock:
            self._starts[start.state_digest] = start

    def take_start(self, state_digest: str, now: int) -> ConnectionStart | None:
        with self._lock:
            start = self._starts.pop(state_digest, None)
        return start if start is not None and start.expires_at > now else None


if TYPE_CHECKING:  # mypy fails here when the port changes and this adapter does not follow
    _store: ConnectionStore = InMemoryConnectionStore()
