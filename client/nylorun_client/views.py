"""Typed views of what an A2A 1.0 Agent returns, with the Nylorun Profile v2 data read out of `metadata`.

A view is built from the a2a-sdk's protobuf objects and keeps them in `raw`, so nothing the Agent sent is
lost. Against a plain A2A agent (the core tier) every profile field is empty and only states, text and
artifacts are there: an approval is then just the status text.

Components (docs/components.md) are read out of the parts: each one this client can check (a core kind whose
schema its props pass) is in `components`, and its text fallback leaves `text`; one it cannot check stays as its
fallback text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, TypeVar

from a2a.types import Artifact, Message, Part, Task, TaskState
from google.protobuf import json_format
from google.protobuf.struct_pb2 import Struct
from nylorun.profile.components import COMPONENT_MEDIA_TYPE, COMPONENTS, FALLBACK, Component
from nylorun.profile.extensions import (
    EFFECTS,
    FILES,
    INTERACTIONS,
    PROGRESS,
    TELEMETRY,
    FileVersion,
    Interaction,
    PlanStep,
    Progress,
    Telemetry,
)
from pydantic import BaseModel, ValidationError

TERMINAL = frozenset(
    {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"}
)
INTERRUPTED = frozenset({"TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"})
P = TypeVar("P", bound=BaseModel)


@dataclass(frozen=True)
class ArtifactView:
    artifact_id: str
    name: str
    text: str  # its text (and data) parts
    urls: list[str]  # its `url` parts: a file output's download link
    file: FileVersion | None  # files/v1: kind, version, size, sha256, path
    raw: Artifact = field(repr=False, compare=False)
    components: list[Component] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "artifactId": self.artifact_id,
            "name": self.name,
            "text": self.text,
            "urls": self.urls,
            "file": self.file.wire() if self.file else None,
            "components": [component_json(c) for c in self.components],
        }


@dataclass(frozen=True)
class MessageView:
    """An Agent's direct answer: a Message and no task (docs/protocol.md §2.4: `message` or `task`)."""

    message_id: str
    context_id: str
    text: str
    raw: Message = field(repr=False, compare=False)
    components: list[Component] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "message",
            "messageId": self.message_id,
            "contextId": self.context_id,
            "text": self.text,
            "components": [component_json(c) for c in self.components],
        }


@dataclass(frozen=True)
class TaskView:
    id: str
    context_id: str
    state: str  # the proto name, e.g. "TASK_STATE_WORKING"
    text: str  # the status message's text: step text while working, the question, or the reply
    timestamp: str
    status_message_id: str
    interaction: Interaction | None  # interactions/v1: the open approval, question or connection
    plan: list[PlanStep]  # progress/v1
    telemetry: Telemetry | None  # telemetry/v1, on the terminal status
    uncertain: str | None  # effects/v1: the effect whose outcome was lost
    artifacts: list[ArtifactView]
    raw: Task = field(repr=False, compare=False)
    components: list[Component] = field(default_factory=list)  # on the status message: the view, or the reply's

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL

    @property
    def interrupted(self) -> bool:
        return self.state in INTERRUPTED

    @property
    def short_state(self) -> str:
        """For people: "INPUT_REQUIRED" rather than "TASK_STATE_INPUT_REQUIRED"."""
        return self.state.removeprefix("TASK_STATE_")

    @property
    def waiting_key(self) -> str:
        """Names what the task waits for, so a poller does not ask twice for something already answered
        (the status may still show it for a moment after the answer). Core tier: the status message."""
        if self.interaction is not None:
            return self.interaction.interaction_id
        return self.status_message_id or f"{self.state}@{self.timestamp}"

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "task",
            "taskId": self.id,
            "contextId": self.context_id,
            "state": self.state,
            "text": self.text,
            "interaction": self.interaction.wire() if self.interaction else None,
            "plan": [step.wire() for step in self.plan],
            "telemetry": self.telemetry.wire() if self.telemetry else None,
            "uncertain": self.uncertain,
            "artifacts": [artifact.to_json() for artifact in self.artifacts],
            "components": [component_json(c) for c in self.components],
        }


def task_view(task: Task) -> TaskView:
    message = task.status.message if task.status.HasField("message") else None
    metadata = _struct(message.metadata) if message is not None else {}
    progress = _payload(Progress, metadata.get(PROGRESS))
    effects = metadata.get(EFFECTS)
    uncertain = effects.get("uncertain") if isinstance(effects, dict) else None
    text, components = read_parts(message.parts if message is not None else [])
    return TaskView(
        id=task.id,
        context_id=task.context_id,
        state=TaskState.Name(task.status.state),
        text=text,
        timestamp=task.status.timestamp.ToJsonString() if task.status.HasField("timestamp") else "",
        status_message_id=message.message_id if message is not None else "",
        interaction=_payload(Interaction, metadata.get(INTERACTIONS)),
        plan=list(progress.steps) if progress else [],
        telemetry=_payload(Telemetry, metadata.get(TELEMETRY)),
        uncertain=str(uncertain) if uncertain else None,
        artifacts=[artifact_view(artifact) for artifact in task.artifacts],
        raw=task,
        components=components,
    )


def artifact_view(artifact: Artifact) -> ArtifactView:
    text, components = read_parts(part for part in artifact.parts if part.WhichOneof("content") != "url")
    return ArtifactView(
        artifact_id=artifact.artifact_id,
        name=artifact.name,
        text=text,
        urls=[part.url for part in artifact.parts if part.WhichOneof("content") == "url"],
        file=_payload(FileVersion, _struct(artifact.metadata).get(FILES)),
        raw=artifact,
        components=components,
    )


def message_view(message: Message) -> MessageView:
    text, components = read_parts(message.parts)
    return MessageView(
        message_id=message.message_id,
        context_id=message.context_id,
        text=text,
        raw=message,
        components=components,
    )


def component_json(component: Component) -> dict[str, Any]:
    """--json: `{"component", "props", "title"}`."""
    return {"component": component.component, "props": dict(component.props), "title": component.title}


def read_parts(parts: Any) -> tuple[str, list[Component]]:
    """The text a person reads (text as is, other parts named) and the components this client can draw. A
    component part is never dumped as JSON: drawn when it checks out, else its text fallback (the part before it) stands for it."""
    items: list[Part] = list(parts)
    drawn = [_component(part) for part in items]
    texts = []
    for index, part in enumerate(items):
        if drawn[index] is not None or part.media_type == COMPONENT_MEDIA_TYPE:
            continue
        fallback = part.WhichOneof("content") == "text" and _struct(part.metadata).get(FALLBACK) is True
        if fallback and index + 1 < len(items) and drawn[index + 1] is not None:
            continue  # the component after it is drawn instead
        texts.append(_part_text(part))
    return "\n".join(texts), [c for c in drawn if c is not None]


def _component(part: Part) -> Component | None:
    if part.WhichOneof("content") != "data" or part.media_type != COMPONENT_MEDIA_TYPE:
        return None
    return COMPONENTS.read(part.media_type, _integral(json_format.MessageToDict(part.data)))


def _integral(value: Any) -> Any:
    """protobuf's Value keeps every number as a double: give whole numbers back as the ints JSON sent (a
    code-ref's line is a strict int)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _integral(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_integral(v) for v in value]
    return value


def _part_text(part: Part) -> str:
    kind = part.WhichOneof("content")
    if kind == "text":
        return part.text
    if kind == "url":
        return part.url
    if kind == "data":
        return json.dumps(json_format.MessageToDict(part.data))
    if kind == "raw":
        return f"[{part.filename or 'file'}: {len(part.raw)} bytes]"
    return ""


def _struct(struct: Struct) -> dict[str, Any]:
    return json_format.MessageToDict(struct) if struct.fields else {}


def _payload(model: type[P], data: Any) -> P | None:
    """An extension payload, or None when absent or not what the profile says (another agent's data
    under the same key must not break a client)."""
    if not isinstance(data, dict):
        return None
    try:
        return model.model_validate(data)
    except ValidationError:
        return None
