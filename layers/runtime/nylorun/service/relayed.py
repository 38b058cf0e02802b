"""Close a delegating task's relayed connection when its delegate goes on without it
(docs/writing/connections.md).

The person connects the delegate's account in the browser, at the delegate: its callback resumes the delegate's
turn, and no answer ever reaches the delegating task, which shows the same connection as its own interaction
(engine/delegation.py). The delegate's next signed push says it moved on; the interaction is then answered with
MOVED_ON (never `approved`: nothing is handed back to the delegate) and the delegating turn reads the delegate again.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from nylorun.engine.delegation import ANSWER, ENDED, MOVED_ON, READ, SEND
from nylorun.engine.replay import opaque_id
from nylorun.observability import logger
from nylorun.ports import JournalEntry, TaskRecord
from nylorun.profile.extensions import INTERACTIONS
from nylorun.protocol.errors import A2AError
from nylorun.protocol.models import JsonObject, Message, Part, Role

Answer = Callable[[TaskRecord, Message, str, JsonObject], TaskRecord]


def close_if_moved_on(record: TaskRecord, journal: Mapping[int, JournalEntry], key: str, body: bytes, answer: Answer) -> None:
    """`body` is the delegate's verified delivery for the delegation `key`: when the task's open interaction is a
    connection relayed from that delegation and the delivery shows the delegate no longer asks for it, close it."""
    interaction = record.interaction
    if not record.state.interrupted or interaction is None or interaction.kind != "connection":
        return
    seq = next((s for s in journal if opaque_id(record.task_id, s, "ia") == interaction.interaction_id), None)
    relayed = _relayed(record.task_id, journal, seq, key) if seq is not None else None
    delivered = _status(_delivered_status(body))
    if relayed is None or delivered is None or _stale(delivered[2], relayed[2]):
        return  # not relayed from this delegation, or a delivery older than what was relayed (pushes overtake)
    state, asking = delivered[0], delivered[1]
    if state == "TASK_STATE_AUTH_REQUIRED" and asking in (None, relayed[1]):
        return  # the delegate still waits for the same connection
    label = str((interaction.detail or {}).get("provider") or "the account")
    text = f"{label} is no longer needed." if state in ENDED else f"Connected {label}."
    message = Message(
        message_id=str(uuid.uuid4()), context_id=record.context_id, role=Role.USER, parts=[Part(text=text)],
        metadata={INTERACTIONS: {"interactionId": interaction.interaction_id}}, extensions=[INTERACTIONS],
    )
    try:
        answer(record, message, f"relayed#{interaction.interaction_id}", {MOVED_ON: True})
    except A2AError as closed:  # the caller answered it meanwhile (declined): that answer stands
        logger.info("relayed connection already answered", extra={"reason": closed.message})


Status = tuple[str, str | None, datetime | None]  # a delegate's state, the interaction it asks, since when


def _relayed(task_id: str, journal: Mapping[int, JournalEntry], seq: int, key: str) -> Status | None:
    """The delegate's status the interaction at `seq` relays, if it relays one of delegation `key`."""
    before = journal.get(seq - 1)
    sent = max((s for s, e in journal.items() if e.kind == "effect" and e.name == SEND and s < seq), default=None)
    if before is None or sent is None or opaque_id(task_id, sent, "eff") != key:
        return None
    if before.kind != "effect" or before.name not in (SEND, READ, ANSWER) or not isinstance(before.result, dict):
        return None
    snapshot = before.result.get("snapshot", before.result) if before.name == SEND else before.result
    task = snapshot.get("task") if isinstance(snapshot, dict) else None
    return _status(task.get("status") if isinstance(task, dict) else None)


def _delivered_status(body: bytes) -> Any:
    try:
        event = json.loads(body)
    except ValueError:
        return None
    holder = (event.get("statusUpdate") or event.get("task")) if isinstance(event, dict) else None
    return holder.get("status") if isinstance(holder, dict) else None  # an artifact update names none


def _status(status: Any) -> Status | None:
    if not isinstance(status, dict) or not status.get("state"):
        return None
    asked: Any = status
    for name in ("message", "metadata", INTERACTIONS):
        asked = asked.get(name) if isinstance(asked, dict) else None
    asked = asked if isinstance(asked, dict) else {}
    try:
        at = datetime.fromisoformat(str(status["timestamp"])) if status.get("timestamp") else None
    except ValueError:
        at = None
    return str(status["state"]), (str(asked["interactionId"]) if asked.get("interactionId") else None), at


def _stale(delivered: datetime | None, relayed: datetime | None) -> bool:
    try:
        return delivered is not None and relayed is not None and delivered <= relayed
    except TypeError:  # one with a time zone, one without: cannot tell, so not stale
        return False
