"""Who a task belongs to, and the task-id rule."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass

TASK_ID_NAMESPACE = uuid.UUID("6f1c2a8e-7f0b-4d0e-9a51-2b7d4c7e9a10")


@dataclass(frozen=True)
class Owner:
    """Who a task belongs to: the caller's subject and the Agent (Profile v2: who the caller acts for)."""

    subject: str
    agent: str


class _RuntimeKey:
    """The Runtime's own secret for keyed digests (docs/security.md: an unsalted sha256 of a subject is reversed by
    hashing candidate subjects, e.g. email addresses). Read on first use from the source the wiring gives it
    (Secrets Manager deployed; settings locally). Never configured (a library user's in-memory store): a key made
    for this process, which is as private but not shared with other processes."""

    def __init__(self) -> None:
        self._source: Callable[[], str] = lambda: secrets.token_urlsafe(32)
        self._value: bytes | None = None
        self._lock = threading.Lock()

    def use(self, source: Callable[[], str]) -> None:
        with self._lock:
            self._source, self._value = source, None

    def digest(self, purpose: str, value: str) -> str:
        if self._value is None:
            with self._lock:
                if self._value is None:
                    self._value = self._source().encode()
        # One key, several uses: the purpose keeps a page token's MAC from being a subject's digest.
        return hmac.new(self._value, f"{purpose}\n{value}".encode(), hashlib.sha256).hexdigest()


RUNTIME_KEY = _RuntimeKey()


def use_runtime_key(source: Callable[[], str]) -> None:
    """Where the Runtime's key comes from (the wiring, once per process). Item keys, S3 keys and task ids derive
    from it, so it must stay the same for the life of the data: changing it orphans every stored task."""
    RUNTIME_KEY.use(source)


def subject_key(subject: str) -> str:
    # Subjects can hold any character (and are personal data): keys carry a keyed digest, never the subject.
    return RUNTIME_KEY.digest("subject", subject)[:32]


def derive_task_id(owner: Owner, context_id: str, turn: int) -> str:
    """Profile v2: one task id per turn, made from the context and the turn; opaque to callers."""
    name = f"{owner.agent}\n{subject_key(owner.subject)}\n{context_id}\n{turn}"
    return str(uuid.uuid5(TASK_ID_NAMESPACE, name))
