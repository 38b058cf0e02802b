"""Version numbers of the files an agent writes."""

from __future__ import annotations

from nylorun.adapters.dynamodb import layout
from nylorun.adapters.dynamodb.table import RETRY, Canceled, Table


class FileVersions:
    _t: Table

    def file_version(self, scope: str, path: str, write_key: str) -> int:
        """The version number a write at `path` gets: 1, 2, ... per path and scope. Idempotent per
        `write_key` (a retried write keeps its number)."""
        for _ in RETRY.attempts(f"file version for {path} kept changing"):
            done = self._t.get(layout.file_write(scope, write_key))
            if done:
                return int(done["version"])
            head = self._t.get(layout.file_path(scope, path))
            current = int(head["version"]) if head else 0
            txn = (
                self._t.transaction()
                .update(
                    "path",
                    layout.file_path(scope, path),
                    "SET version = :next",
                    "version = :v" if head else "attribute_not_exists(PK)",
                    {":next": current + 1, **({":v": current} if head else {})},
                )
                .put("write", {**layout.file_write(scope, write_key), "version": current + 1},
                     "attribute_not_exists(PK)")
            )
            try:
                txn.write()
                return current + 1
            except Canceled:
                continue
        raise AssertionError("unreachable")
