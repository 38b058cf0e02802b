"""File versions: the number each write at a path gets."""

from __future__ import annotations

from nylorun.adapters.memory.state import State


class FileVersions(State):
    """File versions per path and scope (docs/writing/files.md)."""

    def file_version(self, scope: str, path: str, write_key: str) -> int:
        """The version a write at `path` gets: 1, 2, ... per path and scope; a retried write (same key) keeps
        its number."""
        with self._lock:
            if (scope, write_key) not in self._file_writes:
                version = self._file_heads.get((scope, path), 0) + 1
                self._file_heads[(scope, path)] = version
                self._file_writes[(scope, write_key)] = version
            return self._file_writes[(scope, write_key)]
