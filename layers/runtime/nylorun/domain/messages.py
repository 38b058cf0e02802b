"""Messages the Runtime writes on a task (not an Agent's words), and the turn totals they carry."""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Mapping
from typing import Any, Protocol

from nylorun.profile.extensions import TELEMETRY, Telemetry, with_extension
from nylorun.protocol.models import Message, Part, Role


class TaskRef(Protocol):
    """A task, as far as a message on it needs to know it."""

    @property
    def task_id(self) -> str: ...

    @property
    def context_id(self) -> str: ...


class Step(Protocol):
    """One journaled operation of a turn, as far as the turn's totals need to know it."""

    @property
    def kind(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def finished(self) -> bool: ...

    @property
    def result(self) -> Any: ...


def agent_text(task: TaskRef, text: str) -> Message:
    return Message(
        message_id=str(uuid.uuid4()),
        role=Role.AGENT,
        parts=[Part(text=text)],
        task_id=task.task_id,
        context_id=task.context_id,
    )


def current_trace_id(task_id: str) -> str:
    """The X-Ray trace id of this run (Lambda sets _X_AMZN_TRACE_ID); locally a stable one per task."""
    header = os.environ.get("_X_AMZN_TRACE_ID", "")
    for part in header.split(";"):
        if part.startswith("Root="):
            return part.removeprefix("Root=")
    digest = hashlib.sha256(task_id.encode()).hexdigest()
    return f"1-{digest[:8]}-{digest[8:32]}"


# A look at a delegate's task (engine/delegation.py) is journaled as an effect so a rerun reads what it
# saw, but it is waiting, not a step: how many looks a delegation takes depends on timing, not on the work.
DELEGATE_LOOK = "delegate:read"


def totals(journal: Mapping[int, Step], trace_id: str) -> Telemetry:
    """telemetry/v1 totals from the journal, so a replayed turn never counts anything twice."""
    usage = [e.result or {} for e in journal.values() if e.kind == "usage"]
    return Telemetry(
        steps=sum(1 for e in journal.values() if e.kind == "effect" and e.finished and e.name != DELEGATE_LOOK),
        tokens=sum(int(u.get("tokens", 0)) for u in usage),
        cost_usd=round(sum(float(u.get("costUsd", 0.0)) for u in usage), 6),
        trace_id=trace_id,
    )


def with_telemetry(message: Message, telemetry: Telemetry) -> Message:
    metadata, extensions = with_extension(message.metadata, message.extensions, TELEMETRY, telemetry)
    return message.model_copy(update={"metadata": metadata, "extensions": extensions})
