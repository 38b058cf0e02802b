"""The file ports: the bucket that keeps files, and the fetcher of callers' `url` files."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class StoredObject:
    key: str
    version_id: str
    size: int
    sha256: str


class FileStore(Protocol):
    def put(self, key: str, data: bytes, media_type: str) -> StoredObject: ...

    def get(self, key: str, version_id: str) -> bytes: ...

    def presign(self, key: str, version_id: str, expires_seconds: int, filename: str | None = None) -> str: ...

    def mark_refused(self, key: str, version_id: str) -> None:
        """This version belongs to a refused request: the bucket's lifecycle expires it (REFUSED_TAG)."""
        ...

    def delete_versions(self, versions: Sequence[tuple[str, str]]) -> None:
        """Delete these versions (key, version id) for good (an expired task's files); absent ones are fine."""
        ...


# The tag a refused request's files carry; template.yaml's lifecycle rule `refused-inputs` expires them.
REFUSED_TAG = ("nylorun-refused", "true")


class FileTooLarge(Exception):
    """A fetched file is larger than the `max_bytes` it was fetched with."""


class Fetcher(Protocol):
    def get(self, url: str, max_bytes: int) -> tuple[bytes, str | None]:
        """The body and its Content-Type; FileTooLarge over `max_bytes`."""
        ...
