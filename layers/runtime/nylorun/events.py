"""Runtime events, made from the table's change stream (see docs/events.md).

Events are derived from DynamoDB stream records, so an event exists only for a change that was committed,
and none is skipped (the stream is retried until the publisher succeeds): duplicates are possible, gaps are
not. Each event has a stable `eventId`, so consumers can drop duplicates.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from boto3.dynamodb.types import TypeDeserializer

from nylorun.profile.extensions import TELEMETRY
from nylorun.protocol.models import TaskState

SOURCE = "nylorun.runtime"
STATUS_CHANGED = "Task Status Changed"
PLAN_UPDATED = "Task Plan Updated"
ARTIFACT_UPDATED = "Task Artifact Updated"
TURN_USAGE = "Turn Usage"
# EventBridge takes at most 256 KB an entry; an artifact bigger than this is announced without its parts.
MAX_DETAIL_BYTES = 200_000

_de = TypeDeserializer()


@dataclass(frozen=True)
class RuntimeEvent:
    detail_type: str
    detail: dict[str, Any]


def _image(record: dict[str, Any], which: str) -> dict[str, Any] | None:
    image = record.get("dynamodb", {}).get(which)
    return {k: _de.deserialize(v) for k, v in image.items()} if image else None


def _event_id(*parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


def _base(task: dict[str, Any]) -> dict[str, Any]:
    return {
        "subject": task["subject"],
        "agent": task["agent"],
        "taskId": task["taskId"],
        "contextId": task["contextId"],
        "turn": int(task["turn"]),
    }


def from_stream_record(record: dict[str, Any], heads: dict[str, dict[str, Any]] | None = None) -> list[RuntimeEvent]:
    """The events one stream record stands for. `heads` maps task ids to task items, for artifact records
    (whose item does not carry the owner); missing heads are looked up by the caller."""
    new, old = _image(record, "NewImage"), _image(record, "OldImage")
    if new is None:
        return []  # a removal (TTL sweep) is not an A2A event
    sk = str(new.get("SK", ""))
    if sk == "TASK" and "status" in new:
        return _task_events(new, old)
    if sk.startswith("ART#") and "body" in new and (old is None or old.get("body") != new.get("body")):
        task_id = str(new["PK"]).removeprefix("TASK#")
        head = (heads or {}).get(task_id)
        if head is None:
            return []
        artifact = json.loads(new["body"])
        detail = {
            **_base(head),
            "eventId": _event_id(task_id, "artifact", hashlib.sha256(new["body"].encode()).hexdigest()),
            "artifactUpdate": {"taskId": task_id, "contextId": head["contextId"], "artifact": artifact},
        }
        if len(json.dumps(detail)) > MAX_DETAIL_BYTES:
            artifact = {k: v for k, v in artifact.items() if k != "parts"} | {"parts": [{"text": "(too large)"}]}
            detail["artifactUpdate"]["artifact"] = artifact
        return [RuntimeEvent(ARTIFACT_UPDATED, detail)]
    return []


def _task_events(new: dict[str, Any], old: dict[str, Any] | None) -> list[RuntimeEvent]:
    events: list[RuntimeEvent] = []
    base = _base(new)
    if old is None or old.get("status") != new.get("status"):
        status = json.loads(new["status"])
        if len(new["status"]) > MAX_DETAIL_BYTES and status.get("message"):
            # EventBridge takes at most 256 KB an event: a huge status message is announced without its parts.
            status["message"] = {**status["message"], "parts": [{"text": "(too large; read it with GetTask)"}]}
        events.append(
            RuntimeEvent(
                STATUS_CHANGED,
                {
                    **base,
                    "eventId": _event_id(new["taskId"], "status", str(new.get("version"))),
                    "state": new["state"],
                    "statusUpdate": {"taskId": new["taskId"], "contextId": new["contextId"], "status": status},
                },
            )
        )
    if json.loads(new.get("plan") or "[]") and (old is None or old.get("plan") != new.get("plan")):
        events.append(
            RuntimeEvent(
                PLAN_UPDATED,
                {
                    **base,
                    "eventId": _event_id(new["taskId"], "plan", str(new.get("version"))),
                    "plan": json.loads(new["plan"]),
                },
            )
        )
    state = TaskState(new["state"])
    was_terminal = old is not None and TaskState(old["state"]).terminal
    if state.terminal and not was_terminal:
        message = json.loads(new["status"]).get("message") or {}
        telemetry = (message.get("metadata") or {}).get(TELEMETRY, {})
        events.append(
            RuntimeEvent(
                TURN_USAGE,
                {
                    **base,
                    "eventId": _event_id(new["taskId"], "usage"),
                    "state": state.value,
                    "steps": int(telemetry.get("steps", 0)),
                    "tokens": int(telemetry.get("tokens", 0)),
                    "costUsd": float(telemetry.get("costUsd", 0.0)),
                    "traceId": telemetry.get("traceId", ""),
                },
            )
        )
    return events
