"""Decodes a stored task leniently: an item that no longer validates is left out of the read and logged, so one
bad item (written by an older version, or by hand) never takes down GetTask, ListTasks, CancelTask or `show`.

What is left out is logged as a warning with the task id, the item (`plan step 2`, `history MSG#0003`) and the
fields that failed, never the item's content (a message or an artifact may hold a caller's secrets).

Decision: a status that no longer validates reads as what of it still does. A status whose message fails reads
without its message (its state and timestamp stay); a status whose state is unknown reads in the task item's
`state` attribute (written with every status, as its `statusTs` is), and when that is unknown too, as WORKING: not terminal, so the
caller can still cancel the task, and no read ever ends a task.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from nylorun.observability import logger
from nylorun.ports import TaskRecord
from nylorun.profile.extensions import Interaction, PlanStep
from nylorun.protocol.models import Artifact, Message, TaskState, TaskStatus

M = TypeVar("M", bound=BaseModel)
Raw = str | dict[str, Any] | None  # an item's wire JSON, as stored (text) or as a plain value


def one(model: type[M], raw: Raw, task_id: str, item: str) -> M | None:
    """`raw` as a `model`, or None (logged) when it no longer validates."""
    try:
        return model.model_validate_json(raw) if isinstance(raw, str) else model.model_validate(raw)
    except ValidationError as error:
        fields = sorted({".".join(map(str, e["loc"])) or "(whole item)" for e in error.errors(include_input=False)})
        logger.warning("stored item left out of a read", extra={"task_id": task_id, "item": item, "fields": fields})
        return None


def many(model: type[M], items: Iterable[tuple[str, Raw]], task_id: str) -> list[M]:
    """Each (name, raw) item that validates, in order; the others left out (logged)."""
    return [found for item, raw in items if (found := one(model, raw, task_id, item)) is not None]


def messages(items: Iterable[tuple[str, Raw]], task_id: str) -> list[Message]:
    return many(Message, items, task_id)


def artifacts(items: Iterable[tuple[str, Raw]], task_id: str) -> list[Artifact]:
    return many(Artifact, items, task_id)


def plan(raw: str | list[Any] | None, task_id: str) -> list[PlanStep]:
    """The plan's steps that still validate (progress/v1)."""
    steps = _json(raw, task_id, "plan") if isinstance(raw, str) else raw
    if steps is not None and not isinstance(steps, list):
        logger.warning("stored item left out of a read", extra={"task_id": task_id, "item": "plan", "fields": []})
        steps = None
    return many(PlanStep, ((f"plan step {i}", s) for i, s in enumerate(steps or [])), task_id)


def interaction(raw: Raw, task_id: str) -> Interaction | None:
    return one(Interaction, raw, task_id, "interaction") if raw else None


def status(raw: Raw, task_id: str, state: str | None = None, timestamp: str | None = None) -> TaskStatus:
    """The task's status, or what of it still validates (module docstring); `state` and `timestamp` are the task
    item's own, written with every status."""
    found = one(TaskStatus, raw, task_id, "status")
    if found is not None:
        return found
    data = _json(raw, task_id, "status") if isinstance(raw, str) else raw
    data = data if isinstance(data, dict) else {}
    timestamp = data["timestamp"] if isinstance(data.get("timestamp"), str) else timestamp
    return TaskStatus(state=_state(data.get("state")) or _state(state) or TaskState.WORKING, timestamp=timestamp)


def metadata(raw: str | None, task_id: str) -> dict[str, Any] | None:
    """The task's metadata (a JSON object), or None (logged) when it is not one."""
    found = _json(raw, task_id, "metadata") if raw else None
    return found if isinstance(found, dict) else None


def _state(value: Any) -> TaskState | None:
    return TaskState(value) if value in TaskState._value2member_map_ else None


def _json(raw: str | None, task_id: str, item: str) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        logger.warning("stored item left out of a read", extra={"task_id": task_id, "item": item, "fields": []})
        return None


def wire(model: BaseModel) -> dict[str, Any] | None:
    """A model held in memory as its wire JSON would store it; None when even that fails (an object built with
    `model_construct` or `model_copy(update=...)` holding what no JSON can)."""
    try:
        data = model.model_dump(mode="json", by_alias=True, exclude_none=True, warnings=False)
    except (ValueError, TypeError):  # pydantic's serialization errors are ValueErrors
        return None
    return data if isinstance(data, dict) else None


def readable(record: TaskRecord, status_ts: str | None, sound: Callable[[Any], bool]) -> TaskRecord:
    """A record the in-memory store holds, as the DynamoDB store reads it back: each item through its wire JSON
    and the lenient decode above (both stores leave out the same items). An item for which `sound` is true (one
    the store itself decoded from its wire JSON) is kept as it is."""
    task_id = record.task_id

    def checked(model: type[M], obj: Any, item: str) -> M | None:
        return obj if sound(obj) else one(model, wire(obj), task_id, item)

    if not sound(record.status):
        record.status = status(wire(record.status), task_id, None, status_ts)
    if not all(map(sound, record.plan)):
        record.plan = plan([wire(step) for step in record.plan], task_id)
    if record.interaction is not None:
        record.interaction = checked(Interaction, record.interaction, "interaction")
    record.history = [
        found for i, m in enumerate(record.history) if (found := checked(Message, m, f"history message {i}"))
    ]
    record.artifacts = [
        kept for i, a in enumerate(record.artifacts) if (kept := checked(Artifact, a, f"artifact {i}"))
    ]
    return record


__all__ = ["artifacts", "interaction", "many", "messages", "metadata", "one", "plan", "readable", "status", "wire"]
