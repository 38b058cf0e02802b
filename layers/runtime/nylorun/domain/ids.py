"""Who a task belongs to, and the task-id rule."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass

TASK_ID_NAMESPACE = uuid.UUID("6f1c2a8e-7f0b-4d0e-9a51-2b7d4c7e9a10")


@dataclass(frozen=True)
class Owner:
    """Who a task belongs to: the caller's subject and the Agent (Profile v2: who the caller acts for)."""

    subject: str
    agent: str


def subject_key(subject: str) -> str:
    # Subjects can hold any character (and are personal data): keys carry a digest, never the subject.
    return hashlib.sha256(subject.encode()).hexdigest()[:32]


def derive_task_id(owner: Owner, context_id: str, turn: int) -> str:
    """Profile v2: one task id per turn, made from the context and the turn; opaque to callers."""
    name = f"{owner.agent}\n{subject_key(owner.subject)}\n{context_id}\n{turn}"
    return str(uuid.uuid5(TASK_ID_NAMESPACE, name))
