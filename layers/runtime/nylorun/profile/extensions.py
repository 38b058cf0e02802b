"""Nylorun Profile v2: the five extensions, their payloads, and what a caller sees of them.

Extension data travels in `metadata` keyed by the extension's URI, and a message or artifact that carries
it lists the URI in its `extensions` (Profile v2, "The extensions": docs/profile.md §2). The store keeps every payload; what a
caller reads is rendered for the extensions that caller activated (`visible`).
"""

from __future__ import annotations

import enum
import types
from collections.abc import Iterable
from functools import cache
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, StrictBool
from pydantic.alias_generators import to_camel

from nylorun.protocol.models import Message, Wire

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
W = TypeVar("W", bound=Wire)

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
    """docs/protocol.md §3.2-3.3: comma-separated, trimmed, repeatable; unknown URIs ignored. Order of declaration."""
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


def visible(obj: W, activated: Iterable[str]) -> W:
    """`obj` (a Task, Message, Artifact, StreamResponse, …) as a caller that activated `activated` may see it:
    at every level (message, status, history, artifact, part) the `metadata` of a profile extension it did
    not activate is left out, and no `extensions` list names one. Other metadata keys (a caller's own) stay.

    The one place that decides (`left_out`): every answer and every push body goes through it, or is dumped
    without what `left_out` names (GetTask). Core tier (nothing activated) still gets the states and the text of
    every message, so an approval arrives as a text question (Profile v2, "What a client gets": docs/profile.md
    §4).
    """
    gone = left_out(obj, activated)
    return _copied_without(obj, gone) if gone else obj


# What `left_out` finds, in the form pydantic's `exclude` takes: a field name (or a list index, or a metadata key)
# mapped to True (all of it) or to what is left out inside it.
Exclusion = dict[Any, Any]


def left_out(obj: Wire, activated: Iterable[str]) -> Exclusion | None:
    """What of `obj` a caller that activated `activated` may not see (`visible`); None when nothing."""
    hidden = frozenset(PROFILE_EXTENSIONS).difference(activated)
    return _left_out(obj, hidden) if hidden else None


def _left_out(obj: Wire, hidden: frozenset[str]) -> Exclusion | None:
    found: Exclusion = {}
    values = obj.__dict__  # a model's fields (read once per request for every part of a task: kept lean)
    for name, tagged in _walked(type(obj)):
        value = values[name]
        if value is None:
            continue
        if tagged:  # `metadata` or `extensions`
            if value and not hidden.isdisjoint(value):
                keys = [key for key in value if key in hidden] if isinstance(value, dict) else \
                    [index for index, key in enumerate(value) if key in hidden]
                found[name] = True if len(keys) == len(value) else dict.fromkeys(keys, True)  # none left: no field
        elif isinstance(value, Wire):
            if (inner := _left_out(value, hidden)) is not None:
                found[name] = inner
        elif isinstance(value, list) and value and isinstance(value[0], Wire):
            items = {index: inner for index, item in enumerate(value) if (inner := _left_out(item, hidden))}
            if items:
                found[name] = items
    return found or None


def _copied_without(obj: W, gone: Exclusion) -> W:
    # Copied only where something is left out: a part with nothing hidden is the caller's as it is (wire models
    # are never changed in place).
    update: dict[str, Any] = {}
    for name, inner in gone.items():
        value = getattr(obj, name)
        if inner is True:
            update[name] = None
        elif isinstance(value, dict):
            update[name] = {key: item for key, item in value.items() if key not in inner}
        elif isinstance(value, Wire):
            update[name] = _copied_without(value, inner)
        elif name == "extensions":
            update[name] = [item for index, item in enumerate(value) if index not in inner]
        else:
            update[name] = [_copied_without(item, inner[i]) if i in inner else item for i, item in enumerate(value)]
    return obj.model_copy(update=update)


# Field types that can hold neither extension data nor a model (an id, a role, a list of task ids).
_PLAIN = (str, int, float, bool, type(None))


@cache
def _walked(model: type[Wire]) -> tuple[tuple[str, bool], ...]:
    """The fields of `model` that `_left_out` must look at, each with whether it is `metadata` or `extensions`
    (else it may hold a model: Any included); the plain ones are skipped, once per type rather than per read."""
    return tuple(
        (name, name in ("metadata", "extensions"))
        for name, field in model.model_fields.items()
        if name in ("metadata", "extensions") or not _plain(field.annotation)
    )


def _plain(annotation: Any) -> bool:
    if isinstance(annotation, type) and (issubclass(annotation, _PLAIN) or issubclass(annotation, enum.Enum)):
        return True
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType, list):
        return all(_plain(arg) for arg in get_args(annotation))
    return False
