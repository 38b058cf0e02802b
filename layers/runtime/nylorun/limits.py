"""Size limits: what one stored thing, one task and one answer may hold (docs/limits.md).

* DynamoDB: an item holds at most 400 KB. Every message and every artifact is its own item of at most
  `MAX_STORED_JSON_BYTES` of JSON, and so is a task's metadata when it is larger than a few KiB. The task
  item keeps the status (one message), the open interaction (`MAX_INTERACTION_BYTES`), the plan (20 short
  steps) and small metadata: about 290 KiB at most, whatever the caller and the agent send together.
* A task's history and artifacts together hold at most `max_task_bytes` (NYLORUN_MAX_TASK_BYTES, default
  `DEFAULT_MAX_TASK_BYTES`). A caller's message that would pass it less `CALLER_HEADROOM` is refused
  (-32602) and nothing is written; an agent's output that would pass it fails the task, saying so.
* Lambda: 6 MB response payload; we keep answers under 5 MiB (`MAX_ANSWER_BYTES`). A whole task (budget,
  status message and metadata) fits; an answer that still would not is trimmed (`fit_task`, ListTasks pages).

Sizes are the length of the JSON the stores keep (`json.dumps`, ASCII): the same count in both stores.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from nylorun.domain.errors import TooLarge
from nylorun.profile.extensions import Interaction
from nylorun.protocol.models import Artifact, Message, Task, TaskStatus

KIB = 1024
# DynamoDB: 400 KB an item. One message, one artifact, a task's metadata: each at most this much JSON.
MAX_STORED_JSON_BYTES = 256 * KIB
# What one JSON-RPC request body may hold: a message and its request metadata (MAX_STORED_JSON_BYTES of JSON each,
# the most SendMessage keeps) with as much again for the rest of the request, spacing and escapes. A larger body
# could never be accepted, so it is refused from its length, before any of it is parsed (docs/limits.md).
MAX_REQUEST_BYTES = 4 * MAX_STORED_JSON_BYTES
# An open interaction is kept on the task item beside the status message that also shows it.
MAX_INTERACTION_BYTES = 64 * KIB
DEFAULT_MAX_TASK_BYTES = 4 * 1024 * KIB
# docs/operate.md#data-retention: a task expires 90 days after it ends unless the Runtime is told otherwise
# (RetentionDays).
DEFAULT_RETENTION_SECONDS = 90 * 24 * 3600
# Room a caller's message leaves in the budget, so the agent can still answer what it asked.
CALLER_HEADROOM = 64 * KIB
# Lambda: 6 MB response payload; we keep answers under 5 MiB.
MAX_ANSWER_BYTES = 5 * 1024 * KIB
# The JSON-RPC envelope around a result (jsonrpc, id, ListTasks' paging fields) and Lambda's headers.
ANSWER_SLACK = 64 * KIB
ANSWER_BUDGET = MAX_ANSWER_BYTES - ANSWER_SLACK  # what the tasks of one answer may weigh


def stored_bytes(model: Message | Artifact) -> int:
    """What a message or an artifact weighs as stored: its JSON."""
    return len(json.dumps(model.wire()))


def checked_bytes(models: Iterable[Message | Artifact]) -> int:
    """Their stored size together; TooLarge if one of them is larger than one item may hold."""
    total = 0
    for model in models:
        size = stored_bytes(model)
        if size > MAX_STORED_JSON_BYTES:
            raise TooLarge(f"a message or artifact holds at most {MAX_STORED_JSON_BYTES} bytes of JSON, not {size}")
        total += size
    return total


def check_status(status: TaskStatus, interaction: Interaction | None) -> None:
    """What the task item keeps of a status change: one message and the open interaction, both bounded."""
    if status.message is not None:
        checked_bytes([status.message])
    if interaction is not None and len(json.dumps(interaction.wire())) > MAX_INTERACTION_BYTES:
        raise TooLarge(f"an interaction (prompt and detail) holds at most {MAX_INTERACTION_BYTES} bytes of JSON")


def grown(used: int, added: int, limit: int | None, *, reserve: int = 0) -> int:
    """The task's size after adding `added` bytes; TooLarge when that passes `limit - reserve` (`limit=None`:
    counted, never refused)."""
    if limit is not None and added > 0 and used + added > limit - reserve:
        kept = f", of which a caller may fill {limit - reserve}" if reserve else ""
        raise TooLarge(
            f"a task holds at most {limit} bytes of history and artifacts{kept}; {used} are used, this adds {added}"
        )
    return used + added


def payload_bytes(body: str) -> int:
    """What an answer's JSON `body` (ASCII) weighs in Lambda's response payload, which carries it as one JSON
    string: every `"` and `\\` is escaped once more. An upper bound of the HTTP body's size."""
    return len(body) + body.count('"') + body.count("\\") + 2


def answer_bytes(value: Any) -> int:
    """`payload_bytes` of `value` as the api answers it (compact JSON)."""
    return payload_bytes(json.dumps(value, separators=(",", ":")))


def fit_task(task: Task, budget: int = ANSWER_BUDGET) -> Task:
    """The task as it fits in `budget` bytes of answer: whole when it does (always, within the task budget,
    unless its file parts' presigned URLs or escaping grew it); else without its oldest history messages (as
    `historyLength` would) and, only if that is not enough, without its last artifacts: as few left out as
    fit, found by bisection (a handful of measurements, and only for a task this large)."""
    if answer_bytes(task.wire()) <= budget:
        return task
    history, artifacts = list(task.history or []), list(task.artifacts or [])

    def without(n: int) -> Task:
        kept = artifacts[: len(artifacts) - max(0, n - len(history))]
        return task.model_copy(update={"history": history[n:] or None, "artifacts": kept or None})

    low, high = 1, len(history) + len(artifacts)
    while low < high:
        middle = (low + high) // 2
        if answer_bytes(without(middle).wire()) <= budget:
            high = middle
        else:
            low = middle + 1
    return without(low)
