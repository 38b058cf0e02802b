"""Components drawn with rich (docs/components.md): a table as a table, a keyvalue as a panel of "label value"
rows, a timeline with a mark per state, a code reference as `path:line`. Only what `views.read_parts` checked
reaches here; a kind this client does not know stays as its text fallback."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from nylorun.profile.components import Component, code_location
from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

TIMELINE_MARKS = {"done": ("✓", "green"), "active": ("▶", "cyan"), "todo": ("○", "dim")}


def render_components(components: Sequence[Component], indent: int = 2) -> RenderableType:
    return Group(*(Padding(render_component(c), (0, 0, 0, indent), expand=False) for c in components))


def render_component(component: Component) -> RenderableType:
    props, title = component.props, component.title
    if component.component == "table":
        # Text, never markup: an agent's "[red]" is shown as written, and a stray "[/]" breaks nothing.
        table = Table(title=Text(title, style="bold") if title else None, title_justify="left")
        for column in props["columns"]:
            table.add_column(Text(column, style="bold"))
        for row in props["rows"]:
            table.add_row(*(_cell(cell) for cell in row))
        return table
    if component.component == "keyvalue":
        grid = Table.grid(padding=(0, 2))
        for item in props["items"]:
            grid.add_row(Text(item["label"], style="bold"), _cell(item.get("value")))
        return Panel.fit(grid, title=Text(title) if title else None, title_align="left")
    if component.component == "timeline":
        rows: list[RenderableType] = [Text(title, style="bold")] if title else []
        for step in props["steps"]:
            mark, style = TIMELINE_MARKS[step.get("state", "todo")]
            line = Text.assemble((mark, style), " ", (step["label"], "" if step.get("state") == "todo" else style))
            if step.get("note"):
                line.append(f"  ({step['note']})", style="dim")
            rows.append(line)
        return Group(*rows)
    if component.component == "code-ref":
        line = Text.assemble(("→ ", "cyan"), (code_location(props), "bold cyan"))
        if props.get("label"):
            line.append(f"  {props['label']}")
        return Group(Text(title, style="bold"), line) if title else line
    # A kind of one's own that this client registered without a drawing: its props, labeled.
    return Text.assemble((f"{title or component.component}: ", "bold"), json.dumps(dict(props), ensure_ascii=False))


def _cell(value: Any) -> Text:
    if value is None:
        return Text("")
    if isinstance(value, bool):
        return Text("yes" if value else "no")
    return Text(str(value))
