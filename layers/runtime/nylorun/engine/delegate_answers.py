"""What a turn keeps of a delegate's answer: trimmed to fit the one journal item that holds it.

The journal keeps each delegate answer (engine/delegation.py) in one DynamoDB item (400 KB at most), while a
delegate's task may hold 4 MiB of artifacts (a Nylorun delegate's budget; any other's is unbounded, and the
A2A client reads at most `nylorun.ports.delegation.MAX_READ_BYTES` of it). An answer over `KEPT_BYTES` keeps its status and, in order,
the artifacts that fit; the rest are named in `omitted` (id, name, size; past `OMITTED_BYTES` of names only
counted, `omittedCount`), so the Agent always gets a `Delegated`
it can handle and can tell what it did not get. A status message too large to keep is cut to its text.
"""

from __future__ import annotations

import json
from typing import Any

from nylorun.limits import KIB, MAX_INTERACTION_BYTES
from nylorun.profile.extensions import INTERACTIONS, TELEMETRY

# DynamoDB: 400 KB an item. The rest of the journal entry (keys, the sealed credentials, the URL) fits beside it.
KEPT_BYTES = 320 * KIB
OMITTED_BYTES = 16 * KIB  # of which the names of the artifacts left out take at most this much; the rest are counted
NAME_CHARS = 128


def kept(answer: dict[str, Any], budget: int = KEPT_BYTES) -> dict[str, Any]:
    """`answer` (`{"task": …}` or `{"message": …}`, with the journal's own keys) as the journal keeps it."""
    if _size(answer) <= budget:
        return answer
    task = answer.get("task")
    if not isinstance(task, dict):  # a direct answer: one message
        return {**answer, "message": _cut(answer.get("message"), budget // 2)}
    # Only what the Agent reads: history (GetTask asks for none) and the task's metadata are not kept.
    status = {key: value for key, value in (task.get("status") or {}).items() if key in ("state", "timestamp", "message")}
    if isinstance(status.get("message"), dict) and _size(status["message"]) > budget // 2:
        status["message"] = _cut(status["message"], budget // 2)
    bare = {key: task[key] for key in ("id", "contextId") if key in task} | {"status": status}
    room = budget - _size({**answer, "task": bare}) - OMITTED_BYTES
    artifacts: list[dict[str, Any]] = []
    omitted: list[dict[str, Any]] = []
    named, count = 2, 0  # the size of `omitted` as JSON, and how many were left out
    for artifact in (a for a in task.get("artifacts") or [] if isinstance(a, dict)):
        size = _size(artifact) + 1
        if size <= room:
            artifacts.append(artifact)
            room -= size
            continue
        count += 1
        entry = {"artifactId": str(artifact.get("artifactId", ""))[:NAME_CHARS],
                 "name": str(artifact.get("name") or "")[:NAME_CHARS], "bytes": size - 1}
        if named + _size(entry) + 2 <= OMITTED_BYTES:
            omitted.append(entry)
            named += _size(entry) + 2
    trimmed = {**answer, "task": {**bare, "artifacts": artifacts}, "omitted": omitted}
    return trimmed | ({"omittedCount": count} if count > len(omitted) else {})


def _cut(message: Any, budget: int) -> dict[str, Any]:
    """A message too large to keep: its text, cut to half of `budget` bytes of JSON, and its interaction and
    telemetry when they are of the size a Nylorun delegate sends."""
    message = message if isinstance(message, dict) else {}
    text = "\n".join(str(p["text"]) for p in message.get("parts") or [] if isinstance(p, dict) and "text" in p)
    metadata = message.get("metadata") if isinstance(message.get("metadata"), dict) else {}
    small = {k: metadata[k] for k in (INTERACTIONS, TELEMETRY) if k in metadata and _size(metadata[k]) <= MAX_INTERACTION_BYTES}
    while _size(text) > budget // 2:  # escaped JSON may be several bytes a character
        text = text[: len(text) * (budget // 2) // _size(text) - 1]
    return {"role": str(message.get("role") or "ROLE_AGENT")[:32], "parts": [{"text": text}], "metadata": small}


def _size(value: Any) -> int:
    return len(json.dumps(value))  # as the journal stores it (nylorun.adapters.dynamodb.codec)
