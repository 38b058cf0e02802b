"""Nylorun Profile v2: the five extensions, their payloads, and what a caller sees of them.

Extension data travels in `metadata` keyed by the extension's URI, and a message or artifact that carries
it lists the URI in its `extensions` (Profile v2, "The extensions"). The store keeps every payload; what a
caller reads is rendered for the extensions that caller activated (`render_task`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool
from pydantic.alias_generators import to_camel

from nylorun.protocol.models import Artifact, Message, Task

INTERACTIONS = "https://docs.nylorun.com/a2a/interactions/v1"
EFFECTS = "https://docs.nylorun.com/a2a/effects/v1"
PROGRESS = "https://docs.nylorun.com/a2a/progress/v1"
TELEMETRY = "https://docs.nylorun.com/a2a/telemetry/v1"
FILES = "https://docs.nylorun.com/a2a/files/v1"

PROFILE_EXTENSIONS: dict[str, str] = {
    INTERACTIONS: "Typed interactions: approvals, questions and connections, and the caller's answers.",
    EFFECTS: "Effects whose outcome was lost: `uncertain` names the effect; the task stays WORKING.",
    PROGRESS: "The agent's plan: up to 20 steps, each with a label, a state and a note.",
    TELEMETRY: "Turn totals (steps, tokens, costUsd) and the turn's trace id, on the terminal status.",
    FILES: "Each file artifact's kind, version, size, sha256 and path in the agent's outputs.",
}
MAX_PLAN_STEPS = 20  # Profile v2, progress/v1: up to 20 steps

InteractionKind = Literal["approval", "question", "connection"]
StepState = Literal["pending", "active", "done", "failed", "skipped"]


class Payload(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    def wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class Interaction(Payload):
    """interactions/v1 on a status message: an open interaction."""

    interaction_id: str
    kind: InteractionKind
    prompt: str
    detail: dict[str, Any] | None = None


class InteractionAnswer(Payload):
    """interactions/v1 on a reply message: `approved` answers an approval or connection, `value` a question."""

    interaction_id: str = Field(min_length=1, max_length=128)
    # Profile v2: only a typed answer approves. Strict: "y", "yes", 1 are not `true`.
    approved: StrictBool | None = None
    value: Any = None


class PlanStep(Payload):
    label: str = Field(max_length=200)
    state: StepState = "pending"
    note: str | None = Field(default=None, max_length=500)


class Progress(Payload):
    steps: list[PlanStep] = Field(max_length=MAX_PLAN_STEPS)


class Telemetry(Payload):
    steps: int
    tokens: int
    cost_usd: float
    trace_id: str


class FileVersion(Payload):
    kind: str
    version: int
    size: int
    sha256: str
    path: str


def parse_activation(values: Iterable[str], declared: Iterable[str]) -> list[str]:
    """A2A §3 / §10: comma-separated, trimmed, repeatable; unknown URIs ignored. Order of declaration."""
    requested = {uri.strip() for value in values for uri in value.split(",") if uri.strip()}
    return [uri for uri in declared if uri in requested]


def with_extension(
    metadata: dict[str, Any] | None, extensions: list[str] | None, uri: str, payload: Payload | dict[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """Attach extension data the profile way: under the URI in metadata, and the URI in `extensions`."""
    data = payload.wire() if isinstance(payload, Payload) else payload
    merged = {**(metadata or {}), uri: data}
    listed = list(extensions or [])
    if uri not in listed:
        listed.append(uri)
    return merged, listed


def read_answer(message: Message) -> InteractionAnswer | None:
    """The caller's interactions/v1 answer in a reply message, if it carries one."""
    raw = (message.metadata or {}).get(INTERACTIONS)
    if raw is None:
        return None
    return InteractionAnswer.model_validate(raw)


def render_task(task: Task, activated: Iterable[str]) -> Task:
    """What a caller sees: profile extension data only for the extensions it activated.

    Core tier (nothing activated) still gets the states and the text of every message, so an approval
    arrives as a text question (Profile v2, "What a client gets").
    """
    hidden = set(PROFILE_EXTENSIONS) - set(activated)
    if not hidden:
        return task
    status = task.status
    if status.message is not None:
        status = status.model_copy(update={"message": _strip_message(status.message, hidden)})
    return task.model_copy(
        update={
            "status": status,
            "history": [_strip_message(m, hidden) for m in task.history] if task.history else task.history,
            "artifacts": [_strip_artifact(a, hidden) for a in task.artifacts]
            if task.artifacts
            else task.artifacts,
        }
    )


def visible_message(message: Message, activated: Iterable[str]) -> Message:
    """A message as a caller that activated `activated` may see it."""
    return _strip_message(message, set(PROFILE_EXTENSIONS) - set(activated))


def visible_artifact(artifact: Artifact, activated: Iterable[str]) -> Artifact:
    return _strip_artifact(artifact, set(PROFILE_EXTENSIONS) - set(activated))


def _strip(
    metadata: dict[str, Any] | None, extensions: list[str] | None, hidden: set[str]
) -> dict[str, Any]:
    update: dict[str, Any] = {}
    if metadata and hidden.intersection(metadata):
        update["metadata"] = {k: v for k, v in metadata.items() if k not in hidden} or None
    if extensions and hidden.intersection(extensions):
        update["extensions"] = [uri for uri in extensions if uri not in hidden] or None
    return update


def _strip_message(message: Message, hidden: set[str]) -> Message:
    update = _strip(message.metadata, message.extensions, hidden)
    return message.model_copy(update=update) if update else message


def _strip_artifact(artifact: Artifact, hidden: set[str]) -> Artifact:
    update = _strip(artifact.metadata, artifact.extensions, hidden)
    return artifact.model_copy(update=update) if update else artifact
