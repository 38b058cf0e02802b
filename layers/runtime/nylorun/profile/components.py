"""Typed components: tables, key-value lists, timelines and code references a client can draw.

On the wire a component is an A2A 1.0 DataPart with `mediaType` `application/vnd.protolabs.component-v1+json`
and `data` `{component, props, title?}` (the same MIME as the console's component rendering, so it draws them:
docs/decisions/0020-components-and-push-config-lifetime.md). Next to it, in the same message and just before it,
goes a text part with its plain-text rendering, marked `metadata: {"componentFallback": true}`: a core-tier client
reads the text, a client that knows the MIME draws the component and skips the text (docs/components.md).

The registry holds the core kinds, each validated by a pydantic model: `table`, `keyvalue`, `timeline` (free-form
data with a schema) and `code-ref` (a strict schema; built only by `code_ref()`, never from a name and props:
docs/decisions/0021-strict-code-ref.md). `register_component(name, validator)` adds a kind of your own and refuses
a core name, so nothing loosens a core kind (docs/decisions/0020-components-and-push-config-lifetime.md). A payload
is forwarded only when its validator accepts it; what happens to one it refuses is the Turn's decision
(engine/turn.py).

Profile v2 visibility rule: a component is a result or a plan-like view. It never carries tool calls, their
arguments or their results.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.alias_generators import to_camel

from nylorun.protocol.models import Part

COMPONENT_MEDIA_TYPE = "application/vnd.protolabs.component-v1+json"
FALLBACK = "componentFallback"  # part metadata: this text part renders the component part that follows it
CORE_KINDS = ("table", "keyvalue", "timeline", "code-ref")
# A kind's name: lowercase words joined by "-" or "." (a plugin's own prefix, say "acme.chart").
KIND_NAME = re.compile(r"[a-z][a-z0-9]*(?:[-.][a-z0-9]+)*")
MAX_KIND_NAME = 64
MAX_TITLE = 200

Text = Annotated[str, Field(max_length=2000)]
Label = Annotated[str, Field(min_length=1, max_length=200)]
# A cell or a value: a scalar JSON value (no NaN or infinity: not JSON).
Scalar = Text | int | Annotated[float, Field(allow_inf_nan=False)] | bool | None


class InvalidComponent(ValueError):
    """A component its kind's validator refuses (or a kind nobody registered)."""


class Props(BaseModel):
    """The props of a free-form core kind: camelCase on the wire, unknown keys dropped. A refusal never echoes
    the props (deployed, it is logged: a table of customers' data does not belong in the logs)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore", hide_input_in_errors=True)


class Table(Props):
    columns: list[Label] = Field(min_length=1, max_length=50)
    rows: list[list[Scalar]] = Field(max_length=500)

    @model_validator(mode="after")
    def _rectangular(self) -> Table:
        for index, row in enumerate(self.rows):
            if len(row) != len(self.columns):
                raise ValueError(f"row {index} has {len(row)} cells; the table has {len(self.columns)} columns")
        return self


class KeyValueItem(Props):
    label: Label
    value: Scalar


class KeyValue(Props):
    items: list[KeyValueItem] = Field(min_length=1, max_length=100)


TimelineState = Literal["done", "active", "todo"]


class TimelineStep(Props):
    label: Label
    state: TimelineState = "todo"
    note: Text | None = None


class Timeline(Props):
    steps: list[TimelineStep] = Field(min_length=1, max_length=50)


class CodeRef(Props):
    """A pointer into a file of the project: strict, so no unknown key and no coerced type passes.

    Why: docs/decisions/0021-strict-code-ref.md."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", strict=True, hide_input_in_errors=True
    )

    path: str = Field(min_length=1, max_length=1024)
    line: int | None = Field(default=None, ge=1)
    end_line: int | None = Field(default=None, ge=1)
    label: Label | None = None

    @field_validator("path")
    @classmethod
    def _relative(cls, path: str) -> str:
        # A path inside the project, never a way out of it: relative, POSIX, no "..", no control characters.
        if path.startswith("/") or "\\" in path or any(ord(c) < 32 for c in path):
            raise ValueError("must be a relative POSIX path")
        if any(segment in ("", ".", "..") for segment in path.split("/")):
            raise ValueError("must be a normalized path without '.', '..' or empty segments")
        return path

    @model_validator(mode="after")
    def _range(self) -> CodeRef:
        if self.end_line is not None and (self.line is None or self.end_line < self.line):
            raise ValueError("endLine needs a line and must not come before it")
        return self


Validator = type[BaseModel] | Callable[[dict[str, Any]], Any]
TextFallback = Callable[[dict[str, Any]], str]


@dataclass(frozen=True)
class Component:
    """A component an agent shows: its kind (`component`), its props and an optional title."""

    component: str
    props: Mapping[str, Any]
    title: str | None = None


@dataclass(frozen=True)
class _Built(Component):
    """A component made by its kind's own helper (`code_ref`): the only way to a helper-only kind."""


def code_ref(
    path: str, line: int | None = None, end_line: int | None = None, *, label: str | None = None,
    title: str | None = None,
) -> Component:
    """A `code-ref`: `path` (relative, in the project) and optionally a line or a line range."""
    props = {"path": path, "line": line, "endLine": end_line, "label": label}
    return _Built("code-ref", {k: v for k, v in props.items() if v is not None}, title)


@dataclass(frozen=True)
class Kind:
    name: str
    validator: Validator
    text: TextFallback
    helper_only: bool = field(default=False)


# ---------------------------------------------------------------- the text fallback of each core kind
def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value).replace("\n", " ").replace("|", "\\|")


def _table_text(props: dict[str, Any]) -> str:
    """A Markdown table: plain text that reads as a table, and renders as one where Markdown is drawn."""
    lines = ["| " + " | ".join(_cell(c) for c in props["columns"]) + " |"]
    lines.append("|" + "|".join(" --- " for _ in props["columns"]) + "|")
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in props["rows"]]
    return "\n".join(lines)


def _keyvalue_text(props: dict[str, Any]) -> str:
    return "\n".join(f"{item['label']}: {_cell(item.get('value'))}" for item in props["items"])


TIMELINE_MARKS: dict[str, str] = {"done": "[x]", "active": "[>]", "todo": "[ ]"}


def _timeline_text(props: dict[str, Any]) -> str:
    lines = []
    for step in props["steps"]:
        note = f" — {step['note']}" if step.get("note") else ""
        lines.append(f"{TIMELINE_MARKS[step.get('state', 'todo')]} {step['label']}{note}")
    return "\n".join(lines)


def code_location(props: Mapping[str, Any]) -> str:
    """`path`, `path:line` or `path:line-endLine`."""
    where = str(props["path"])
    if props.get("line") is not None:
        where += f":{props['line']}"
        if props.get("endLine") is not None and props["endLine"] != props["line"]:
            where += f"-{props['endLine']}"
    return where


def _code_ref_text(props: dict[str, Any]) -> str:
    label = props.get("label")
    return f"{label}: {code_location(props)}" if label else code_location(props)


def _json_text(props: dict[str, Any]) -> str:
    return json.dumps(props, ensure_ascii=False, separators=(", ", ": "))


CORE: dict[str, Kind] = {
    "table": Kind("table", Table, _table_text),
    "keyvalue": Kind("keyvalue", KeyValue, _keyvalue_text),
    "timeline": Kind("timeline", Timeline, _timeline_text),
    "code-ref": Kind("code-ref", CodeRef, _code_ref_text, helper_only=True),
}


# ---------------------------------------------------------------- the registry
class ComponentRegistry:
    """The kinds a Runtime (or a client) knows: the core ones, and the ones registered beside them."""

    def __init__(self) -> None:
        self._kinds: dict[str, Kind] = dict(CORE)

    def register(self, name: str, validator: Validator, text: TextFallback | None = None) -> None:
        """Add a kind of your own. `validator` is a pydantic model, or a function that takes the props and
        returns them (or None to accept them as they are) and raises to refuse them. `text` renders the
        props as plain text for the core tier (default: the props as JSON). Registering a name again
        replaces your earlier kind; a core kind's name is refused (docs/components.md: a plugin never shadows one)."""
        if name in CORE:
            raise ValueError(f"{name!r} is a core component kind and cannot be replaced")
        if len(name) > MAX_KIND_NAME or not KIND_NAME.fullmatch(name):
            raise ValueError(f"{name!r} is not a component kind name (lowercase words joined by '-' or '.')")
        self._kinds[name] = Kind(name, validator, text or _json_text)

    def kinds(self) -> list[str]:
        return sorted(self._kinds)

    def validate(self, component: Component) -> Component:
        """The component with its props as its validator returns them; InvalidComponent when refused."""
        kind = self._kinds.get(component.component)
        if kind is None:
            raise InvalidComponent(f"{component.component!r} is not a registered component kind")
        if kind.helper_only and not isinstance(component, _Built):
            raise InvalidComponent(f"a {kind.name} component is built only by its helper (code_ref), not from props")
        if component.title is not None and (not isinstance(component.title, str) or len(component.title) > MAX_TITLE):
            raise InvalidComponent(f"a component's title is a string of at most {MAX_TITLE} characters")
        if not isinstance(component.props, Mapping):
            raise InvalidComponent(f"the props of a {kind.name} component must be an object")
        try:
            props = _checked(kind.validator, dict(component.props))
        except (ValidationError, ValueError, TypeError) as refused:
            raise InvalidComponent(f"{kind.name} component refused: {refused}") from None
        except Exception as refused:  # noqa: BLE001 - a validator that raises drops the payload (decision 0020)
            raise InvalidComponent(f"{kind.name} component refused by its validator: {refused!r}") from None
        return Component(kind.name, props, component.title)

    def parts(self, component: Component) -> list[Part]:
        """The two parts a message carries for a component: its text fallback, then the component itself."""
        valid = self.validate(component)
        text = self._kinds[valid.component].text(dict(valid.props))
        if valid.title:
            text = f"{valid.title}\n{text}"
        data: dict[str, Any] = {"component": valid.component, "props": dict(valid.props)}
        if valid.title:
            data["title"] = valid.title
        return [
            Part(text=text, media_type="text/plain", metadata={FALLBACK: True}),
            Part(data=data, media_type=COMPONENT_MEDIA_TYPE),
        ]

    def read(self, media_type: str | None, data: Any) -> Component | None:
        """A component as a client reads it from a DataPart: None unless the MIME is the component MIME, the
        kind is known here and its validator accepts the props (a client draws only what it can check)."""
        if media_type != COMPONENT_MEDIA_TYPE or not isinstance(data, dict):
            return None
        name, props, title = data.get("component"), data.get("props"), data.get("title")
        if not isinstance(name, str) or not isinstance(props, dict) or not isinstance(title, str | None):
            return None
        try:
            # A code-ref read from the wire went through its strict schema at the sender and does again here.
            return self.validate(_Built(name, props, title))
        except InvalidComponent:
            return None


def _checked(validator: Validator, props: dict[str, Any]) -> dict[str, Any]:
    model = validator if isinstance(validator, type) and issubclass(validator, BaseModel) else None
    result: Any = model.model_validate(props) if model is not None else cast(Callable[[Any], Any], validator)(props)
    if result is None:
        result = props
    if isinstance(result, BaseModel):
        result = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    if not isinstance(result, dict):
        raise TypeError("a validator returns the props (an object), or None to accept them as they are")
    json.dumps(result, allow_nan=False)  # what goes on the wire must be JSON (TypeError, ValueError otherwise)
    return result


def is_component_part(part: Part) -> bool:
    """A component part or the text fallback beside it (what a status message carries as the view)."""
    return part.media_type == COMPONENT_MEDIA_TYPE or bool((part.metadata or {}).get(FALLBACK))


def view_parts(parts: Sequence[Part]) -> list[Part]:
    """The component parts (with their fallbacks) among `parts`: kept when the Runtime rewrites a status."""
    return [part for part in parts if is_component_part(part)]


# The Runtime's registry: the one `Turn` validates with and `register_component` adds to.
COMPONENTS = ComponentRegistry()
register_component = COMPONENTS.register
