"""Runtime events, made from the table's changes (see docs/events.md).

Events are derived from DynamoDB stream records, so an event exists only for a change that was committed,
and none is skipped (the stream is retried until the publisher succeeds): duplicates are possible, gaps are
not. Each event has a stable `eventId`, so consumers can drop duplicates. The store's adapter decodes stream
records into the typed changes below (`TaskChanged`, `ArtifactChanged`); this module never sees DynamoDB
attribute values.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from nylorun.profile.extensions import TELEMETRY
from nylorun.protocol.models import TaskState

SOURCE = "nylorun.runtime"
STATUS_CHANGED = "Task Status Changed"
PLAN_UPDATED = "Task Plan Updated"
ARTIFACT_UPDATED = "Task Artifact Updated"
TURN_USAGE = "Turn Usage"
# EventBridge takes at most 256 KB an entry; an artifact bigger than this is announced without its parts.
MAX_DETAIL_BYTES = 200_000

@dataclass(frozen=True)
class RuntimeEvent:
    detail_type: str
    detail: dict[str, Any]


@dataclass(frozen=True)
class TaskImage:
    """A task item as a change shows it: owner, place, state, and the status and plan as wire JSON."""

    task_id: str
    context_id: str
    subject: str
    agent: str
    turn: int
    state: TaskState
    status: str
    plan: str | None = None
    version: int = 0
    # How many push configs the task had as of this image (the task item's `pushConfigs`: each config's add and
    # delete changes it in the same transaction); None for an item from before the count was kept.
    push_configs: int | None = None

    @classmethod
    def from_head(cls, head: dict[str, Any]) -> TaskImage:
        """From the task's plain values (`TaskStore.head`, or a decoded stream image)."""
        return cls(
            task_id=str(head["taskId"]),
            context_id=str(head["contextId"]),
            subject=str(head["subject"]),
            agent=str(head["agent"]),
            turn=int(head["turn"]),
            state=TaskState(head["state"]),
            status=str(head["status"]),
            plan=str(head["plan"]) if head.get("plan") else None,
            version=int(head.get("version", 0)),
            push_configs=int(head["pushConfigs"]) if head.get("pushConfigs") is not None else None,
        )


@dataclass(frozen=True)
class TaskChanged:
    new: TaskImage
    old: TaskImage | None = None


@dataclass(frozen=True)
class ArtifactChanged:
    task_id: str
    body: str  # the artifact's wire JSON
    old_body: str | None = None


Change = TaskChanged | ArtifactChanged


# How many of its latest statuses a task item remembers (as digests, `statusLog`): the push function delivers a
# status event only when the table vouches for it (it signs what the table says, never what an event put on the
# bus by someone else says: docs/security.md). A fan-out runs seconds after the write, so 64 changes is a wide
# margin.
STATUS_LOG_SIZE = 64


def published_status(status_json: str) -> dict[str, Any]:
    """A stored status (wire JSON) as its event carries it: EventBridge takes at most 256 KB an event, so a huge
    status message is announced without its parts."""
    status: dict[str, Any] = json.loads(status_json)
    if len(status_json) > MAX_DETAIL_BYTES and status.get("message"):
        status["message"] = {**status["message"], "parts": [{"text": "(too large; read it with GetTask)"}]}
    return status


def status_digest(status: dict[str, Any]) -> str:
    """A status's fingerprint, the same for the stored status and its event after any JSON round trip."""
    canonical = json.dumps(status, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def logged(log: list[str] | None, status_json: str) -> list[str]:
    """A task item's `statusLog` once `status_json` is its status: the latest STATUS_LOG_SIZE digests."""
    return [*(log or []), status_digest(published_status(status_json))][-STATUS_LOG_SIZE:]


def _event_id(*parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


def _base(task: TaskImage) -> dict[str, Any]:
    return {
        "subject": task.subject,
        "agent": task.agent,
        "taskId": task.task_id,
        "contextId": task.context_id,
        "turn": task.turn,
    }


def from_change(change: Change | None, head: TaskImage | None = None) -> list[RuntimeEvent]:
    """The events one change stands for. `head` is the task of an artifact change (its item does not carry the
    owner); without it an artifact change makes no event."""
    if isinstance(change, TaskChanged):
        return _task_events(change.new, change.old)
    if isinstance(change, ArtifactChanged) and change.body != change.old_body and head is not None:
        artifact = json.loads(change.body)
        detail = {
            **_base(head),
            "eventId": _event_id(change.task_id, "artifact", hashlib.sha256(change.body.encode()).hexdigest()),
            "artifactUpdate": {"taskId": change.task_id, "contextId": head.context_id, "artifact": artifact},
        }
        if len(json.dumps(detail)) > MAX_DETAIL_BYTES:
            artifact = {k: v for k, v in artifact.items() if k != "parts"} | {"parts": [{"text": "(too large)"}]}
            detail["artifactUpdate"]["artifact"] = artifact
        return [RuntimeEvent(ARTIFACT_UPDATED, detail)]
    return []


def _task_events(new: TaskImage, old: TaskImage | None) -> list[RuntimeEvent]:
    events: list[RuntimeEvent] = []
    base = _base(new)
    if old is None or old.status != new.status:
        status = published_status(new.status)
        events.append(
            RuntimeEvent(
                STATUS_CHANGED,
                {
                    **base,
                    "eventId": _event_id(new.task_id, "status", str(new.version)),
                    "state": new.state.value,
                    "statusUpdate": {"taskId": new.task_id, "contextId": new.context_id, "status": status},
                },
            )
        )
    if json.loads(new.plan or "[]") and (old is None or old.plan != new.plan):
        events.append(
            RuntimeEvent(
                PLAN_UPDATED,
                {
                    **base,
                    "eventId": _event_id(new.task_id, "plan", str(new.version)),
                    "plan": json.loads(new.plan or "[]"),
                },
            )
        )
    state = new.state
    was_terminal = old is not None and old.state.terminal
    if state.terminal and not was_terminal:
        message = json.loads(new.status).get("message") or {}
        telemetry = (message.get("metadata") or {}).get(TELEMETRY, {})
        events.append(
            RuntimeEvent(
                TURN_USAGE,
                {
                    **base,
                    "eventId": _event_id(new.task_id, "usage"),
                    "state": state.value,
                    "steps": int(telemetry.get("steps", 0)),
                    "tokens": int(telemetry.get("tokens", 0)),
                    "costUsd": float(telemetry.get("costUsd", 0.0)),
                    "traceId": telemetry.get("traceId", ""),
                },
            )
        )
    return events
