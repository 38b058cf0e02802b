"""Where files live: an owner's files are scoped to its subject, agent and context, and an agent's output
paths are relative and plain."""

from __future__ import annotations

import posixpath
import re
from urllib.parse import quote

from nylorun.domain.ids import Owner, subject_key

_SAFE_PATH = re.compile(r"^[A-Za-z0-9._\-/ ]{1,512}$")


def scope(owner: Owner, context_id: str) -> str:
    # Keys are scoped to subject, agent and context; the subject only as a digest.
    return f"{subject_key(owner.subject)}/{owner.agent}/{quote(context_id, safe='')}"


def clean_path(path: str) -> str:
    """An output path: relative, no `..`, a conservative character set."""
    normal = posixpath.normpath(path.strip().lstrip("/"))
    if not _SAFE_PATH.match(normal) or normal.startswith("..") or normal in (".", ""):
        raise ValueError(f"not a valid output path: {path!r}")
    return normal
